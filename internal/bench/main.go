// Command bench is sf2loki's end-to-end benchmark harness (`make bench`, `go run
// ./internal/bench`). It builds the sf2loki binary, starts a simulated Salesforce org and a
// strict Loki receiver (count-only) in this process, runs real `sf2loki run-once` processes
// against them, and prints one table: rows/s and MB/s per core, allocations per row, peak RSS
// (from the child's rusage), Salesforce API calls per 10 000 records by source, the ratio to
// the ceiling (Ceiling, defined once in ceiling.go), and the wall time of a run-once with
// nothing to do. Memory is measured for a 100 MiB and a 1 GiB EventLogFile side by side.
//
// Per core means per CPU second of the process doing the work: the run-once child's user +
// system time from rusage, and this process's for the ceiling. Throughput figures are medians
// of -repeat runs (the largest file runs -repeat-large times).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sf2loki/sf2loki/config"
)

type options struct {
	sizes       []int64
	repeat      int
	repeatLarge int
	noopRuns    int
	soqlRows    int
	apexLogs    int
	before      string
	keep        bool
	profileDir  string
	markdown    string
	strict      bool
	runOnceEnv  []string
	lambda      bool
	only        map[string]bool // scenarios to run (-only); empty: all
	bin         string          // the sf2loki binary, the Lambda rows' bootstrap
	launcher    string          // the maxrss launcher, which measures a binary's peak RSS
}

