package job

import (
	"context"
	"slices"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/store"
)

// EventTimeMetadata is the structured-metadata field that keeps an entry's own time when the
// entry is shipped with another timestamp (docs/ordering.md).
const EventTimeMetadata = loki.EventTimeMetadata

// TimestampPolicy says what happens to an entry the receiver would refuse for its timestamp.
type TimestampPolicy int

const (
	// Restamp ships the entry with a timestamp the receiver accepts and keeps its own time in
	// structured metadata (EventTimeMetadata).
	Restamp TimestampPolicy = iota
	// RejectLate refuses the entry before pushing it, under Loki's reason; OnPermanentReject
	// then drops or freezes it.
	RejectLate
)

// OrderingOptions configure how entries are kept inside the receiver's timestamp rules.
type OrderingOptions struct {
	// Limits are the receiver's limits (zero fields: Loki's defaults). MaxAge,
	// CreationGracePeriod and OutOfOrderWindow decide which entries move;
	// DisallowStructuredMetadata makes a move impossible (the event time could not be kept).
	Limits loki.Limits
	// Policy is Restamp (default) or RejectLate.
	Policy TimestampPolicy
	// Destination names the default destination (Deps.Sink) in the stream heads: its tenant,
	// "" for a single-tenant receiver. Other destinations are named by Destination.Name.
	Destination string
	// MaxStreamHeads bounds the heads kept in the checkpoint document (DefaultMaxStreamHeads).
	MaxStreamHeads int
}

// orderer decides, for each entry of a push, the timestamp it is shipped with, from the
// receiver's rules and the heads of its stream. The decision is a pure function of the entry,
// the committed head and the clock's hour, so a push replayed after a crash re-stamps the same
// entries the same way (except entries from the future, stamped with the clock).
//
// The clock is the receiver's: Loki judges an entry's age and whether it is from the future by
// its own clock, which may not be this host's. Each answer's Date header tells it (loki.Result
// ClockOffset); until a destination's first answer of the run, this host's clock stands in.
type orderer struct {
	o     OrderingOptions
	lim   loki.Limits
	heads *heads
	dests []string // the run's destination names, by index
	// clocks holds, by destination, how far its clock is ahead of this host's (negative:
	// behind) as its latest answer stated: 0 until one did, or while the two are within
	// clockTolerance.
	clocks []time.Duration
	// newest holds, by destination, the newest timestamp (Unix ns) it accepted in the run:
	// evidence against an estimate of its clock (plausible).
	newest []int64
	// skewWarned: the run has warned that a receiver's clock is far from this host's;
	// dateWarned: that a receiver's Date header contradicted what it accepted.
	skewWarned, dateWarned bool
}

// clockSlack is how far an entry the receiver accepted may seem to lie beyond its limits on an
// estimate of its clock before the estimate is taken for wrong: the entries were judged a moment
// before the answer's Date was written, to the second.
const clockSlack = time.Minute

// clockTolerance is how far apart the receiver's clock and this host's may read and still be
// taken as one: the Date header's one-second resolution and an answer's way back make an
// estimate jitter by about that much, and the rules' margins are minutes.
const clockTolerance = 2 * time.Second

// Restamp reasons: Loki's reasons for the refusals a re-stamp avoids.
const (
	restampBehind = loki.ReasonTooFarBehind
	restampOld    = loki.ReasonTooOld
	restampNew    = loki.ReasonTooNew
)

// newOrderer returns the orderer of a run pushing to the destinations named dests (by index;
// nil: the default destination only).
func newOrderer(o OrderingOptions, stored map[string]store.Counter, dests []string) *orderer {
	if len(dests) == 0 {
		dests = []string{o.Destination}
	}
	return &orderer{o: o, lim: o.Limits.WithDefaults(), heads: loadHeads(stored, o.MaxStreamHeads), dests: dests,
		clocks: make([]time.Duration, len(dests)), newest: make([]int64, len(dests))}
}

