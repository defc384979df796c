package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
)

// build is one build of sf2loki the comparison measures: the binary, the probe and the harness
// of the same source tree (the harness for its ceiling mode, so that the ceiling is that tree's).
type build struct {
	name, bin, probe, harness string
}

// buildFrom builds a tree's binaries into dir (as buildBinaries does, plus the harness).
func buildFrom(ctx context.Context, name, src, dir string) (build, error) {
	b := build{name: name, bin: filepath.Join(dir, name+"-sf2loki"), probe: filepath.Join(dir, name+"-probe"), harness: filepath.Join(dir, name+"-bench")}
	for _, t := range []struct{ out, pkg string }{{b.bin, "./cmd/sf2loki"}, {b.probe, "./internal/bench/probe"}, {b.harness, "./internal/bench"}} {
		if err := goBuild(ctx, src, t.out, t.pkg); err != nil {
			return build{}, err
		}
	}
	return b, nil
}

// cmpRow is one figure of the comparison, before and after.
type cmpRow struct {
	scenario, metric string
	before, after    float64
	format           string
}

// compare measures the tree at o.before and this one side by side: every scenario runs both
// builds alternately, o.repeat times each (o.repeatLarge for 1 GiB and more), against the same
// simulated org and receiver, and the table shows the medians and their ratio.
func compare(ctx context.Context, o options, out io.Writer) error {
	dir, err := os.MkdirTemp("", "sf2loki-bench-compare-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "bench: working directory", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	markStart()
	if err := chdirModuleRoot(ctx); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "bench: building both trees")
	before, err := buildFrom(ctx, "before", o.before, dir)
	if err != nil {
		return err
	}
	after, err := buildFrom(ctx, "after", ".", dir)
	if err != nil {
		return err
	}
	// One launcher measures both builds' peak RSS: it is this tree's, and needs no earlier one.
	o.launcher = filepath.Join(dir, "maxrss")
	if err := goBuild(ctx, ".", o.launcher, "./internal/bench/maxrss"); err != nil {
		return err
	}
	builds := []build{before, after}
	var rows []cmpRow
	var add addRow = func(scenario, metric, format string, get func(Measure) float64, ms [2][]Measure) {
		rows = append(rows, cmpRow{scenario: scenario, metric: metric, format: format, before: get(median(ms[0])), after: get(median(ms[1]))})
	}
	rss := func(m Measure) float64 { return mib(m.PeakRSS) }
	bytesPerRow := func(m Measure) float64 { return m.AllocBytesPerRow() }
	allocsPerRow := func(m Measure) float64 { return m.AllocsPerRow() }

	sizes := o.sizes
	if !o.runs("elf") {
		sizes = nil
	}
	for _, size := range sizes {
		reps := o.repeat
		if size >= 1<<30 {
			reps = o.repeatLarge
		}
		name := "elf-" + formatSize(size)
		srv, err := startServer(ctx, fmt.Sprintf("elf:%d", size), filepath.Join(dir, name))
		if err != nil {
			return err
		}
		var ceil, e2e [2][]Measure
		var ratio [2][]float64
		for i := range reps {
			for k, b := range builds {
				cfgPath, err := srv.config(fmt.Sprintf("%s-%d", b.name, i), "eventlogfile:\n  enabled: true\n  interval: Daily\n  event_types: [API]\n  lookback: 48h\n")
				if err != nil {
					srv.stop()
					return err
				}
				fmt.Fprintf(os.Stderr, "bench: %s: %s %d/%d\n", name, b.name, i+1, reps)
				c, err := runCeilingOf(ctx, b.harness, srv.CSVPath, cfgPath, "")
				if err != nil {
					srv.stop()
					return err
				}
				c.Bytes = srv.CSVBytes
				m, _, err := drainOnce(ctx, srv, b.probe, name, cfgPath, o.runOnceEnv, 100*k+i, c.Rows)
				if err != nil {
					srv.stop()
					return err
				}
				m.Bytes = srv.CSVBytes
				ceil[k], e2e[k] = append(ceil[k], c), append(e2e[k], m)
				ratio[k] = append(ratio[k], m.RowsPerCoreSec()/c.RowsPerCoreSec())
			}
		}
		srv.stop()
		_ = os.Remove(srv.CSVPath)
		sz := formatSize(size)
		add("ceiling "+sz, "MB/s per core", "%.1f", func(m Measure) float64 { return m.MBPerCoreSec() }, ceil)
		add("ceiling "+sz, "B allocated per row", "%.0f", bytesPerRow, ceil)
		add("run-once EventLogFile "+sz, "MB/s per core", "%.1f", func(m Measure) float64 { return m.MBPerCoreSec() }, e2e)
		rows = append(rows, cmpRow{scenario: "run-once EventLogFile " + sz, metric: "× its own ceiling per CPU second", format: "%.2f",
			before: medianFloat(ratio[0]), after: medianFloat(ratio[1])})
		add("run-once EventLogFile "+sz, "allocations per row", "%.2f", allocsPerRow, e2e)
		add("run-once EventLogFile "+sz, "B allocated per row", "%.0f", bytesPerRow, e2e)
		add("run-once EventLogFile "+sz, "peak RSS MiB", "%.1f", rss, e2e)
	}

	if o.runs("soql") {
		if err := compareSOQL(ctx, o, dir, builds, add); err != nil {
			return err
		}
	}
	if o.runs("apexlog") {
		if err := compareApexLog(ctx, o, dir, builds, add); err != nil {
			return err
		}
	}
	if o.runs("noop") {
		if err := compareNoop(ctx, o, dir, builds, add); err != nil {
			return err
		}
	}

	header := fmt.Sprintf("sf2loki bench, before (%s) and after (this tree) side by side — %d CPUs, %s; medians of %d alternating runs (%d for 1 GiB, %d no-op)",
		o.before, runtime.NumCPU(), machineNote(), o.repeat, o.repeatLarge, o.noopRuns)
	writeAligned(out, header, cmpColumns, cellsOf(rows, cmpCells))
	if o.markdown != "" {
		f, err := os.Create(o.markdown)
		if err != nil {
			return err
		}
		defer f.Close()
		writeMarkdown(f, header, cmpColumns, cellsOf(rows, cmpCells))
	}
	return nil
}

