package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
)

const (
	benchUser   = "bench@example.com"
	benchClient = "3MVG9-sf2loki-bench"
)

// world is a simulated org and a strict receiver (count-only), served by a child process of
// the harness (serve mode) so that the harness itself stays small: Linux carries a parent's
// peak RSS into the ru_maxrss of a child it vfork+execs, so the measured child's rusage is
// exact only when the harness's own peak is below the child's.
type world struct {
	dir      string
	keyPath  string
	org      *simsf.Org
	sf       *simsf.Server
	receiver *simloki.Running
}

// newWorld starts a simulated org (fresh data) and a count-only strict receiver.
func newWorld(dir string, keyPEM []byte, cert *x509.Certificate) (*world, error) {
	w := &world{dir: dir, keyPath: filepath.Join(dir, "key.pem")}
	if err := os.WriteFile(w.keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	w.org = simsf.New(simsf.Options{Seed: 7, Logger: slog.New(slog.DiscardHandler)})
	w.org.AddUser(benchUser, simsf.AllPermissions())
	if err := w.org.AddJWTApp(benchClient, cert, benchUser); err != nil {
		return nil, err
	}
	var err error
	if w.sf, err = w.org.Start(); err != nil {
		return nil, err
	}
	if w.receiver, err = simloki.Listen("", simloki.New(simloki.Options{CountOnly: true})); err != nil {
		_ = w.sf.Close()
		return nil, err
	}
	return w, nil
}

func (w *world) close() {
	_ = w.receiver.Close()
	_ = w.sf.Close()
}

// served is what a serve-mode child tells the harness, as one JSON line on stdout.
type served struct {
	SalesforceURL string `json:"salesforce_url"`
	PushURL       string `json:"push_url"`
	CountURL      string `json:"count_url"` // GET: entries the receiver accepted so far
	KeyPath       string `json:"key_path"`
	CSVPath       string `json:"csv_path,omitempty"` // the EventLogFile's bytes (elf scenarios)
	CSVBytes      int64  `json:"csv_bytes,omitempty"`
}

// serve is the serve mode: it builds the scenario's world in dir, prints a served line, and
// serves until stdin is closed.
func serve(scenario, dir string) error {
	keys, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		return err
	}
	w, err := newWorld(dir, keys.KeyPEM, keys.Certificate)
	if err != nil {
		return err
	}
	defer w.close()
	out := served{SalesforceURL: w.sf.URL, PushURL: w.receiver.PushURL(), KeyPath: w.keyPath}
	now := time.Now().UTC()
	switch {
	case scenario == "mixed":
		if err := w.org.Populate(mixedData); err != nil {
			return err
		}
	case strings.HasPrefix(scenario, "soql:"):
		n, err := strconv.Atoi(strings.TrimPrefix(scenario, "soql:"))
		if err != nil {
			return err
		}
		if err := w.org.Populate(denseSOQLData(n)); err != nil {
			return err
		}
	case strings.HasPrefix(scenario, "apexlog:"):
		n, err := strconv.Atoi(strings.TrimPrefix(scenario, "apexlog:"))
		if err != nil {
			return err
		}
		if err := w.org.Populate(apexData(n)); err != nil {
			return err
		}
		// A real org answers a REST call in 50-200 ms; the bodies' throughput is set by it.
		w.org.SetLatencyRange(50*time.Millisecond, 200*time.Millisecond)
	case strings.HasPrefix(scenario, "elf:"):
		size, err := strconv.ParseInt(strings.TrimPrefix(scenario, "elf:"), 10, 64)
		if err != nil {
			return err
		}
		id, err := w.org.AddEventLogFile(simsf.EventLogFileSpec{EventType: "API", Interval: simsf.IntervalDaily,
			LogDate: now.Add(-24 * time.Hour).Truncate(24 * time.Hour), CreatedDate: now.Add(-time.Hour), TargetBytes: size})
		if err != nil {
			return err
		}
		out.CSVPath = filepath.Join(dir, "body.csv")
		if out.CSVBytes, err = writeContent(w.org, id, out.CSVPath); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown scenario %q", scenario)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	count := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(rw, w.receiver.Count())
	})}
	go func() { _ = count.Serve(ln) }()
	defer count.Close()
	out.CountURL = "http://" + ln.Addr().String() + "/count"
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	fmt.Printf("%s\n", b)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the harness closes our stdin
	return nil
}