// learnClock takes the estimate of destination dest's clock that the answers to a push of es
// carry (none: the last estimate stands), unless what the receiver accepted contradicts it (the
// header was a proxy's clock, or a stale answer's): then the estimate is ignored, and
// contradicted is reported the first time in the run. warn reports whether the run should now
// warn that the two clocks are far apart: more than half the creation grace period, the first
// time in the run.
func (d *orderer) learnClock(dest int, es []loki.Entry, res *loki.Result, host time.Time) (offset time.Duration, warn, contradicted bool) {
	oldest := d.accepted(dest, es, res)
	if res.ServerTime.IsZero() {
		return d.clocks[dest], false, false
	}
	offset = res.ClockOffset
	if offset.Abs() <= clockTolerance {
		offset = 0
	}
	if !d.plausible(dest, host.Add(offset), oldest) {
		contradicted = !d.dateWarned
		d.dateWarned = true
		return d.clocks[dest], false, contradicted
	}
	d.clocks[dest] = offset
	if g := d.lim.CreationGracePeriod; g > 0 && offset.Abs() > g/2 && !d.skewWarned {
		d.skewWarned = true
		return offset, true, false
	}
	return offset, false, false
}

// accepted records the newest timestamp of the entries of es that destination dest accepted,
// and returns the oldest of them (0: none).
func (d *orderer) accepted(dest int, es []loki.Entry, res *loki.Result) (oldest int64) {
	for i, o := range res.Outcomes {
		if o != loki.Accepted || i >= len(es) {
			continue
		}
		ns := es[i].Timestamp.UnixNano()
		d.newest[dest] = max(d.newest[dest], ns)
		if oldest == 0 || ns < oldest {
			oldest = ns
		}
	}
	return oldest
}

// plausible reports whether now, an estimate of destination dest's clock, agrees with what it
// accepted: an entry it stored lies neither beyond its now plus the creation grace period (in
// the run) nor before its now less the maximum age (in the push just answered, whose oldest
// accepted entry is oldest), give or take clockSlack.
func (d *orderer) plausible(dest int, now time.Time, oldest int64) bool {
	if g := d.lim.CreationGracePeriod; g > 0 && d.newest[dest] > now.Add(g+clockSlack).UnixNano() {
		return false
	}
	if a := d.lim.MaxAge; a > 0 && oldest != 0 && oldest < now.Add(-a-clockSlack).UnixNano() {
		return false
	}
	return true
}

// clockContext is ctx for a push to destination dest: the client then checks the entries'
// timestamps against the receiver's clock, as the plan did.
func (d *orderer) clockContext(ctx context.Context, dest int) context.Context {
	if off := d.clocks[dest]; off != 0 {
		return loki.WithClockOffset(ctx, off)
	}
	return ctx
}

// learnClock records the receiver's clock that a push of es to destination d found, and warns
// once a run when it is far from this host's, or when its Date header contradicts what it
// accepted.
func (r *run) learnClock(d int, es []loki.Entry, res *loki.Result) {
	offset, warn, contradicted := r.order.learnClock(d, es, res, r.opts.Now())
	if contradicted {
		r.log.Warn("the Date header of the receiver's answers contradicts the timestamps it accepted (a proxy's clock, or a stale answer?): "+
			"ignoring it, entries are timed by this host's clock", "date_ahead_by", res.ClockOffset.Round(time.Second).String(),
			"destination", DestinationLabel(r.dests[d].name))
	}
	if !warn {
		return
	}
	r.log.Warn("the receiver's clock and this host's differ by more than half of sink.loki.creation_grace_period: "+
		"entries are timed by the receiver's clock, as the Date header of its answers states it, but each run's first push to it "+
		"is timed by this host's and may be refused and pushed again; synchronize this host's clock (NTP)",
		"receiver_ahead_by", offset.Round(time.Second).String(), "creation_grace_period", r.order.lim.CreationGracePeriod.String(),
		"destination", DestinationLabel(r.dests[d].name))
}

