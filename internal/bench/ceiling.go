package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/sf2loki/sf2loki/config"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
)

// Measure is what one measured piece of work cost.
type Measure struct {
	Rows    int64
	Bytes   int64 // CSV bytes read
	Wall    time.Duration
	CPU     time.Duration // user + system time of the process doing the work
	Mallocs uint64        // heap allocations (0 when unknown)
	Alloc   uint64        // heap bytes allocated (0 when unknown)
	PeakRSS int64         // bytes (0 when not measured)
	// PeakLive is the largest live heap after a collection (the probe's runtime/metrics
	// sampler; 0 when not measured): what the heap's goal and so the anonymous RSS follow.
	PeakLive int64
}

// RowsPerCoreSec is rows per CPU second.
func (m Measure) RowsPerCoreSec() float64 { return float64(m.Rows) / m.CPU.Seconds() }

// MBPerCoreSec is CSV megabytes (10^6) per CPU second.
func (m Measure) MBPerCoreSec() float64 { return float64(m.Bytes) / 1e6 / m.CPU.Seconds() }

// AllocsPerRow is heap allocations per row.
func (m Measure) AllocsPerRow() float64 { return float64(m.Mallocs) / float64(m.Rows) }

// AllocBytesPerRow is heap bytes allocated per row.
func (m Measure) AllocBytesPerRow() float64 { return float64(m.Alloc) / float64(m.Rows) }

// Ceiling is THE ceiling of docs/performance.md, defined once, here: the bytes of an EventLogFile through
// CSV parse + shaping + encode + snappy in one process, with no network and no checkpointing.
// It runs the product's own code: eventlogfile.ReadEntries (the source's CSV reader, header and
// timestamp handling and shaping plan) and loki.Client.Push (guard, line cap, grouping, request
// cutting, protobuf encoding, snappy) with a transport that answers 204 without sending, batched
// into pushes exactly as the job batches them (sink.loki.batch_max_entries and batch_max_bytes).
// cfg supplies the shaping and Loki settings, so the ceiling shapes and encodes what the
// end-to-end run does. The cost is measured as process CPU time (getrusage), so it is per core.
func Ceiling(path, eventType string, cfg *config.Config) (Measure, error) {
	body, err := bodyOf(path, eventType)
	if err != nil {
		return Measure{}, err
	}
	opts := cfg.Shape.ShapeOptions()
	opts.Labels = cfg.Sink.Loki.Labels
	sh, err := shape.New(opts)
	if err != nil {
		return Measure{}, err
	}
	l := cfg.Sink.Loki
	client, err := loki.New(loki.Options{
		URL: "http://ceiling.invalid/loki/api/v1/push", TargetCompressedBytes: int(l.BatchTargetBytes),
		MaxRequestBytes: int(l.BatchMaxBytes), MaxEntriesPerRequest: l.BatchMaxEntries, MaxLineBytes: int(l.LineMaxBytes),
		Labels: loki.LabelOptions{ExtraAllowed: append(append([]string(nil), l.ExtraLabels...), sh.PromotedLabelNames()...)}, Transport: noNetwork{},
	})
	if err != nil {
		return Measure{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Measure{}, err
	}
	defer f.Close()
	cr := &countingReader{r: f}
	b := newBatcher(client, cfg.Sink.Loki, "ceiling")
	m, err := measure(func() (int64, error) {
		rows, err := eventlogfile.ReadEntries(cr, body, sh, b.add)
		if err == nil {
			err = b.flush()
		}
		return rows, err
	})
	m.Bytes = cr.n
	return m, err
}

// measure runs work, which returns the rows it handled, after a collection, and returns what it
// cost this process: wall time, CPU time (user + system) and heap allocations.
func measure(work func() (int64, error)) (Measure, error) {
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0, t0 := processCPU(), time.Now()
	rows, err := work()
	wall, cpu := time.Since(t0), processCPU()-cpu0
	runtime.ReadMemStats(&ms1)
	if err != nil {
		return Measure{}, err
	}
	return Measure{Rows: rows, Wall: wall, CPU: cpu, Mallocs: ms1.Mallocs - ms0.Mallocs, Alloc: ms1.TotalAlloc - ms0.TotalAlloc}, nil
}

// batcher collects entries into pushes exactly as the job batches them
// (sink.loki.batch_max_entries and batch_max_bytes) and pushes each with client.
type batcher struct {
	client     *loki.Client
	what       string // names the measurement in errors
	maxEntries int
	maxBytes   int64
	batch      []loki.Entry
	held       []shape.Lines
	lineBytes  int64
}

func newBatcher(client *loki.Client, l config.Loki, what string) *batcher {
	return &batcher{client: client, what: what, maxEntries: l.BatchMaxEntries, maxBytes: l.BatchMaxBytes.Int(),
		batch: make([]loki.Entry, 0, l.BatchMaxEntries), held: make([]shape.Lines, 0, l.BatchMaxEntries)}
}

// add takes one shaped entry and the memory its line lies in, and pushes when the batch is full.
func (b *batcher) add(e loki.Entry, l shape.Lines) error {
	b.batch, b.held = append(b.batch, e), append(b.held, l)
	b.lineBytes += int64(len(e.Line))
	if len(b.batch) >= b.maxEntries || b.lineBytes >= b.maxBytes {
		return b.flush()
	}
	return nil
}

// flush pushes what the batch holds.
func (b *batcher) flush() error {
	if len(b.batch) == 0 {
		return nil
	}
	for i := range b.batch {
		b.batch[i].Ref = uint64(i)
	}
	res := b.client.Push(context.Background(), b.batch)
	if !res.OK() {
		return fmt.Errorf("%s push: %d of %d entries not accepted: %w", b.what, len(b.batch)-len(res.Accepted), len(b.batch), res.Err)
	}
	// As the job does once a push is settled: nothing refers to the lines any more, so
	// the next rows are shaped into their memory.
	for _, l := range b.held {
		l.Release()
	}
	clear(b.batch)
	b.batch, b.held, b.lineBytes = b.batch[:0], b.held[:0], 0
	return nil
}

// bodyOf describes the EventLogFile body at path as the simulated org lists it (its header's
// names, and their documented types), so that the ceiling types its values as the source does
// from the file's EventLogFile record: numbers bare, booleans as true and false.
func bodyOf(path, eventType string) (eventlogfile.Body, error) {
	f, err := os.Open(path)
	if err != nil {
		return eventlogfile.Body{}, err
	}
	defer f.Close()
	names, types, err := simsf.ListedFields(f)
	if err != nil {
		return eventlogfile.Body{}, fmt.Errorf("%s: reading the CSV header: %w", path, err)
	}
	return eventlogfile.Body{EventType: eventType, FieldNames: names, FieldTypes: types}, nil
}

// noNetwork answers every push with 204 without sending it.
type noNetwork struct{}

func (noNetwork) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusNoContent, Status: "204 No Content", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(nil)), Request: req}, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// processCPU is this process's user + system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
