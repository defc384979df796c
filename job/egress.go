package job

import (
	"context"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/store"
)

// EgressCounter is the name of the daily byte budget counter in the checkpoint document.
const EgressCounter = "egress_bytes"

// BudgetPolicy is what happens when the daily byte budget is spent.
type BudgetPolicy int

const (
	// BudgetPause ends intake; the run reports budget_paused and nothing is lost: the next UTC
	// day's runs continue where this one stopped.
	BudgetPause BudgetPolicy = iota
	// BudgetDrop discards what exceeds the budget (counted as dropped "budget") and advances.
	BudgetDrop
)

// EgressOptions caps what one job (group) sends to Loki. Zero values mean no cap.
type EgressOptions struct {
	LinesPerSecond float64
	BytesPerSecond float64
	// DailyBytes is the budget of entry bytes (line plus structured metadata) per UTC day. Its
	// counter lives in the checkpoint document and is committed with the checkpoints, so it
	// survives restarts and two runs never count the same push twice.
	DailyBytes int64
	OnBudget   BudgetPolicy
	// WarnFraction of the budget after which a warning is logged (default 0.8).
	WarnFraction float64
}

// EgressReport is the budget's state at the end of the run.
type EgressReport struct {
	Day    string `json:"day"`
	Used   int64  `json:"used_bytes"`
	Budget int64  `json:"budget_bytes"`
}

// egress enforces the rate caps and the daily budget of one run.
type egress struct {
	o      EgressOptions
	now    func() time.Time
	lines  *rate.Limiter
	bytes  *rate.Limiter
	day    string
	used   int64 // committed use of day
	spent  int64 // accepted in this run, not committed yet
	warned bool
}

func newEgress(o EgressOptions, now func() time.Time, stored map[string]store.Counter) *egress {
	if o.WarnFraction <= 0 || o.WarnFraction >= 1 {
		o.WarnFraction = 0.8
	}
	e := &egress{o: o, now: now}
	if o.LinesPerSecond > 0 {
		e.lines = rate.NewLimiter(rate.Limit(o.LinesPerSecond), max(1, int(o.LinesPerSecond)))
	}
	if o.BytesPerSecond > 0 {
		e.bytes = rate.NewLimiter(rate.Limit(o.BytesPerSecond), max(1, int(o.BytesPerSecond)))
	}
	e.day = e.today()
	if c, ok := stored[EgressCounter]; ok && c.Window == e.day {
		e.used = c.Value
	}
	return e
}

func (e *egress) today() string { return e.now().UTC().Format(time.DateOnly) }

// entryBytes is what the budget counts for one entry: its line and structured metadata.
func entryBytes(en *loki.Entry) int64 {
	n := int64(len(en.Line))
	for _, m := range en.Metadata {
		n += int64(len(m.Name) + len(m.Value))
	}
	return n
}

// admit returns how many of items fit the daily budget (a prefix in pull order). A fresh day's
// first entry always fits, so an entry larger than the whole budget cannot wedge the job.
func (e *egress) admit(items []item) int {
	if e.o.DailyBytes <= 0 {
		return len(items)
	}
	if d := e.today(); d != e.day {
		e.day, e.used, e.spent = d, 0, 0 // a new UTC day: a new budget
	}
	total := e.used + e.spent
	for i := range items {
		it := &items[i]
		if it.rec.Skip {
			continue
		}
		n := entryBytes(&it.rec.Entry)
		if total+n > e.o.DailyBytes && total > 0 {
			return i
		}
		total += n
	}
	return len(items)
}

// grant lets through the longest prefix of entries that the rate caps allow within d, and
// never past end: it takes their tokens, waits until the caps allow them (or ctx ends) and
// returns the prefix's length, 0 when not even the first entry gets through in time. A cap
// allows within d what it holds now plus its rate times d: the tokens are taken as they come,
// in chunks of at most its burst.
func (e *egress) grant(ctx context.Context, entries []loki.Entry, d time.Duration, end time.Time) (int, error) {
	now := time.Now()
	within := min(d, end.Sub(now))
	if within <= 0 {
		return 0, nil
	}
	lines, bytes := allowance(e.lines, now, within), allowance(e.bytes, now, within)
	n := 0
	var b int64
	for n < len(entries) {
		eb := entryBytes(&entries[n])
		if float64(n+1) > lines || float64(b+eb) > bytes {
			break
		}
		n++
		b += eb
	}
	if n == 0 {
		return 0, nil
	}
	wait := max(reserve(e.lines, now, int64(n)), reserve(e.bytes, now, b))
	if wait <= 0 {
		return n, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return n, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("waiting for the egress rate caps: %w", context.Cause(ctx))
	}
}

// allowance is how many tokens l allows within d of now (no cap: unbounded).
func allowance(l *rate.Limiter, now time.Time, d time.Duration) float64 {
	if l == nil {
		return math.Inf(1)
	}
	return l.TokensAt(now) + float64(l.Limit())*d.Seconds()
}

// reserve takes n tokens of l at now, in chunks of at most its burst, and returns how long
// after now the last chunk may be used.
func reserve(l *rate.Limiter, now time.Time, n int64) time.Duration {
	var wait time.Duration
	for l != nil && n > 0 {
		k := min(n, int64(l.Burst()))
		wait = l.ReserveN(now, int(k)).DelayFrom(now)
		n -= k
	}
	return wait
}

// refuses returns why the rate caps can never let an entry of b bytes through within d (one
// push reserve), or nil. An entry that the caps let through within d even when they have
// nothing left gets through in every push reserve the end of the run does not cut short (a
// millisecond is kept for the rounding of the waits); any other entry would hold its key back
// run after run.
func (e *egress) refuses(b int64, d time.Duration) error {
	// The options, not the limiters: Limiter.Limit takes a lock, and this runs for every entry.
	s := (d - time.Millisecond).Seconds()
	if e.lines != nil && e.o.LinesPerSecond*s < 1 {
		return fmt.Errorf("egress.lines_per_second %v lets less than one entry through in run.push_timeout %s: raise either",
			e.o.LinesPerSecond, d)
	}
	if e.bytes != nil && e.o.BytesPerSecond*s < float64(b) {
		return fmt.Errorf("egress.bytes_per_second %v lets fewer bytes through in run.push_timeout %s than an entry of %d bytes "+
			"(line and structured metadata) holds: raise either", e.o.BytesPerSecond, d, b)
	}
	return nil
}

// accepted adds the bytes of accepted entries to this run's uncommitted use.
func (e *egress) accepted(entries []loki.Entry, outcomes []loki.Outcome) {
	for i := range entries {
		if i < len(outcomes) && outcomes[i] == loki.Accepted {
			e.spent += entryBytes(&entries[i])
		}
	}
}

// counter is the value to commit with the checkpoints.
func (e *egress) counter() store.Counter {
	return store.Counter{Value: e.used + e.spent, Window: e.day}
}

func (e *egress) committed() { e.used, e.spent = e.used+e.spent, 0 }

func (e *egress) report() *EgressReport {
	return &EgressReport{Day: e.day, Used: e.used + e.spent, Budget: e.o.DailyBytes}
}

// overWarn reports, once, that the day's use passed the warning fraction.
func (e *egress) overWarn() bool {
	if e.warned || e.o.DailyBytes <= 0 {
		return false
	}
	if float64(e.used+e.spent) >= e.o.WarnFraction*float64(e.o.DailyBytes) {
		e.warned = true
		return true
	}
	return false
}