// margin is how far inside the window an entry must be to ship unchanged: a head that is a
// little too low (the receiver stored more than was committed before a crash) then still
// leaves room.
func (d *orderer) margin() time.Duration { return min(d.lim.OutOfOrderWindow/4, 15*time.Minute) }

// ageSafety is how far inside the maximum age an entry must be to ship unchanged, so that it
// is still young enough when the push reaches the receiver.
func (d *orderer) ageSafety() time.Duration { return min(d.lim.MaxAge/4, time.Hour) }

// ageTarget is the timestamp an entry too old for the receiver is given: well inside the
// maximum age, and the same for every decision within one clock hour. now is the receiver's
// clock, hour this host's with the receiver's offset rounded to whole hours: the target is the
// same whether the receiver's clock is known yet or not, as long as it is within half an hour
// of this host's, and it stays between 30 minutes and 2 h 30 min inside the receiver's maximum
// age (between 1 and 2 hours when the clocks agree).
func (d *orderer) ageTarget(now, hour time.Time) time.Time {
	if d.lim.MaxAge <= 3*time.Hour {
		return now
	}
	return hour.Truncate(time.Hour).Add(2*time.Hour - d.lim.MaxAge)
}

// decide returns the timestamp to ship an entry of time t with, given its stream's head, and
// Loki's reason for the move ("" when t is kept), on the default destination's clock.
func (d *orderer) decide(now, t time.Time, head int64, known bool) (time.Time, loki.Reason) {
	c := d.cutoffs(0, now)
	return c.decide(t, c.stream(head, known))
}

// cutoffs are the bounds decide compares an entry's time with, worked out once per push and
// destination: everything but the stream's head depends on the clock alone.
type cutoffs struct {
	d        *orderer
	now      time.Time // the receiver's clock
	hour     time.Time // the clock of the hour-stable age target (ageTarget)
	old      time.Time // entries before it are too old (zero: no maximum age)
	new      time.Time // entries after it are too new (zero: no grace period)
	behindBy time.Duration
}

// cutoffs returns the bounds of destination dest when this host's clock reads host.
func (d *orderer) cutoffs(dest int, host time.Time) cutoffs {
	off := d.clocks[dest]
	now := host.Add(off)
	c := cutoffs{d: d, now: now, hour: host.Add(off.Round(time.Hour)), behindBy: d.margin() - d.lim.OutOfOrderWindow}
	if d.lim.MaxAge > 0 {
		c.old = now.Add(d.ageSafety() - d.lim.MaxAge)
	}
	if d.lim.CreationGracePeriod > 0 {
		c.new = now.Add(d.lim.CreationGracePeriod)
	}
	return c
}

// streamCutoff is a stream's head and the time before which an entry is too far behind it.
type streamCutoff struct {
	head   time.Time
	known  bool
	behind time.Time // zero: no ordering window, or the head is unknown
}

func (c *cutoffs) stream(head int64, known bool) streamCutoff {
	s := streamCutoff{head: time.Unix(0, head), known: known}
	if known && c.d.lim.OutOfOrderWindow > 0 {
		s.behind = s.head.Add(c.behindBy)
	}
	return s
}

func (c *cutoffs) decide(t time.Time, s streamCutoff) (time.Time, loki.Reason) {
	switch {
	case !c.old.IsZero() && t.Before(c.old):
		target := c.d.ageTarget(c.now, c.hour)
		if s.known && s.head.After(target) {
			target = s.head
		}
		return target, restampOld
	case !c.new.IsZero() && t.After(c.new):
		target := c.now
		if s.known && s.head.After(target) {
			target = s.head
		}
		return target, restampNew
	case !s.behind.IsZero() && t.Before(s.behind):
		// The head itself: as far from the window's edge as possible, so a head that is lower
		// than what the receiver holds is still covered by up to a whole window.
		return s.head, restampBehind
	}
	return t, ""
}