// mixedData is the small org of the API-calls scenario.
var mixedData = simsf.DataSet{
	Window: 6 * time.Hour, EventTypes: []string{"URI", "Report"}, HourlyFiles: 6, DailyFiles: -1, RowsPerFile: 2000,
	LoginHistory: 20000, SetupAuditTrail: 2000, AuditEvents: -1, LoginEvents: -1, ApiEvents: -1,
	ApiAnomalyEventStore: -1, ApexLogs: 400, LateRows: -1,
}

// apexData is n ApexLogs with bodies and nothing else.
func apexData(n int) simsf.DataSet {
	return simsf.DataSet{
		Window: time.Hour, HourlyFiles: -1, DailyFiles: -1, LoginHistory: -1, SetupAuditTrail: -1, AuditEvents: -1,
		LoginEvents: -1, ApiEvents: -1, ApiAnomalyEventStore: -1, ApexLogs: n, LateRows: -1,
	}
}

// denseSOQLData is n LoginHistory rows within one hour: every overlap window of the SOQL source
// is full (max_overlap_ids), so each cursor carries its largest seen-set.
func denseSOQLData(n int) simsf.DataSet {
	return simsf.DataSet{
		Window: time.Hour, HourlyFiles: -1, DailyFiles: -1, LoginHistory: n, SetupAuditTrail: -1, AuditEvents: -1,
		LoginEvents: -1, ApiEvents: -1, ApiAnomalyEventStore: -1, ApexLogs: -1, LateRows: -1,
	}
}

func writeContent(org *simsf.Org, id, path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	if err := org.EventLogFileContent(id, f); err != nil {
		_ = f.Close()
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return 0, err
	}
	return fi.Size(), f.Close()
}

// server is a running serve-mode child.
type server struct {
	served
	dir   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startServer runs the harness binary in serve mode for a scenario.
func startServer(ctx context.Context, scenario, dir string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &server{dir: dir, cmd: exec.CommandContext(ctx, self, "-serve", scenario, "-dir", dir)}
	s.cmd.Stderr = os.Stderr
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &s.served)
	}
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("serve %s: %w", scenario, err)
	}
	return s, nil
}

func (s *server) stop() {
	_ = s.stdin.Close()
	_ = s.cmd.Wait()
}

// count returns the entries the receiver accepted so far.
func (s *server) count(ctx context.Context) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.CountURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// config writes the configuration a run-once process of this world runs with: sources is the
// YAML of the sources section; the state document is <name>.state.json, and the entries carry
// environment=<name>, so that a repeated run (from an empty state) ships to streams of its own
// instead of being refused as too far behind the previous run's.
func (s *server) config(name, sources string) (string, error) {
	yaml := fmt.Sprintf(`salesforce:
  login_url: %s
  client_id: %s
  username: %s
  private_key_file: %s
sources:
%s
sink:
  loki:
    url: %s
    labels:
      environment: %s
state:
  file:
    path: %s
run:
  max_duration: 60m
log:
  level: warn
`, s.SalesforceURL, benchClient, benchUser, s.KeyPath, indent(sources, "  "), s.PushURL, name, filepath.Join(s.dir, name+".state.json"))
	path := filepath.Join(s.dir, name+".yaml")
	return path, os.WriteFile(path, []byte(yaml), 0o600)
}

func indent(s, pre string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pre + l
	}
	return strings.Join(lines, "\n")
}

// child is one finished run-once process.
type child struct {
	Report *job.Report
	Wall   time.Duration
	CPU    time.Duration
	MaxRSS int64 // bytes
	Stats  *probeStats
	Stderr string
}

// probeStats mirrors probe.Stats.
type probeStats struct {
	Mallocs    uint64 `json:"mallocs"`
	TotalAlloc uint64 `json:"total_alloc"`
	NumGC      uint32 `json:"num_gc"`
	VmHWM      int64  `json:"vm_hwm"`
	PeakLive   int64  `json:"peak_live"`
}

