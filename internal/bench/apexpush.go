package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
)

// apexResult is the ApexLog scenario: logs per wall second with one body download at a time
// (download_concurrency 1, how the source downloaded before it fetched ahead) and with the
// default concurrency, side by side.
type apexResult struct {
	rows    []row
	speedup float64
}

// apexScenario ships o.apexLogs ApexLogs with their bodies from an org answering every call in
// 50-200 ms, with run-once --drain from an empty state, alternating one download at a time and
// the default, o.repeat times each; it compares the medians of their wall times.
func apexScenario(ctx context.Context, o options, dir, probe string) (apexResult, error) {
	name := fmt.Sprintf("apexlog-%d", o.apexLogs)
	srv, err := startServer(ctx, fmt.Sprintf("apexlog:%d", o.apexLogs), filepath.Join(dir, name))
	if err != nil {
		return apexResult{}, err
	}
	defer srv.stop()
	modes := []struct {
		name, yaml string
	}{
		{"one download at a time", "  download_concurrency: 1\n"},
		{"bodies fetched ahead (default concurrency)", ""},
	}
	runs := make([][]Measure, len(modes))
	for i := range o.repeat {
		for k, mode := range modes {
			cfgPath, err := srv.config(fmt.Sprintf("run-%d-%d", k, i), "apexlog:\n  enabled: true\n  lookback: 2h\n"+mode.yaml)
			if err != nil {
				return apexResult{}, err
			}
			fmt.Fprintf(os.Stderr, "bench: %s: %s %d/%d\n", name, mode.name, i+1, o.repeat)
			m, _, err := drainOnce(ctx, srv, probe, name, cfgPath, o.runOnceEnv, i, int64(o.apexLogs))
			if err != nil {
				return apexResult{}, err
			}
			runs[k] = append(runs[k], m)
		}
	}
	var res apexResult
	for k, mode := range modes {
		m := median(runs[k])
		res.rows = append(res.rows, row{name: fmt.Sprintf("apexlog: %d logs with bodies, org answering in 50-200 ms, %s", o.apexLogs, mode.name), m: m, throughput: true})
	}
	res.speedup = median(runs[0]).Wall.Seconds() / median(runs[1]).Wall.Seconds()
	return res, nil
}

// pushResult is one 4 MiB push by a new client: the bytes it allocated and the payload's.
type pushResult struct {
	Alloc   uint64 `json:"alloc"`
	Payload int    `json:"payload"`
	payload int
}

func (p pushResult) copies() float64 {
	if p.payload == 0 {
		return 0
	}
	return float64(p.Alloc) / float64(p.payload)
}

// runPush measures one 4 MiB push in a child process (push mode), so that its memory never
// counts towards this process's peak.
func runPush(ctx context.Context, csvPath, cfgPath string) (pushResult, error) {
	self, err := os.Executable()
	if err != nil {
		return pushResult{}, err
	}
	cmd := exec.CommandContext(ctx, self, "-push", csvPath, "-config", cfgPath)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return pushResult{}, fmt.Errorf("push: %w", err)
	}
	var p pushResult
	if err := json.Unmarshal(out, &p); err != nil {
		return pushResult{}, fmt.Errorf("push: %w", err)
	}
	p.payload = p.Payload
	return p, nil
}

// errEnough ends the reading of entries once the push holds 4 MiB.
var errEnough = errors.New("4 MiB read")

// pushMode is the push child: the file's first entries up to 4 MiB of lines and metadata (what
// the job hands the client at the default batch_max_bytes), shaped as the source shapes them,
// pushed once by a new client to a transport that answers 204 without sending; it prints the
// bytes the push allocated and the payload's size.
func pushMode(csvPath, cfgPath string) error {
	cfg, err := config.Load(config.LoadOptions{Path: cfgPath})
	if err != nil {
		return err
	}
	opts := cfg.Shape.ShapeOptions()
	opts.Labels = cfg.Sink.Loki.Labels
	sh, err := shape.New(opts)
	if err != nil {
		return err
	}
	body, err := bodyOf(csvPath, "API")
	if err != nil {
		return err
	}
	f, err := os.Open(csvPath)
	if err != nil {
		return err
	}
	defer f.Close()
	var batch []loki.Entry
	payload := 0
	_, err = eventlogfile.ReadEntries(f, body, sh, func(e loki.Entry, _ shape.Lines) error {
		n := len(e.Line)
		for _, m := range e.Metadata {
			n += len(m.Name) + len(m.Value)
		}
		if payload+n > 4<<20 {
			return errEnough
		}
		e.Ref = uint64(len(batch))
		batch, payload = append(batch, e), payload+n
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return err
	}
	l := cfg.Sink.Loki
	client, err := loki.New(loki.Options{
		URL: "http://push.invalid/loki/api/v1/push", TargetCompressedBytes: int(l.BatchTargetBytes),
		MaxRequestBytes: int(l.BatchMaxBytes), MaxEntriesPerRequest: len(batch) + 1, MaxLineBytes: int(l.LineMaxBytes),
		Labels: loki.LabelOptions{ExtraAllowed: append(append([]string(nil), l.ExtraLabels...), sh.PromotedLabelNames()...)}, Transport: noNetwork{},
	})
	if err != nil {
		return err
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := client.Push(ctx, batch)
	runtime.ReadMemStats(&m1)
	if !res.OK() {
		return fmt.Errorf("push: %d of %d entries not accepted: %w", len(batch)-len(res.Accepted), len(batch), res.Err)
	}
	return json.NewEncoder(os.Stdout).Encode(pushResult{Alloc: m1.TotalAlloc - m0.TotalAlloc, Payload: payload})
}