func main() {
	var o options
	sizes := flag.String("sizes", "100MiB,1GiB", "EventLogFile sizes shipped end to end (the last one is the memory target's)")
	flag.IntVar(&o.repeat, "repeat", 3, "runs per measurement; the table shows medians")
	flag.IntVar(&o.repeatLarge, "repeat-large", 3, "runs of files of 1 GiB and more")
	flag.IntVar(&o.noopRuns, "noop-runs", 9, "run-once invocations with nothing to do (median wall time)")
	flag.IntVar(&o.soqlRows, "soql-rows", 100000, "LoginHistory rows of the SOQL memory scenario (one hour, full overlap windows)")
	flag.IntVar(&o.apexLogs, "apex-logs", 120, "ApexLog logs of the ApexLog scenario (bodies downloaded against an org answering in 50-200 ms)")
	flag.StringVar(&o.before, "before", "", "a source tree of an earlier commit (a git worktree): measure it and this tree side by side instead of the targets")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory (configurations, state, profiles)")
	flag.StringVar(&o.profileDir, "profile", "", "write pprof CPU profiles of the first end-to-end run of each size and of the ceiling here")
	flag.StringVar(&o.markdown, "markdown", "", "also write the table as Markdown to this file")
	flag.BoolVar(&o.strict, "strict", false, "exit 1 when a target of docs/performance.md is missed")
	flag.BoolVar(&o.lambda, "lambda", true, "also measure the Lambda mode through the Runtime Interface Emulator (cold start, no-op, the largest file's peak RSS)")
	quick := flag.Bool("quick", false, "small sizes and few runs (a smoke test of the harness)")
	only := flag.String("only", "", "run only these scenarios, comma-separated: "+strings.Join(scenarioNames, ", ")+" (default: all; -strict then checks only their targets)")
	flag.Func("runonce-env", "KEY=VALUE added to the environment of the run-once processes only (repeatable), e.g. GOMEMLIMIT=48MiB", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("%q is not KEY=VALUE", v)
		}
		o.runOnceEnv = append(o.runOnceEnv, v)
		return nil
	})
	// Modes of the harness's own child processes.
	serveScenario := flag.String("serve", "", "(internal) serve a scenario's simulated org and receiver until stdin closes")
	serveDir := flag.String("dir", "", "(internal) serve mode: working directory")
	ceilingCSV := flag.String("ceiling", "", "(internal) measure the ceiling over this CSV file and print it as JSON")
	ceilingConfig := flag.String("config", "", "(internal) ceiling mode: configuration with the shaping and Loki settings")
	cpuProfile := flag.String("cpuprofile", "", "(internal) ceiling mode: write a CPU profile here")
	networkConfig := flag.String("network", "", "(internal) measure the source over the network without the job, with this configuration, and print it as JSON")
	pushCSV := flag.String("push", "", "(internal) measure one 4 MiB push of this CSV's first entries and print it as JSON")
	flag.Parse()
	switch {
	case *pushCSV != "":
		if err := pushMode(*pushCSV, *ceilingConfig); err != nil {
			fmt.Fprintln(os.Stderr, "bench push:", err)
			os.Exit(1)
		}
		return
	case *serveScenario != "":
		if err := serve(*serveScenario, *serveDir); err != nil {
			fmt.Fprintln(os.Stderr, "bench serve:", err)
			os.Exit(1)
		}
		return
	case *networkConfig != "":
		if err := networkMode(*networkConfig); err != nil {
			fmt.Fprintln(os.Stderr, "bench network:", err)
			os.Exit(1)
		}
		return
	case *ceilingCSV != "":
		if err := ceilingMode(*ceilingCSV, *ceilingConfig, *cpuProfile); err != nil {
			fmt.Fprintln(os.Stderr, "bench ceiling:", err)
			os.Exit(1)
		}
		return
	}
	if *quick {
		*sizes, o.repeat, o.repeatLarge, o.noopRuns, o.soqlRows, o.apexLogs = "8MiB,32MiB", 1, 1, 3, 20000, 40
	}
	var err error
	if o.only, err = parseOnly(*only); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.sizes, err = parseSizes(*sizes); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.before != "" {
		if o.before, err = filepath.Abs(o.before); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		if err := compare(context.Background(), o, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	missed, err := run(context.Background(), o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if missed && o.strict {
		os.Exit(1)
	}
}

// scenarioNames are the values -only accepts: the EventLogFile files with their ceiling, the SOQL
// scenario, the ApexLog scenario, the mixed org with the no-op runs, and the Lambda rows.
var scenarioNames = []string{"elf", "soql", "apexlog", "noop", "lambda"}

func parseOnly(s string) (map[string]bool, error) {
	if s == "" {
		return nil, nil
	}
	only := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(scenarioNames, f) {
			return nil, fmt.Errorf("-only: unknown scenario %q (want %s)", f, strings.Join(scenarioNames, ", "))
		}
		only[f] = true
	}
	return only, nil
}

// runs reports whether scenario is to run: every scenario unless -only names some.
func (o options) runs(scenario string) bool {
	return len(o.only) == 0 || o.only[scenario]
}

func parseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := int64(1)
		for suf, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
			if n, ok := strings.CutSuffix(f, suf); ok {
				f, mult = n, m
			}
		}
		var n int64
		if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
			return nil, fmt.Errorf("-sizes: %q is not a size like 100MiB", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// row is one line of the table; zero fields print as "-".
type row struct {
	name       string
	m          Measure
	ratio      float64 // to the ceiling
	apiPer10k  float64
	apiDetail  string
	noopWall   time.Duration
	hasAPI     bool
	throughput bool
}

func run(ctx context.Context, o options, out io.Writer) (missed bool, err error) {
	dir, err := os.MkdirTemp("", "sf2loki-bench-")
	if err != nil {
		return false, err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "bench: working directory", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return false, err
		}
	}
	markStart()
	if err := chdirModuleRoot(ctx); err != nil {
		return false, err
	}
	fmt.Fprintln(os.Stderr, "bench: building sf2loki, the probe and the launcher")
	bin, probe, launcher, err := buildBinaries(ctx, dir)
	if err != nil {
		return false, err
	}
	o.bin, o.launcher = bin, launcher

	var rows, lambdaRows []row
	var verdicts, allocVerdicts []string
	var rss []int64
	var lambdaRSS int64
	var ratios, networkRatios, jobRatios []float64
	var push pushResult
	sizes := o.sizes
	if !o.runs("elf") {
		sizes = nil
	}
	for _, size := range sizes {
		reps := o.repeat
		if size >= 1<<30 {
			reps = o.repeatLarge
		}
		ceil, e2e, err := eventLogFileScenario(ctx, o, dir, probe, size, reps)
		if err != nil {
			return false, err
		}
		ratio := e2e.m.RowsPerCoreSec() / ceil.RowsPerCoreSec()
		ratios = append(ratios, ratio)
		networkRatio := e2e.network.RowsPerCoreSec() / ceil.RowsPerCoreSec()
		networkRatios, jobRatios = append(networkRatios, networkRatio), append(jobRatios, e2e.m.RowsPerCoreSec()/e2e.network.RowsPerCoreSec())
		verdicts = append(verdicts, verdict(&missed, ceil.MBPerCoreSec() >= targetCeilingMBPerCore,
			"the ceiling ≥ %d MB/s per core (%s): %.1f", targetCeilingMBPerCore, formatSize(size), ceil.MBPerCoreSec()))
		if size >= allocCheckMinBytes {
			allocVerdicts = append(allocVerdicts, allocVerdict(&missed, "ceiling", "the ceiling ("+formatSize(size)+")", ceil),
				allocVerdict(&missed, "run-once", "run-once ("+formatSize(size)+")", e2e.m))
		}
		rss = append(rss, e2e.m.PeakRSS)
		if push.payload == 0 {
			push = e2e.push
		}
		rows = append(rows, row{name: "ceiling: EventLogFile API " + formatSize(size), m: ceil, ratio: 1, throughput: true},
			row{name: "network: EventLogFile API " + formatSize(size) + ", the source over HTTP and its pushes, without the job", m: e2e.network, ratio: networkRatio, throughput: true},
			row{name: "run-once: EventLogFile API " + formatSize(size), m: e2e.m, ratio: ratio, throughput: true,
				hasAPI: true, apiPer10k: e2e.apiPer10k, apiDetail: e2e.apiDetail})
		if e2e.lambda.Rows > 0 {
			lambdaRows = append(lambdaRows, row{name: "lambda: EventLogFile API " + formatSize(size) + " (one invocation, emulator)", m: e2e.lambda, throughput: true})
			lambdaRSS = e2e.lambda.PeakRSS
		}
	}
	var soqlVerdicts []string
	if o.runs("soql") {
		soql, err := soqlScenario(ctx, o, dir, probe)
		if err != nil {
			return false, err
		}
		rows = append(rows, soql)
		allocVerdicts = append(allocVerdicts, allocVerdict(&missed, "soql", "the SOQL scenario", soql.m))
		soqlVerdicts = []string{
			verdict(&missed, soql.m.RowsPerCoreSec() >= targetSOQLRowsPerCore, "SOQL ≥ %d rows per CPU second: %.0f", targetSOQLRowsPerCore, soql.m.RowsPerCoreSec()),
			verdict(&missed, soql.m.AllocBytesPerRow() <= targetSOQLAllocBytes, "SOQL ≤ %d B allocated per row: %.0f", targetSOQLAllocBytes, soql.m.AllocBytesPerRow()),
			verdict(&missed, soql.m.PeakRSS <= targetSOQLPeakRSS, "SOQL peak RSS ≤ %.0f MiB: %.1f MiB", mib(targetSOQLPeakRSS), mib(soql.m.PeakRSS)),
		}
	}
	var apexVerdicts []string
	if o.runs("apexlog") {
		apex, err := apexScenario(ctx, o, dir, probe)
		if err != nil {
			return false, err
		}
		rows = append(rows, apex.rows...)
		apexVerdicts = []string{verdict(&missed, apex.speedup >= targetApexSpeedup, "ApexLog ≥ %d× the logs per wall second of one download at a time: %.1f×", targetApexSpeedup, apex.speedup)}
	}
	var noopVerdicts []string
	if o.runs("noop") {
		mixed, noops, err := mixedScenario(ctx, o, dir, bin, probe)
		if err != nil {
			return false, err
		}
		rows = append(rows, mixed...)
		for _, n := range noops {
			rows = append(rows, row{name: fmt.Sprintf("nothing to do: %s (median of %d)", n.name, o.noopRuns), m: n.m, noopWall: n.wall})
		}
		noop := noops[0]
		noopVerdicts = []string{
			verdict(&missed, noop.wall <= targetNoopWall, "run-once with nothing to do (%s) ≤ %.0f ms: %.1f ms", noop.name, ms(targetNoopWall), ms(noop.wall)),
			verdict(&missed, noop.m.PeakRSS <= targetNoopRSS, "run-once with nothing to do (%s) ≤ %.0f MiB peak RSS: %.1f MiB", noop.name, mib(targetNoopRSS), mib(noop.m.PeakRSS)),
		}
	}
	if push.payload > 0 {
		rows = append(rows, row{name: fmt.Sprintf("loki push of %.1f MiB, a new client (bytes allocated / payload: %.2f)", mib(int64(push.payload)), push.copies())})
	}
	var lambdaVerdicts []string
	if o.lambda && o.runs("lambda") {
		lam, err := lambdaNoopScenario(ctx, o, dir)
		if err != nil {
			return false, err
		}
		rows = append(rows, row{name: fmt.Sprintf("lambda: bootstrap cold-start init (emulator, median of %d)", lam.runs), noopWall: lam.init},
			row{name: fmt.Sprintf("lambda: first invocation, nothing to do (median of %d)", lam.runs), noopWall: lam.cold},
			row{name: fmt.Sprintf("lambda: warm invocation, nothing to do (median of %d)", lam.runs), noopWall: lam.warm})
		rows = append(rows, lambdaRows...)
		lambdaVerdicts = append(lambdaVerdicts, verdict(&missed, lam.init <= targetLambdaInit, "Lambda bootstrap cold-start init ≤ 100 ms: %.1f ms", ms(lam.init)))
		if lambdaRSS > 0 {
			mb := smallestLambdaMemory(lambdaRSS)
			lambdaVerdicts = append(lambdaVerdicts, fmt.Sprintf("INFO  Lambda: peak RSS %.1f MiB shipping a %s EventLogFile in one invocation: the smallest memory size holding it with %.0f%% headroom is %d MB",
				float64(lambdaRSS)/(1<<20), formatSize(o.sizes[len(o.sizes)-1]), 100*(1-lambdaHeadroom), mb))
		}
	}

	header := fmt.Sprintf("sf2loki bench — %s %s/%s, %d CPUs, %s, %s", runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), machineNote(), time.Now().UTC().Format("2006-01-02"))
	if len(o.runOnceEnv) > 0 {
		header += "; run-once environment: " + strings.Join(o.runOnceEnv, " ")
	}
	if len(o.only) > 0 {
		header += "; only " + strings.Join(sortedKeys(o.only), ", ")
	}
	if len(sizes) > 0 {
		verdicts = append(verdicts,
			verdict(&missed, slices.Min(ratios) >= targetCeilingRatio, "EventLogFile end to end ≥ %s of the ceiling per CPU second: %s", pct(targetCeilingRatio), joinRatios(ratios)),
			fmt.Sprintf("INFO  of that distance, the network's part: the source over HTTP and its pushes without the job at %s of the ceiling per CPU second; the job's part: run-once at %s of that",
				joinRatios(networkRatios), joinRatios(jobRatios)))
		if largest := sizes[len(sizes)-1]; largest >= targetRSSFileBytes {
			verdicts = append(verdicts, verdict(&missed, rss[len(rss)-1] <= targetPeakRSS, "peak RSS ≤ %.0f MiB shipping a %s EventLogFile: %.1f MiB", mib(targetPeakRSS), formatSize(largest), mib(rss[len(rss)-1])))
		} else {
			verdicts = append(verdicts, fmt.Sprintf("peak RSS target (≤ %.0f MiB for 1 GiB) not measured: largest file %s", mib(targetPeakRSS), formatSize(largest)))
		}
		if len(rss) > 1 {
			grow := float64(rss[len(rss)-1])/float64(rss[0]) - 1
			verdicts = append(verdicts, verdict(&missed, grow <= targetRSSFlat, "peak RSS flat in the file size (%s over %s ≤ +%s): %+.1f%%",
				formatSize(sizes[len(sizes)-1]), formatSize(sizes[0]), pct(targetRSSFlat), 100*grow))
		}
	}
	verdicts = append(verdicts, noopVerdicts...)
	verdicts = append(verdicts, soqlVerdicts...)
	verdicts = append(verdicts, apexVerdicts...)
	if push.payload > 0 {
		verdicts = append(verdicts, verdict(&missed, push.copies() <= targetPushCopies, "a 4 MiB push allocates ≤ %d× its payload: %.2f×", targetPushCopies, push.copies()))
	}
	verdicts = append(verdicts, allocVerdicts...)
	verdicts = append(verdicts, lambdaVerdicts...)
	printTable(out, header, rows, verdicts)
	if o.markdown != "" {
		f, err := os.Create(o.markdown)
		if err != nil {
			return missed, err
		}
		defer f.Close()
		printMarkdown(f, header, rows, verdicts)
	}
	return missed, nil
}

