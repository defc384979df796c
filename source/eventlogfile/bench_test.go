package eventlogfile

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
)

// benchBody is a simulated API EventLogFile of about 32 MiB.
var benchBody = sync.OnceValue(func() []byte {
	org := simsf.New(simsf.Options{Seed: 3, Now: func() time.Time { return epoch }, Logger: slog.New(slog.DiscardHandler)})
	id, err := org.AddEventLogFile(simsf.EventLogFileSpec{EventType: "API", TargetBytes: 32 << 20})
	if err != nil {
		panic(err)
	}
	var b bytes.Buffer
	if err := org.EventLogFileContent(id, &b); err != nil {
		panic(err)
	}
	return b.Bytes()
})

// benchBodyInfo is benchBody as its EventLogFile record lists it: its columns, typed.
var benchBodyInfo = sync.OnceValue(func() Body {
	names, types, err := simsf.ListedFields(bytes.NewReader(benchBody()))
	if err != nil {
		panic(err)
	}
	return Body{EventType: "API", FieldNames: names, FieldTypes: types}
})

func benchRows(b *testing.B) int64 {
	c := newCSVReader(bytes.NewReader(benchBody()), DefaultMaxRowBytes)
	n, _ := c.Skip(1 << 62)
	return n - 1
}

// BenchmarkCSVParse decodes every record (per op: the whole body).
func BenchmarkCSVParse(b *testing.B) {
	body := benchBody()
	rows := benchRows(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		c := newCSVReader(bytes.NewReader(body), DefaultMaxRowBytes)
		for !errors.Is(c.Read(), io.EOF) {
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkCSVSkip is the cost of resuming mid-file: records are delimited, not decoded.
func BenchmarkCSVSkip(b *testing.B) {
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		c := newCSVReader(bytes.NewReader(body), DefaultMaxRowBytes)
		_, _ = c.Skip(1 << 62)
	}
}

// BenchmarkRowsToEntries is CSV → record → shaping → entry (with the per-row cursor), per row.
func BenchmarkRowsToEntries(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts shape.Options
	}{
		{"plain", shape.Options{}},
		{"typical", shape.Options{
			Salt:       []byte("0123456789abcdef-salt"),
			Transforms: []shape.Transform{{Op: shape.OpHash, Fields: []string{"USER_ID"}}, {Op: shape.OpMask, Fields: []string{"CLIENT_IP"}}},
			Metadata:   []string{"REQUEST_ID", "USER_ID"},
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sh, err := shape.New(bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			body := benchBody()
			rows := benchRows(b)
			b.SetBytes(int64(len(body)) / rows)
			b.ReportAllocs()
			b.ResetTimer()
			done := 0
			for done < b.N {
				n, err := ReadEntries(bytes.NewReader(body), benchBodyInfo(), sh, func(e loki.Entry, l shape.Lines) error {
					l.Release() // nothing keeps the entry, as after a push
					done++
					if done >= b.N {
						return io.EOF
					}
					return nil
				})
				if err != nil && !errors.Is(err, io.EOF) || n == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