// runCeilingOf measures the ceiling with a tree's harness (ceiling mode) in a child process.
func runCeilingOf(ctx context.Context, harness, csvPath, cfgPath, profile string) (Measure, error) {
	args := []string{"-ceiling", csvPath, "-config", cfgPath}
	if profile != "" {
		args = append(args, "-cpuprofile", profile)
	}
	return measureChild(ctx, harness, "ceiling", args)
}

func medianFloat(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func cmpCells(r cmpRow) []string {
	ratio := "-"
	if r.before != 0 {
		ratio = fmt.Sprintf("%.2f", r.after/r.before)
	}
	return []string{r.scenario, r.metric, fmt.Sprintf(r.format, r.before), fmt.Sprintf(r.format, r.after), ratio}
}

var cmpColumns = []string{"scenario", "figure", "before", "after", "after / before"}

// addRow adds a row of the side-by-side table: a metric of a scenario, the medians of both builds.
type addRow func(scenario, metric, format string, get func(Measure) float64, ms [2][]Measure)

// compareSOQL runs the dense LoginHistory rows of the SOQL scenario with both builds alternately.
func compareSOQL(ctx context.Context, o options, dir string, builds []build, add addRow) error {
	srv, err := startServer(ctx, fmt.Sprintf("soql:%d", o.soqlRows), filepath.Join(dir, "soql"))
	if err != nil {
		return err
	}
	defer srv.stop()
	var soql [2][]Measure
	for i := range o.repeat {
		for k, b := range builds {
			cfgPath, err := srv.config(fmt.Sprintf("%s-%d", b.name, i), "soql:\n  enabled: true\n  objects:\n    - name: LoginHistory\n      lookback: 2h\n")
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "bench: soql-%d: %s %d/%d\n", o.soqlRows, b.name, i+1, o.repeat)
			m, _, err := drainOnce(ctx, srv, b.probe, "soql", cfgPath, o.runOnceEnv, 100*k+i, int64(o.soqlRows))
			if err != nil {
				return err
			}
			soql[k] = append(soql[k], m)
		}
	}
	sc := fmt.Sprintf("run-once SOQL %d rows", o.soqlRows)
	add(sc, "rows per CPU second", "%.0f", func(m Measure) float64 { return m.RowsPerCoreSec() }, soql)
	add(sc, "allocations per row", "%.2f", func(m Measure) float64 { return m.AllocsPerRow() }, soql)
	add(sc, "B allocated per row", "%.0f", func(m Measure) float64 { return m.AllocBytesPerRow() }, soql)
	add(sc, "peak RSS MiB", "%.1f", func(m Measure) float64 { return mib(m.PeakRSS) }, soql)
	add(sc, "peak live heap MiB", "%.1f", func(m Measure) float64 { return mib(m.PeakLive) }, soql)
	return nil
}