func verdict(missed *bool, ok bool, format string, args ...any) string {
	mark := "PASS"
	if !ok {
		mark, *missed = "MISS", true
	}
	return mark + "  " + fmt.Sprintf(format, args...)
}

func joinRatios(rs []float64) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%.0f%%", 100*r))
	}
	return strings.Join(parts, ", ")
}

// e2eResult is an end-to-end measurement with its API call count.
type e2eResult struct {
	m         Measure
	network   Measure // the source over the network without the job (Network), median
	apiPer10k float64
	apiDetail string
	lambda    Measure    // the same file in one Lambda invocation (the largest size only)
	push      pushResult // one 4 MiB push of the file's first entries
}

// eventLogFileSources is the sources section of the EventLogFile scenario: one API file a day.
const eventLogFileSources = "eventlogfile:\n  enabled: true\n  interval: Daily\n  event_types: [API]\n  lookback: 48h\n"

// eventLogFileScenario ships one API EventLogFile of about size bytes with run-once --drain,
// reps times from an empty state, and measures the ceiling over the same bytes.
func eventLogFileScenario(ctx context.Context, o options, dir, probe string, size int64, reps int) (Measure, e2eResult, error) {
	name := "elf-" + formatSize(size)
	srv, err := startServer(ctx, fmt.Sprintf("elf:%d", size), filepath.Join(dir, name))
	if err != nil {
		return Measure{}, e2eResult{}, err
	}
	defer srv.stop()
	defer os.Remove(srv.CSVPath)

	var ceilings, networks, runs []Measure
	var api e2eResult
	var push pushResult
	for i := range reps {
		cfgPath, err := srv.config(fmt.Sprintf("run-%d", i), eventLogFileSources)
		if err != nil {
			return Measure{}, e2eResult{}, err
		}
		fmt.Fprintf(os.Stderr, "bench: %s: ceiling %d/%d\n", name, i+1, reps)
		profile := ""
		if o.profileDir != "" && i == 0 {
			profile = filepath.Join(o.profileDir, "ceiling-"+formatSize(size)+".pprof")
		}
		c, err := runCeiling(ctx, srv.CSVPath, cfgPath, profile)
		if err != nil {
			return Measure{}, e2eResult{}, err
		}
		ceilings = append(ceilings, c)

		fmt.Fprintf(os.Stderr, "bench: %s: network %d/%d\n", name, i+1, reps)
		n, err := runNetwork(ctx, srv, fmt.Sprintf("network-%d", i), c.Rows)
		if err != nil {
			return Measure{}, e2eResult{}, err
		}
		n.Bytes = srv.CSVBytes
		networks = append(networks, n)

		fmt.Fprintf(os.Stderr, "bench: %s: run-once %d/%d\n", name, i+1, reps)
		env := slices.Clone(o.runOnceEnv)
		if o.profileDir != "" && i == 0 {
			env = append(env, "SF2LOKI_BENCH_CPUPROFILE="+filepath.Join(o.profileDir, "runonce-"+formatSize(size)+".pprof"))
		}
		m, a, err := drainOnce(ctx, srv, probe, name, cfgPath, env, i, c.Rows)
		if err != nil {
			return Measure{}, e2eResult{}, err
		}
		m.Bytes = srv.CSVBytes
		runs, api = append(runs, m), a
		if i == 0 {
			if push, err = runPush(ctx, srv.CSVPath, cfgPath); err != nil {
				return Measure{}, e2eResult{}, err
			}
		}
	}
	res := e2eResult{m: median(runs), network: median(networks), apiPer10k: api.apiPer10k, apiDetail: api.apiDetail, push: push}
	if o.lambda && size == o.sizes[len(o.sizes)-1] {
		if res.lambda, err = lambdaELF(ctx, o, srv, name, ceilings[0].Rows); err != nil {
			return Measure{}, e2eResult{}, err
		}
	}
	return median(ceilings), res, nil
}

