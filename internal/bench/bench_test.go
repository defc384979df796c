package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/config"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
)

// TestCeilingShapesAndEncodesEveryRow: the ceiling reads the whole file, every row becomes an
// entry that is encoded and compressed (the no-network transport answers 204 for all), and its
// cost is measured.
func TestCeilingShapesAndEncodesEveryRow(t *testing.T) {
	org := simsf.New(simsf.Options{Seed: 5, Logger: slog.New(slog.DiscardHandler)})
	now := time.Now().UTC()
	id, err := org.AddEventLogFile(simsf.EventLogFileSpec{EventType: "API", Interval: simsf.IntervalDaily,
		LogDate: now.Add(-24 * time.Hour).Truncate(24 * time.Hour), CreatedDate: now.Add(-time.Hour), Rows: 30000})
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	if err := org.EventLogFileContent(id, &body); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "body.csv")
	if err := os.WriteFile(path, body.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Sink.Loki.BatchMaxEntries = 7000 // several pushes
	m, err := Ceiling(path, "API", cfg)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := shape.New(shape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var entries int64
	rows, err := eventlogfile.ReadEntries(bytes.NewReader(body.Bytes()), eventlogfile.Body{EventType: "API"}, sh, func(loki.Entry, shape.Lines) error { entries++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows != 30000 || rows != 30000 || entries != 30000 || m.Bytes != int64(body.Len()) {
		t.Fatalf("ceiling: %d rows, %d bytes; the file has %d rows (%d entries), %d bytes", m.Rows, m.Bytes, rows, entries, body.Len())
	}
	if m.CPU <= 0 || m.Wall <= 0 || m.Mallocs == 0 || m.RowsPerCoreSec() <= 0 {
		t.Fatalf("ceiling cost not measured: %+v", m)
	}
	// The ceiling types values as the source does from the file's record: the API file's
	// numeric columns are listed as numbers.
	b, err := bodyOf(path, "API")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(","+b.FieldTypes+",", ",Number,") || strings.Count(b.FieldNames, ",") != strings.Count(b.FieldTypes, ",") {
		t.Fatalf("the ceiling's body description: names %q, types %q", b.FieldNames, b.FieldTypes)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("100MiB, 1GiB,512KiB,42")
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{100 << 20, 1 << 30, 512 << 10, 42}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("parseSizes = %v, want %v", got, want)
		}
	}
	if _, err := parseSizes("lots"); err == nil {
		t.Fatal("no error for a size without a number")
	}
}

func TestMedian(t *testing.T) {
	m := median([]Measure{{Rows: 5, CPU: 3}, {Rows: 5, CPU: 1}, {Rows: 5, CPU: 2}})
	if m.CPU != 2 || m.Rows != 5 {
		t.Fatalf("median %+v", m)
	}
}

func TestSmallestLambdaMemory(t *testing.T) {
	for _, c := range []struct {
		peak int64
		want int64
	}{
		{60 << 20, 128},
		{102 << 20, 128}, // 80% of 128 MiB is 102.4 MiB
		{103 << 20, 256},
		{400 << 20, 512},
		{2 << 30, 0},
	} {
		if got := smallestLambdaMemory(c.peak); got != c.want {
			t.Errorf("smallestLambdaMemory(%d MiB) = %d, want %d", c.peak>>20, got, c.want)
		}
	}
}

func TestMakeTagsReadsTheTreesMakefile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte("GO ?= go\nTAGS := a  b.c d_e\nbuild:\n\tgo build\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := makeTags(dir); err != nil || got != "a,b.c,d_e" {
		t.Fatalf("makeTags = %q, %v; want a,b.c,d_e", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte("GO ?= go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := makeTags(dir); err != nil || got != "" {
		t.Fatalf("makeTags of a Makefile without TAGS = %q, %v; want none", got, err)
	}
	if got, err := makeTags("../.."); err != nil || got == "" {
		t.Fatalf("makeTags of this repository = %q, %v; want its TAGS", got, err)
	}
}

// TestNetworkShipsEveryRowToTheReceiver: the network measurement lists the org's file, downloads
// it, shapes and pushes every row over HTTP to the strict receiver, and measures its cost.
func TestNetworkShipsEveryRowToTheReceiver(t *testing.T) {
	dir := t.TempDir()
	keys, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWorld(dir, keys.KeyPEM, keys.Certificate)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	now := time.Now().UTC()
	if _, err := w.org.AddEventLogFile(simsf.EventLogFileSpec{EventType: "API", Interval: simsf.IntervalDaily,
		LogDate: now.Add(-24 * time.Hour).Truncate(24 * time.Hour), CreatedDate: now.Add(-time.Hour), Rows: 20000}); err != nil {
		t.Fatal(err)
	}
	srv := &server{served: served{SalesforceURL: w.sf.URL, PushURL: w.receiver.PushURL(), KeyPath: w.keyPath}, dir: dir}
	cfgPath, err := srv.config("network", eventLogFileSources)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{Path: cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sink.Loki.BatchMaxEntries = 3000
	m, err := Network(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows != 20000 || w.receiver.Count() != 20000 {
		t.Fatalf("network: %d rows measured, the receiver took %d; the file has 20000", m.Rows, w.receiver.Count())
	}
	if m.CPU <= 0 || m.Wall <= 0 || m.Mallocs == 0 {
		t.Fatalf("network cost not measured: %+v", m)
	}
}