// planned is what the orderer did to one entry before the push.
type planned struct {
	moved    loki.Reason     // the entry was re-stamped for this reason
	rejected *loki.Rejection // the entry is refused before the push (RejectLate, or no metadata)
}

// plan decides every entry of a push and re-stamps in place those that must move, on the
// clock of each entry's destination (now is this host's). The result is parallel to items
// (skips have nothing planned); nil when nothing moves.
func (d *orderer) plan(now time.Time, items []item) []planned {
	var out []planned
	cs := make([]cutoffs, len(d.dests))
	for dest := range cs {
		cs[dest] = d.cutoffs(dest, now)
	}
	// Consecutive entries mostly share a stream, whose head the plan does not change: it is
	// looked up once per run of them.
	var (
		run     loki.Labels
		runDest int
		open    bool
		id      string
		s       streamCutoff
		m       moves
	)
	for i := range items {
		if items[i].rec.Skip {
			continue
		}
		e := &items[i].rec.Entry
		if dest := items[i].ks.dest; !open || dest != runDest || e.Labels.String() != run.String() {
			id = StreamID(d.dests[dest], e.Labels)
			s = cs[dest].stream(d.heads.get(id))
			run, runDest, open = e.Labels, dest, true
		}
		ts, reason := cs[runDest].decide(e.Timestamp, s)
		if reason == "" {
			continue
		}
		if out == nil {
			out = make([]planned, len(items))
		}
		if d.o.Policy == RejectLate || d.lim.DisallowStructuredMetadata {
			detail := "timestamp " + e.Timestamp.UTC().Format(time.RFC3339Nano) + " is refused by the receiver's rules"
			if reason == restampBehind {
				detail += " (more than sink.loki.out_of_order_window behind its stream's newest entry, " + s.head.UTC().Format(time.RFC3339Nano) + ")"
			}
			if d.o.Policy == Restamp {
				detail += "; it is not re-stamped because the receiver does not accept structured metadata to keep its time"
			}
			out[i].rejected = &loki.Rejection{Reason: reason, Detail: detail}
			continue
		}
		if m == nil {
			m = moves{}
		}
		restamp(e, m.stamp(id, ts, s))
		out[i].moved = reason
	}
	return out
}

// moves gives the entries moved in one push timestamps of their own in their stream: Loki keeps
// one of two entries of a stream with the same timestamp and line, whatever their structured
// metadata, and rows whose lines are alike (shaping kept none of the columns that tell them
// apart) are moved to the same target. Each takes the first nanosecond at or after its target
// that is above its stream's head (the entry there may have the same line) and above the
// entries moved before it in the push: head + 1 ns, head + 2 ns, … in push order. A few
// nanoseconds change nothing the receiver's limits look at, and the stamps are still the same
// for a push replayed against the same committed head.
type moves map[string]int64 // stream id -> the last stamp given (Unix ns)

// stamp returns the timestamp of an entry of stream id (whose head is s) moved to target.
func (m moves) stamp(id string, target time.Time, s streamCutoff) time.Time {
	taken, ok := m[id]
	if !ok && s.known {
		taken, ok = s.head.UnixNano(), true
	}
	ns := target.UnixNano()
	if ok && ns <= taken {
		ns = taken + 1
	}
	m[id] = ns
	return target.Add(time.Duration(ns - target.UnixNano()))
}

// restamp ships e at ts and keeps its own time in structured metadata, unless an earlier
// re-stamp already kept it (a dead letter replayed, an entry moved twice).
func restamp(e *loki.Entry, ts time.Time) {
	if !slices.ContainsFunc(e.Metadata, func(m loki.Label) bool { return m.Name == EventTimeMetadata }) {
		md := make([]loki.Label, len(e.Metadata), len(e.Metadata)+1)
		copy(md, e.Metadata)
		e.Metadata = append(md, loki.Label{Name: EventTimeMetadata, Value: e.Timestamp.UTC().Format(time.RFC3339Nano)})
	}
	e.Timestamp = ts
}