// soqlScenario ships o.soqlRows LoginHistory rows, all within one hour, with run-once --drain
// from an empty state, o.repeat times: the SOQL path's throughput and memory with every overlap
// window full (each cursor carries max_overlap_ids remembered ids). There is no ceiling to
// compare with: the rows come from paged queries, not from one body.
func soqlScenario(ctx context.Context, o options, dir, probe string) (row, error) {
	name := fmt.Sprintf("soql-%d", o.soqlRows)
	srv, err := startServer(ctx, fmt.Sprintf("soql:%d", o.soqlRows), filepath.Join(dir, name))
	if err != nil {
		return row{}, err
	}
	defer srv.stop()
	var runs []Measure
	var api e2eResult
	for i := range o.repeat {
		cfgPath, err := srv.config(fmt.Sprintf("run-%d", i), "soql:\n  enabled: true\n  objects:\n    - name: LoginHistory\n      lookback: 2h\n")
		if err != nil {
			return row{}, err
		}
		fmt.Fprintf(os.Stderr, "bench: %s: run-once %d/%d\n", name, i+1, o.repeat)
		m, a, err := drainOnce(ctx, srv, probe, name, cfgPath, o.runOnceEnv, i, int64(o.soqlRows))
		if err != nil {
			return row{}, err
		}
		runs, api = append(runs, m), a
	}
	return row{name: fmt.Sprintf("run-once: soql LoginHistory, %d rows in one hour", o.soqlRows), m: median(runs), throughput: true,
		hasAPI: true, apiPer10k: api.apiPer10k, apiDetail: api.apiDetail}, nil
}