// compareApexLog runs each build's default ApexLog job against an org answering in 50-200 ms.
func compareApexLog(ctx context.Context, o options, dir string, builds []build, add addRow) error {
	srv, err := startServer(ctx, fmt.Sprintf("apexlog:%d", o.apexLogs), filepath.Join(dir, "apexlog"))
	if err != nil {
		return err
	}
	defer srv.stop()
	var apex [2][]Measure
	for i := range o.repeat {
		for k, b := range builds {
			cfgPath, err := srv.config(fmt.Sprintf("%s-%d", b.name, i), "apexlog:\n  enabled: true\n  lookback: 2h\n")
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "bench: apexlog-%d: %s %d/%d\n", o.apexLogs, b.name, i+1, o.repeat)
			m, _, err := drainOnce(ctx, srv, b.probe, "apexlog", cfgPath, o.runOnceEnv, 100*k+i, int64(o.apexLogs))
			if err != nil {
				return err
			}
			apex[k] = append(apex[k], m)
		}
	}
	sc := fmt.Sprintf("ApexLog %d logs, org answering in 50-200 ms", o.apexLogs)
	add(sc, "logs per wall second", "%.1f", func(m Measure) float64 { return float64(m.Rows) / m.Wall.Seconds() }, apex)
	return nil
}

// compareNoop runs the minimal job (one EventLogFile type) of each build with nothing to do,
// caught up first, against an org that answers at once (the ApexLog org's 50-200 ms per call
// would be most of the wall time).
func compareNoop(ctx context.Context, o options, dir string, builds []build, add addRow) error {
	srv, err := startServer(ctx, "mixed", filepath.Join(dir, "noop"))
	if err != nil {
		return err
	}
	defer srv.stop()
	var noop [2][]Measure
	var minimal [2]string
	for k, b := range builds {
		if minimal[k], err = srv.config(b.name+"-noop", "eventlogfile:\n  enabled: true\n  interval: Hourly\n  event_types: [URI]\n  lookback: 12h\n"); err != nil {
			return err
		}
		if _, err := runChild(ctx, b.bin, []string{"run-once", "--config", minimal[k], "--drain"}, o.runOnceEnv, ""); err != nil {
			return err
		}
	}
	for i := range o.noopRuns {
		for k, b := range builds {
			fmt.Fprintf(os.Stderr, "bench: nothing to do: %s %d/%d\n", b.name, i+1, o.noopRuns)
			ch, err := runChild(ctx, b.bin, []string{"run-once", "--config", minimal[k]}, o.runOnceEnv, "")
			if err != nil {
				return err
			}
			rss, err := noopPeakRSS(ctx, o, b.bin, minimal[k], filepath.Join(srv.dir, fmt.Sprintf("noop-%s-%d.json", b.name, i)))
			if err != nil {
				return err
			}
			if ch.Report.Outcome != "ok" || ch.Report.Records != 0 {
				return fmt.Errorf("no-op run-once (%s): outcome %s, %d records", b.name, ch.Report.Outcome, ch.Report.Records)
			}
			noop[k] = append(noop[k], Measure{Wall: ch.Wall, CPU: ch.CPU, PeakRSS: rss, Rows: 1})
		}
	}
	add("nothing to do (eventlogfile, 1 type)", "wall ms", "%.1f", func(m Measure) float64 { return ms(m.Wall) }, noop)
	add("nothing to do (eventlogfile, 1 type)", "peak RSS MiB", "%.1f", func(m Measure) float64 { return mib(m.PeakRSS) }, noop)
	return nil
}
