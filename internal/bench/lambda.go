package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv/toolcache"
	"github.com/sf2loki/sf2loki/job"
)

// The Lambda rows run the sf2loki binary as the bootstrap of the AWS Lambda Runtime Interface
// Emulator (built into the tool cache): the cold-start init time the emulator reports (from the
// bootstrap's exec to its first request for an invocation), a warm invocation with nothing to
// do, and a 1 GiB EventLogFile shipped by one invocation, whose peak RSS sizes the function.

// targetLambdaInit is the target for the bootstrap's cold-start init.
const targetLambdaInit = 100 * time.Millisecond

// lambdaMemorySizes are the memory sizes the docs choose from, in MB (Lambda's MB are MiB).
var lambdaMemorySizes = []int64{128, 256, 512, 1024, 1769}

// lambdaHeadroom is the share of the function's memory a run may use at its peak: the rest is
// for the GC's variance between runs and the runtime's own pages.
const lambdaHeadroom = 0.8

// smallestLambdaMemory returns the smallest size of lambdaMemorySizes whose lambdaHeadroom share
// holds peak bytes.
func smallestLambdaMemory(peak int64) int64 {
	for _, mb := range lambdaMemorySizes {
		if float64(peak) <= lambdaHeadroom*float64(mb<<20) {
			return mb
		}
	}
	return 0
}

// rie is one running emulator with its bootstrap.
type rie struct {
	cmd *exec.Cmd
	url string
	log string
}

func startRIE(ctx context.Context, bin, dir, name string, timeout time.Duration, env []string) (*rie, error) {
	exe, err := toolcache.Ensure(ctx, toolcache.ToolLambdaRIE)
	if err != nil {
		return nil, fmt.Errorf("the Lambda emulator: %w", err)
	}
	// Two free ports, the emulator's and its Runtime API's, picked by listeners closed before
	// it starts.
	ports := make([]int, 2)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
	}
	logPath := filepath.Join(dir, name+".rie.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	cmd := exec.CommandContext(ctx, exe, "--runtime-interface-emulator-address", addr,
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(ports[1]), bin)
	cmd.Env = append(append(os.Environ(), "AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(int(timeout.Seconds())),
		"AWS_LAMBDA_FUNCTION_NAME=sf2loki"), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &rie{cmd: cmd, url: "http://" + addr, log: logPath}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return r, nil
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("the Lambda emulator did not listen on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *rie) stop() {
	if r.cmd.Process != nil {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		_ = r.cmd.Wait()
	}
}

// invoke runs one invocation and returns its run report and wall time.
func (r *rie) invoke(ctx context.Context) (*job.Report, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/2015-03-31/functions/function/invocations", strings.NewReader(`{}`))
	if err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	wall := time.Since(t0)
	if err != nil {
		return nil, 0, err
	}
	var rep job.Report
	if err := json.Unmarshal(body, &rep); err != nil || rep.Outcome == "" {
		return nil, 0, fmt.Errorf("the function answered %s", body)
	}
	return &rep, wall, nil
}

var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// initDuration is the emulator's measure of the bootstrap's init phase.
func (r *rie) initDuration() (time.Duration, error) {
	b, err := os.ReadFile(r.log)
	if err != nil {
		return 0, err
	}
	m := initReport.FindSubmatch(b)
	if m == nil {
		return 0, errors.New("the emulator reported no init duration")
	}
	f, err := strconv.ParseFloat(string(m[1]), 64)
	return time.Duration(f * float64(time.Millisecond)), err
}

// bootstrap returns the process id of the emulator's bootstrap child.
func (r *rie) bootstrap() (int, error) {
	parent := strconv.Itoa(r.cmd.Process.Pid)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 && f[1] == parent {
				return strconv.Atoi(e.Name())
			}
		}
	}
	return 0, errors.New("no bootstrap runs under the emulator")
}

// usage reads a live process's peak RSS (VmHWM) and CPU time (user + system).
func usage(pid int) (peak int64, cpu time.Duration, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, 0, err
			}
			peak = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0, 0, errors.New("short /proc stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14 of stat
	st, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	const ticks = 100                        // USER_HZ on Linux
	return peak, time.Duration(ut+st) * time.Second / ticks, nil
}