// drainOnce runs the probe's run-once --drain with cfgPath and checks that it shipped exactly want
// rows, all of which the receiver got; it returns the child's measurement and API calls.
func drainOnce(ctx context.Context, srv *server, probe, name, cfgPath string, env []string, i int, want int64) (Measure, e2eResult, error) {
	before, err := srv.count(ctx)
	if err != nil {
		return Measure{}, e2eResult{}, err
	}
	ch, err := runChild(ctx, probe, []string{"run-once", "--config", cfgPath, "--drain"}, env, filepath.Join(srv.dir, fmt.Sprintf("stats-%d.json", i)))
	if err != nil {
		return Measure{}, e2eResult{}, err
	}
	after, err := srv.count(ctx)
	if err != nil {
		return Measure{}, e2eResult{}, err
	}
	rep := ch.Report
	if rep.Outcome != "ok" || !rep.CaughtUp || rep.Records != want || after-before != rep.Records {
		return Measure{}, e2eResult{}, fmt.Errorf("%s: run-once shipped %d of %d rows (receiver got %d), outcome %s, caught up %v: %s",
			name, rep.Records, want, after-before, rep.Outcome, rep.CaughtUp, rep.Error)
	}
	checkRSS(name, ch)
	m := Measure{Rows: rep.Records, Wall: ch.Wall, CPU: ch.CPU, Mallocs: ch.Stats.Mallocs, Alloc: ch.Stats.TotalAlloc, PeakRSS: ch.peakRSS(), PeakLive: ch.Stats.PeakLive}
	return m, apiCalls(rep.Sources, rep.Records), nil
}