// peakRSS is the child's peak RSS: its own VmHWM when the probe reported it, else rusage's (which
// carries this process's size when it is larger, see world).
func (c *child) peakRSS() int64 {
	if c.Stats != nil && c.Stats.VmHWM > 0 {
		return c.Stats.VmHWM
	}
	return c.MaxRSS
}

// runChild runs bin with args and the environment additions env, and collects its report,
// resource usage and (for the probe) allocation counters.
func runChild(ctx context.Context, bin string, args []string, env []string, statsPath string) (*child, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), env...)
	if statsPath != "" {
		cmd.Env = append(cmd.Env, "SF2LOKI_BENCH_STATS="+statsPath)
	}
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	c := &child{Wall: wall, Stderr: stderr.String()}
	if statsPath != "" {
		// Kept with -keep: what the child printed (a GODEBUG=gctrace=1 trace, say).
		_ = os.WriteFile(strings.TrimSuffix(statsPath, ".json")+".stderr", stderr.Bytes(), 0o600)
	}
	if cmd.ProcessState == nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	c.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.MaxRSS = ru.Maxrss * 1024 // Linux reports KiB
	}
	if line := lastLine(stdout.Bytes()); len(line) > 0 {
		var rep job.Report
		if jerr := json.Unmarshal(line, &rep); jerr == nil {
			c.Report = &rep
		}
	}
	if err != nil {
		return c, fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, tail(c.Stderr, 2000))
	}
	if c.Report == nil {
		return c, fmt.Errorf("%s printed no run report\n%s", filepath.Base(bin), tail(c.Stderr, 2000))
	}
	if statsPath != "" {
		b, err := os.ReadFile(statsPath)
		if err != nil {
			return c, err
		}
		c.Stats = &probeStats{}
		if err := json.Unmarshal(b, c.Stats); err != nil {
			return c, err
		}
	}
	return c, nil
}

func lastLine(b []byte) []byte {
	b = bytes.TrimRight(b, "\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// buildBinaries builds sf2loki (as `make build` does), the probe and the maxrss launcher into dir.
func buildBinaries(ctx context.Context, dir string) (bin, probe, launcher string, err error) {
	bin, probe, launcher = filepath.Join(dir, "sf2loki"), filepath.Join(dir, "sf2loki-probe"), filepath.Join(dir, "maxrss")
	for _, b := range []struct{ out, pkg string }{{bin, "./cmd/sf2loki"}, {probe, "./internal/bench/probe"}, {launcher, "./internal/bench/maxrss"}} {
		if err := goBuild(ctx, ".", b.out, b.pkg); err != nil {
			return "", "", "", err
		}
	}
	return bin, probe, launcher, nil
}

// goBuild builds the package pkg of the module tree src into out as `make build` builds sf2loki:
// static (no cgo, so no C library mapped into the process), without paths, symbols or DWARF,
// with the build tags of the tree's Makefile (see makeTags). It then drops the binary from the
// page cache, so that its first run reads it from disk as a container or a timer's first start
// does (see evict).
func goBuild(ctx context.Context, src, out, pkg string) error {
	tags, err := makeTags(src)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags="+tags, "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir, cmd.Stderr = src, os.Stderr
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s in %s: %w", pkg, src, err)
	}
	return evict(out)
}

// makeTags returns the TAGS of the Makefile of the tree src, comma-separated as -tags takes them:
// every release build carries them, and a tree from before they existed has none.
func makeTags(src string) (string, error) {
	mk, err := os.ReadFile(filepath.Join(src, "Makefile"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^TAGS := (.*)$`).FindSubmatch(mk)
	if m == nil {
		return "", nil
	}
	return strings.Join(strings.Fields(string(m[1])), ","), nil
}

// evict writes path to disk and drops its pages from the page cache. A file the linker has just
// written sits in the cache in large blocks (folios); when a process maps it, each page fault
// maps the whole block around it, so a freshly built binary's resident size is its layout's and
// the cache's, not the program's: the same no-op run-once peaked 1.4 MiB higher from a fresh
// build than from the same bytes read back from disk, which is how a deployment runs it.
func evict(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("evict %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("evict %s from the page cache: %w", path, err)
	}
	return nil
}

// jobSourceReport is a source's share of a run report.
type jobSourceReport = job.SourceReport

// startCPUProfile profiles this process into path until the returned stop is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}
