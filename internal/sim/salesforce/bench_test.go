package salesforce

import (
	"io"
	"testing"
	"time"
)

// BenchmarkEventLogFileGenerate measures the CSV generator alone.
func BenchmarkEventLogFileGenerate(b *testing.B) {
	org := New(Options{Seed: 1, Now: func() time.Time { return epoch }})
	id, err := org.AddEventLogFile(EventLogFileSpec{EventType: "API", Interval: IntervalHourly, TargetBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	r, _ := org.Get(id)
	b.SetBytes(int64(r["LogFileLength"].(float64)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := org.EventLogFileContent(id, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