// lambdaELF ships the scenario's EventLogFile with one invocation (run.drain) through the
// emulator and measures it: wall, the bootstrap's CPU time and peak RSS.
func lambdaELF(ctx context.Context, o options, srv *server, name string, want int64) (Measure, error) {
	cfgPath, err := srv.config("lambda", "eventlogfile:\n  enabled: true\n  interval: Daily\n  event_types: [API]\n  lookback: 48h\n")
	if err != nil {
		return Measure{}, err
	}
	fmt.Fprintf(os.Stderr, "bench: %s: one Lambda invocation through the emulator\n", name)
	r, err := startRIE(ctx, o.bin, srv.dir, "lambda-elf", 900*time.Second,
		append(slices.Clone(o.runOnceEnv), "SF2LOKI_CONFIG="+cfgPath, "SF2LOKI_RUN__DRAIN=true"))
	if err != nil {
		return Measure{}, err
	}
	defer r.stop()
	rep, wall, err := r.invoke(ctx)
	if err != nil {
		return Measure{}, err
	}
	if rep.Outcome != job.OutcomeOK || !rep.CaughtUp || rep.Records != want {
		return Measure{}, fmt.Errorf("%s: the Lambda invocation shipped %d of %d rows, outcome %s: %s", name, rep.Records, want, rep.Outcome, rep.Error)
	}
	pid, err := r.bootstrap()
	if err != nil {
		return Measure{}, err
	}
	peak, cpu, err := usage(pid)
	if err != nil {
		return Measure{}, err
	}
	return Measure{Rows: rep.Records, Bytes: srv.CSVBytes, Wall: wall, CPU: cpu, PeakRSS: peak}, nil
}

// lambdaResult is the Lambda mode's start-up and no-op figures.
type lambdaResult struct {
	init, cold, warm time.Duration // medians
	runs             int
}

// lambdaNoop starts the emulator o.noopRuns times on a caught-up configuration: the init
// duration and the first (cold) invocation of each, then as many warm invocations of the last.
func lambdaNoop(ctx context.Context, o options, dir, cfgPath string) (lambdaResult, error) {
	var inits, colds, warms []time.Duration
	var last *rie
	defer func() {
		if last != nil {
			last.stop()
		}
	}()
	for i := range o.noopRuns {
		fmt.Fprintf(os.Stderr, "bench: Lambda cold start %d/%d\n", i+1, o.noopRuns)
		if last != nil {
			last.stop()
		}
		r, err := startRIE(ctx, o.bin, dir, fmt.Sprintf("lambda-noop-%d", i), 60*time.Second, append(slices.Clone(o.runOnceEnv), "SF2LOKI_CONFIG="+cfgPath))
		if err != nil {
			return lambdaResult{}, err
		}
		last = r
		rep, wall, err := r.invoke(ctx)
		if err != nil {
			return lambdaResult{}, err
		}
		if rep.Outcome != job.OutcomeOK || rep.Records != 0 {
			return lambdaResult{}, fmt.Errorf("no-op Lambda invocation: outcome %s, %d records: %s", rep.Outcome, rep.Records, rep.Error)
		}
		d, err := r.initDuration()
		if err != nil {
			return lambdaResult{}, err
		}
		inits, colds = append(inits, d), append(colds, wall)
	}
	for i := range o.noopRuns {
		fmt.Fprintf(os.Stderr, "bench: Lambda warm invocation with nothing to do %d/%d\n", i+1, o.noopRuns)
		rep, wall, err := last.invoke(ctx)
		if err != nil {
			return lambdaResult{}, err
		}
		if rep.Outcome != job.OutcomeOK || rep.Records != 0 {
			return lambdaResult{}, fmt.Errorf("warm no-op Lambda invocation: outcome %s, %d records", rep.Outcome, rep.Records)
		}
		warms = append(warms, wall)
	}
	return lambdaResult{init: medianDuration(inits), cold: medianDuration(colds), warm: medianDuration(warms), runs: o.noopRuns}, nil
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// lambdaNoopScenario serves a small org, catches a one-type EventLogFile configuration up with
// run-once, and measures the Lambda mode's start-up and no-op invocations on it.
func lambdaNoopScenario(ctx context.Context, o options, dir string) (lambdaResult, error) {
	srv, err := startServer(ctx, "mixed", filepath.Join(dir, "lambda"))
	if err != nil {
		return lambdaResult{}, err
	}
	defer srv.stop()
	cfgPath, err := srv.config("lambda-noop", "eventlogfile:\n  enabled: true\n  interval: Hourly\n  event_types: [URI]\n  lookback: 12h\n")
	if err != nil {
		return lambdaResult{}, err
	}
	if _, err := runChild(ctx, o.bin, []string{"run-once", "--config", cfgPath, "--drain"}, o.runOnceEnv, ""); err != nil {
		return lambdaResult{}, err
	}
	return lambdaNoop(ctx, o, srv.dir, cfgPath)
}
