package job

import (
	"sync/atomic"
	"time"

	"github.com/sf2loki/sf2loki/loki"
)

// Progress counts what a run has shipped so far, for a progress display while it runs (the
// report says it at the end). It is an Observer; safe for concurrent use.
type Progress struct {
	Shipped atomic.Int64 // entries the receivers accepted
	Bytes   atomic.Int64 // bytes of their lines
	Commits atomic.Int64 // successful commits
}

// Pushed implements Observer.
func (p *Progress) Pushed(_ string, entries []loki.Entry, res *loki.Result, _ time.Duration) {
	var n int64
	for _, ref := range res.Accepted {
		if int(ref) < len(entries) {
			n += int64(len(entries[ref].Line))
		}
	}
	p.Shipped.Add(int64(len(res.Accepted)))
	p.Bytes.Add(n)
}

// Committed implements Observer.
func (p *Progress) Committed(_ time.Duration, err error) {
	if err == nil {
		p.Commits.Add(1)
	}
}
