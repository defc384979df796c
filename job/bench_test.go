package job

import (
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/store"
)

// BenchmarkOrdererPlan plans a push of 8 000 entries of two streams in runs of 1 000, as an
// EventLogFile key yields them, with both heads known; nothing moves.
func BenchmarkOrdererPlan(b *testing.B) {
	now := time.Date(2026, 6, 30, 14, 37, 0, 0, time.UTC)
	streams := []loki.Labels{
		loki.NewLabels(loki.Label{Name: "job", Value: "sf2loki"}, loki.Label{Name: "event_type", Value: "API"}, loki.Label{Name: "org", Value: "00D000000000001"}),
		loki.NewLabels(loki.Label{Name: "job", Value: "sf2loki"}, loki.Label{Name: "event_type", Value: "Login"}, loki.Label{Name: "org", Value: "00D000000000001"}),
	}
	stored := map[string]store.Counter{}
	for _, l := range streams {
		stored[HeadCounterPrefix+StreamID("", l)] = store.Counter{Value: now.Add(-time.Hour).UnixNano()}
	}
	d := newOrderer(OrderingOptions{}, stored, nil)
	ks := &keyState{}
	items := make([]item, 8000)
	for i := range items {
		items[i] = item{ks: ks, rec: source.Record{Entry: loki.Entry{Labels: streams[i/1000%2], Timestamp: now.Add(-time.Hour + time.Duration(i)*time.Millisecond)}}}
	}
	b.ReportAllocs()
	for b.Loop() {
		if d.plan(now, items) != nil {
			b.Fatal("an entry moved")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/entry")
}