// checkRSS warns when the child's rusage peak and its own VmHWM disagree by more than 5%: the
// rusage reading would then carry this process's peak (see world).
func checkRSS(name string, ch *child) {
	if ch.Stats == nil || ch.Stats.VmHWM == 0 {
		return
	}
	if d := float64(ch.MaxRSS-ch.Stats.VmHWM) / float64(ch.Stats.VmHWM); d > 0.05 || d < -0.05 {
		fmt.Fprintf(os.Stderr, "bench: %s: rusage peak RSS %.1f MiB differs from the child's VmHWM %.1f MiB\n",
			name, float64(ch.MaxRSS)/(1<<20), float64(ch.Stats.VmHWM)/(1<<20))
	}
}

// runCeiling measures Ceiling in a child process (ceiling mode), so that its memory never
// counts towards this process's peak.
func runCeiling(ctx context.Context, csvPath, cfgPath, profile string) (Measure, error) {
	self, err := os.Executable()
	if err != nil {
		return Measure{}, err
	}
	return runCeilingOf(ctx, self, csvPath, cfgPath, profile)
}

// measureChild runs a harness binary in one of its measuring modes (what: ceiling, network)
// with args and reads its Measure.
func measureChild(ctx context.Context, harness, what string, args []string) (Measure, error) {
	cmd := exec.CommandContext(ctx, harness, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return Measure{}, fmt.Errorf("%s: %w", what, err)
	}
	var m Measure
	if err := json.Unmarshal(out, &m); err != nil {
		return Measure{}, fmt.Errorf("%s: %w", what, err)
	}
	return m, nil
}