// pushed raises the heads of the streams a push to destination dest may have written to, from
// its result: entries accepted, and entries the receiver may hold (in doubt: an attempt sent
// without an answer, or a request answered 400 with others). Entries the receiver answered
// without storing at every attempt (a 401, a 5xx after the last try) or that were never sent
// raise nothing: a head above what the receiver holds moves later entries it would take as they
// are. Consecutive entries mostly share a stream (a source's rows, an event type's): its head is
// raised once per run of them, to the run's newest time, instead of once per entry.
func (d *orderer) pushed(dest int, es []loki.Entry, res *loki.Result) {
	var (
		run    loki.Labels
		newest int64
		open   bool
	)
	doubt := res.InDoubtIndexes // ascending
	for i := range es {
		for len(doubt) > 0 && doubt[0] < i {
			doubt = doubt[1:]
		}
		held := i < len(res.Outcomes) && res.Outcomes[i] == loki.Accepted
		if !held && (len(doubt) == 0 || doubt[0] != i) {
			continue
		}
		ns := es[i].Timestamp.UnixNano()
		if open && es[i].Labels.String() == run.String() {
			newest = max(newest, ns)
			continue
		}
		if open {
			d.heads.raise(StreamID(d.dests[dest], run), newest)
		}
		run, newest, open = es[i].Labels, ns, true
	}
	if open {
		d.heads.raise(StreamID(d.dests[dest], run), newest)
	}
}

// retryable reports a rejection the orderer can cure by pushing the entry again with another
// timestamp: the receiver (not the client) refused it for its timestamp, which the job did
// not predict (a head it did not know, limits stricter than configured).
func (d *orderer) retryable(rej loki.Rejection) bool {
	return rej.Status != 0 && rej.Reason.Restampable() && d.o.Policy == Restamp && !d.lim.DisallowStructuredMetadata
}

// retryStamp is the timestamp to push again with an entry of labels that destination dest
// refused for its timestamp; m holds the stamps given to the other entries pushed again with it.
// It starts from the lowest stamp the refusal allows: a little above the cutoff the receiver
// stated (not the clock, which would raise the stream's head to now and move every later entry
// of the stream), or the clock when it stated none or refused the entry as too new. That stamp
// is then decided like any entry, against the stream's head as the push left it and the
// configured limits (the receiver has just stored the rest of the push, and a stamp above an age
// cutoff can still be hours behind what it stored), and given a nanosecond of its own. The clock
// is the receiver's (host is this host's): the refusal's answer has just stated it.
func (d *orderer) retryStamp(host time.Time, rej loki.Rejection, dest int, labels loki.Labels, m moves) time.Time {
	c := d.cutoffs(dest, host)
	now := c.now
	floor := now
	if from, ok := loki.OldestAcceptable(rej.Detail); ok && rej.Reason != loki.ReasonTooNew {
		room := d.margin()
		if rej.Reason == loki.ReasonTooOld {
			room = d.ageSafety()
		}
		if t := from.Add(room); t.Before(now) {
			floor = t
		}
	}
	id := StreamID(d.dests[dest], labels)
	s := c.stream(d.heads.get(id))
	ts, _ := c.decide(floor, s)
	return m.stamp(id, ts, s)
}

// change is the heads' part of the next commit; expired heads and, above the bound, the oldest
// are forgotten first.
func (d *orderer) change(now time.Time) (map[string]store.Counter, []string) {
	if d.lim.MaxAge > 0 {
		d.heads.prune(now.Add(d.lim.OutOfOrderWindow - d.lim.MaxAge).UnixNano())
	} else {
		d.heads.prune(0)
	}
	return d.heads.change()
}
