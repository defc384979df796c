package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
)

// Network is the ceiling with the network put back, and nothing of the job: the eventlogfile
// source built from cfg as the job builds it (the listing query, the download with its gzip
// framing and HTTP chunking, the source's reader, shaping and records) and a Loki client that
// pushes to cfg's receiver over HTTP, batched as the job batches, in one goroutine. What a
// run-once adds to it is the job's own work: the lease, the commits, ordering, the puller and
// pusher, metrics and the report, and the process's start. It is not a target: it splits the
// run-once's distance from the ceiling into the network's part and the job's. The cost is
// process CPU time, as for the ceiling.
func Network(cfg *config.Config) (Measure, error) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	org := cfg.OrgList()[0]
	sf, err := salesforce.New(org.Salesforce.ClientOptions(cfg.HTTP))
	if err != nil {
		return Measure{}, err
	}
	sh, err := shape.New(cfg.ShaperOptions())
	if err != nil {
		return Measure{}, err
	}
	so := cfg.EventLogFileOptions(org)
	so.Client, so.Shaper, so.Log = sf, sh, log
	src, err := eventlogfile.New(so)
	if err != nil {
		return Measure{}, err
	}
	lo := cfg.Sink.Loki.ClientOptions(cfg.HTTP)
	lo.Logger = log
	lo.Labels.ExtraAllowed = append(lo.Labels.ExtraAllowed, sh.PromotedLabelNames()...)
	client, err := loki.New(lo)
	if err != nil {
		return Measure{}, err
	}
	b := newBatcher(client, cfg.Sink.Loki, "network")
	return measure(func() (int64, error) {
		rows, err := drainSource(ctx, src, log, b)
		if err == nil {
			err = b.flush()
		}
		return rows, err
	})
}

// drainSource opens src from no cursors and hands every record it yields that is not a skip to
// b, until each stream is caught up.
func drainSource(ctx context.Context, src source.Source, log *slog.Logger, b *batcher) (int64, error) {
	streams, err := src.Open(ctx, source.OpenRequest{Log: log, Count: func(string, int64) {}, Note: func(string) {}})
	if err != nil {
		return 0, err
	}
	var rows int64
	var rec source.Record
	for _, s := range streams {
		for {
			err := s.Next(ctx, &rec)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = s.Close()
				return rows, fmt.Errorf("%s: %w", s.Key(), err)
			}
			if rec.Skip {
				continue
			}
			rows++
			if err := b.add(rec.Entry, rec.Lines); err != nil {
				_ = s.Close()
				return rows, err
			}
		}
		if err := s.Close(); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// networkMode is the network child: it measures Network and prints the Measure as JSON.
func networkMode(cfgPath string) error {
	cfg, err := config.Load(config.LoadOptions{Path: cfgPath})
	if err != nil {
		return err
	}
	m, err := Network(cfg)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(m)
}

// runNetwork measures Network in a child process against srv with a configuration of its own
// (its own stream labels, so that the strict receiver takes its entries beside the run-once's),
// and checks that the receiver got every row the child reports, and want rows in all.
func runNetwork(ctx context.Context, srv *server, name string, want int64) (Measure, error) {
	cfgPath, err := srv.config(name, eventLogFileSources)
	if err != nil {
		return Measure{}, err
	}
	before, err := srv.count(ctx)
	if err != nil {
		return Measure{}, err
	}
	self, err := os.Executable()
	if err != nil {
		return Measure{}, err
	}
	m, err := measureChild(ctx, self, "network", []string{"-network", cfgPath})
	if err != nil {
		return Measure{}, err
	}
	after, err := srv.count(ctx)
	if err != nil {
		return Measure{}, err
	}
	if m.Rows != want || after-before != m.Rows {
		return Measure{}, fmt.Errorf("%s: the source over the network shipped %d of %d rows (receiver got %d)", name, m.Rows, want, after-before)
	}
	return m, nil
}