// ceilingMode is the ceiling child: it measures Ceiling and prints the Measure as JSON.
func ceilingMode(csvPath, cfgPath, profile string) error {
	cfg, err := config.Load(config.LoadOptions{Path: cfgPath})
	if err != nil {
		return err
	}
	if profile != "" {
		stop, err := startCPUProfile(profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	m, err := Ceiling(csvPath, "API", cfg)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(m)
}

// median returns, field by field, the median of the measures (rows and bytes are equal).
func median(ms []Measure) Measure {
	pick := func(get func(Measure) int64) int64 {
		v := make([]int64, len(ms))
		for i, m := range ms {
			v[i] = get(m)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return Measure{
		Rows: ms[0].Rows, Bytes: ms[0].Bytes,
		Wall:     time.Duration(pick(func(m Measure) int64 { return int64(m.Wall) })),
		CPU:      time.Duration(pick(func(m Measure) int64 { return int64(m.CPU) })),
		Mallocs:  uint64(pick(func(m Measure) int64 { return int64(m.Mallocs) })), //nolint:gosec // counts
		Alloc:    uint64(pick(func(m Measure) int64 { return int64(m.Alloc) })),   //nolint:gosec // counts
		PeakRSS:  pick(func(m Measure) int64 { return m.PeakRSS }),
		PeakLive: pick(func(m Measure) int64 { return m.PeakLive }),
	}
}

// noopResult is the median no-op invocation of one configuration.
type noopResult struct {
	name string
	m    Measure
	wall time.Duration
}

// mixedScenario ships a small org with every REST source once (--drain) for the API calls per
// 10 000 records of each source, then times run-once invocations with nothing left to do.
func mixedScenario(ctx context.Context, o options, dir, bin, probe string) ([]row, []noopResult, error) {
	srv, err := startServer(ctx, "mixed", filepath.Join(dir, "mixed"))
	if err != nil {
		return nil, nil, err
	}
	defer srv.stop()
	cfgPath, err := srv.config("mixed", `eventlogfile:
  enabled: true
  interval: Hourly
  event_types: [URI, Report]
  lookback: 12h
soql:
  enabled: true
  objects:
    - name: LoginHistory
      lookback: 12h
    - name: SetupAuditTrail
      lookback: 12h
apexlog:
  enabled: true
  lookback: 12h
`)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintln(os.Stderr, "bench: mixed org: run-once --drain")
	ch, err := runChild(ctx, probe, []string{"run-once", "--config", cfgPath, "--drain"}, o.runOnceEnv, filepath.Join(srv.dir, "stats.json"))
	if err != nil {
		return nil, nil, err
	}
	rep := ch.Report
	if rep.Outcome != "ok" || !rep.CaughtUp {
		return nil, nil, fmt.Errorf("mixed org: outcome %s, caught up %v: %s", rep.Outcome, rep.CaughtUp, rep.Error)
	}
	var rows []row
	for _, name := range []string{"eventlogfile", "soql", "apexlog"} {
		sr := rep.Sources[name]
		if sr == nil {
			return nil, nil, fmt.Errorf("mixed org: no %s in the report", name)
		}
		a := apiCalls(map[string]*jobSourceReport{name: sr}, sr.Records)
		rows = append(rows, row{name: "API calls: " + name + " (" + mixedDescription[name] + ")", m: Measure{Rows: sr.Records},
			hasAPI: true, apiPer10k: a.apiPer10k, apiDetail: a.apiDetail})
	}

	// Nothing to do: the minimal job (one EventLogFile type, the target's case) and the whole
	// mixed configuration (three sources, five keys), each right after it caught up.
	minimal, err := srv.config("noop-minimal", "eventlogfile:\n  enabled: true\n  interval: Hourly\n  event_types: [URI]\n  lookback: 12h\n")
	if err != nil {
		return nil, nil, err
	}
	if _, err := runChild(ctx, bin, []string{"run-once", "--config", minimal, "--drain"}, o.runOnceEnv, ""); err != nil {
		return nil, nil, err
	}
	var noops []noopResult
	for _, c := range []struct{ name, path string }{{"eventlogfile, 1 type", minimal}, {"eventlogfile + soql + apexlog, 5 keys", cfgPath}} {
		var ms []Measure
		for i := range o.noopRuns {
			fmt.Fprintf(os.Stderr, "bench: run-once with nothing to do (%s) %d/%d\n", c.name, i+1, o.noopRuns)
			ch, err := runChild(ctx, bin, []string{"run-once", "--config", c.path}, o.runOnceEnv, "")
			if err != nil {
				return nil, nil, err
			}
			if ch.Report.Outcome != "ok" || ch.Report.Records != 0 {
				return nil, nil, fmt.Errorf("no-op run-once (%s): outcome %s, %d records", c.name, ch.Report.Outcome, ch.Report.Records)
			}
			rss, err := noopPeakRSS(ctx, o, bin, c.path, filepath.Join(srv.dir, fmt.Sprintf("noop-%d.json", i)))
			if err != nil {
				return nil, nil, err
			}
			ms = append(ms, Measure{Wall: ch.Wall, CPU: ch.CPU, PeakRSS: rss, Rows: 1})
		}
		m := median(ms)
		noops = append(noops, noopResult{name: c.name, m: m, wall: m.Wall})
	}
	return rows, noops, nil
}

// noopPeakRSS runs the no-op run-once of bin with cfgPath once more, under the maxrss launcher,
// and returns its peak RSS: the shipped binary's own, which rusage cannot give when this large
// harness starts it (see maxrss). statsPath receives the launcher's reading.
func noopPeakRSS(ctx context.Context, o options, bin, cfgPath, statsPath string) (int64, error) {
	ch, err := runChild(ctx, o.launcher, []string{bin, "run-once", "--config", cfgPath}, o.runOnceEnv, statsPath)
	if err != nil {
		return 0, err
	}
	if ch.Report.Outcome != "ok" || ch.Report.Records != 0 {
		return 0, fmt.Errorf("no-op run-once under maxrss: outcome %s, %d records", ch.Report.Outcome, ch.Report.Records)
	}
	return ch.peakRSS(), nil
}

var mixedDescription = map[string]string{
	"eventlogfile": "12 hourly files of 2000 rows",
	"soql":         "LoginHistory 20 000 + SetupAuditTrail 2000 rows",
	"apexlog":      "400 logs with bodies",
}

// apiCalls sums the Salesforce calls of the report's sources per 10 000 records.
func apiCalls(sources map[string]*jobSourceReport, records int64) e2eResult {
	total := int64(0)
	kinds := map[string]int64{}
	for _, sr := range sources {
		for k, n := range sr.APICalls {
			total += n
			kinds[k] += n
		}
	}
	var parts []string
	for _, k := range sortedKeys(kinds) {
		parts = append(parts, fmt.Sprintf("%s %d", k, kinds[k]))
	}
	r := e2eResult{apiDetail: strings.Join(parts, ", ")}
	if records > 0 {
		r.apiPer10k = float64(total) * 10000 / float64(records)
	}
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// columns of the table.
var columns = []string{"scenario", "rows", "wall s", "rows/s", "rows/s/core", "MB/s/core", "allocs/row", "alloc B/row", "peak RSS MiB", "× ceiling", "API calls/10k rows"}

func cells(r row) []string {
	dash := "-"
	c := []string{r.name, dash, dash, dash, dash, dash, dash, dash, dash, dash, dash}
	if r.m.Rows > 0 && r.noopWall == 0 {
		c[1] = fmt.Sprint(r.m.Rows)
	}
	if r.throughput {
		c[2] = fmt.Sprintf("%.2f", r.m.Wall.Seconds())
		c[3] = fmt.Sprintf("%.0f", float64(r.m.Rows)/r.m.Wall.Seconds())
		c[4] = fmt.Sprintf("%.0f", r.m.RowsPerCoreSec())
		if r.m.Bytes > 0 {
			c[5] = fmt.Sprintf("%.1f", r.m.MBPerCoreSec())
		}
		if r.m.Mallocs > 0 {
			c[6] = fmt.Sprintf("%.2f", r.m.AllocsPerRow())
			c[7] = fmt.Sprintf("%.0f", r.m.AllocBytesPerRow())
		}
		if r.ratio > 0 {
			c[9] = fmt.Sprintf("%.2f", r.ratio)
		}
	}
	if r.noopWall > 0 {
		c[2] = fmt.Sprintf("%.1f ms", ms(r.noopWall))
	}
	if r.m.PeakRSS > 0 {
		c[8] = fmt.Sprintf("%.1f", float64(r.m.PeakRSS)/(1<<20))
	}
	if r.hasAPI {
		c[10] = fmt.Sprintf("%.2f (%s)", r.apiPer10k, r.apiDetail)
	}
	return c
}

func printTable(w io.Writer, header string, rows []row, verdicts []string) {
	writeAligned(w, header, columns, cellsOf(rows, cells))
	for _, v := range verdicts {
		fmt.Fprintln(w, v)
	}
}

func printMarkdown(w io.Writer, header string, rows []row, verdicts []string) {
	writeMarkdown(w, header, columns, cellsOf(rows, cells))
	fmt.Fprintln(w)
	for _, v := range verdicts {
		fmt.Fprintf(w, "- %s\n", v)
	}
}

// cellsOf returns the cells of every row.
func cellsOf[R any](rows []R, cells func(R) []string) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = cells(r)
	}
	return out
}

// writeAligned writes the header line, then the table with its columns aligned by spaces.
func writeAligned(w io.Writer, header string, columns []string, rows [][]string) {
	fmt.Fprintln(w, header)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// writeMarkdown writes the header line, then the table in Markdown.
func writeMarkdown(w io.Writer, header string, columns []string, rows [][]string) {
	fmt.Fprintf(w, "%s\n\n| %s |\n|%s\n", header, strings.Join(columns, " | "), strings.Repeat(" --- |", len(columns)))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}

// chdirModuleRoot makes the module root the working directory (go build paths are relative).
func chdirModuleRoot(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return errors.New("run the harness inside the sf2loki module (go run ./internal/bench)")
	}
	return os.Chdir(filepath.Dir(gomod))
}

// loadAverage is the 1-minute load average when the harness started (other work on the machine
// stretches wall times; CPU-time figures are less affected).
var loadAverage = "?"

func readLoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
