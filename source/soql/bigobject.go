package soql

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/sf2loki/sf2loki/source/keyset"
)

// ErrIndexOrder is returned when a Big Object tie group does not come back in EventIdentifier
// order: paging it with EventIdentifier > 'last' would skip rows, so the key stops instead.
var ErrIndexOrder = errors.New("soql: Big Object rows of one EventDate are not returned in EventIdentifier order; a tie group larger than one page cannot be paged")

// maxBigSpan bounds how far the adaptive window grows.
const maxBigSpan = 31 * 24 * time.Hour

// bigReader reads a Big Object in ascending (EventDate, EventIdentifier) order under the strict
// rules: ORDER BY EventDate DESC only, filters on EventDate (ranges) or EventDate = T AND
// EventIdentifier <op> k, no nextRecordsUrl, at most pageSize rows per query.
//
// The range is walked in EventDate windows. A window [lo, hi] is drained newest-first: each
// full page moves the upper bound down to the page's smallest EventDate m (inclusive, so rows
// at m, which the page may have cut, are read again); rows above m are complete. A full page of
// one EventDate is a tie group: it is left to a separate EventIdentifier-ordered pager and the
// bound becomes exclusive of it. The window's rows are then emitted oldest-first, each tie group
// paged in its place.
type bigReader struct {
	q        *querier
	pageSize int
	bufMax   int
	top      time.Time // inclusive upper bound of the run's range
	span     time.Duration

	lo     time.Time // next window's lower bound
	loIncl bool

	startTie *tiePager
	tie      *tiePager
	pending  []row       // the current window's complete rows, ascending
	ties     []time.Time // its tie groups, ascending
	inWindow bool
	hiEff    time.Time // the current window's upper bound
	hiIncl   bool
	finished bool
}

// tiePager pages the rows of one EventDate in EventIdentifier order.
type tiePager struct {
	ts    time.Time
	after string // last key read; "" = from the first
	incl  bool   // the first page includes after itself
	buf   []row
	done  bool
}

// newBigReader starts at start: inclusive (the window start) or exclusive (the position).
func newBigReader(q *querier, start keyset.Position, incl bool, top time.Time, pageSize, bufMax int) *bigReader {
	r := &bigReader{q: q, pageSize: pageSize, bufMax: bufMax, top: top, span: DefaultBigObjectSpan}
	if start.TS.After(top) {
		r.finished = true
		return r
	}
	if start.Key == "" {
		r.lo, r.loIncl = start.TS, true
		return r
	}
	r.startTie = &tiePager{ts: start.TS, after: start.Key, incl: incl}
	r.lo, r.loIncl = start.TS, false
	return r
}

func (r *bigReader) next(ctx context.Context) (row, error) {
	for {
		if t := r.tie; t != nil {
			if len(t.buf) > 0 {
				x := t.buf[0]
				t.buf = t.buf[1:]
				return x, nil
			}
			if t.done {
				r.tie = nil
				continue
			}
			if err := r.fetchTie(ctx, t); err != nil {
				return row{}, err
			}
			continue
		}
		if r.startTie != nil {
			r.tie, r.startTie = r.startTie, nil
			continue
		}
		if len(r.ties) > 0 && (len(r.pending) == 0 || r.ties[0].Before(r.pending[0].pos.TS)) {
			r.tie = &tiePager{ts: r.ties[0]}
			r.ties = r.ties[1:]
			continue
		}
		if len(r.pending) > 0 {
			x := r.pending[0]
			r.pending = r.pending[1:]
			return x, nil
		}
		if r.inWindow {
			r.inWindow = false
			r.lo, r.loIncl = r.hiEff, !r.hiIncl
			if r.hiIncl && !r.hiEff.Before(r.top) {
				r.finished = true
			}
		}
		if r.finished {
			return row{}, io.EOF
		}
		if err := r.drain(ctx); err != nil {
			return row{}, err
		}
	}
}

// empty reports whether the EventDate range (lo, hi) with the given inclusivity holds nothing.
func empty(lo time.Time, loIncl bool, hi time.Time, hiIncl bool) bool {
	return hi.Before(lo) || hi.Equal(lo) && (!loIncl || !hiIncl)
}

// drain reads the next window and leaves its rows in pending and ties.
func (r *bigReader) drain(ctx context.Context) error {
	lo, loIncl := r.lo, r.loIncl
	hi := lo.Add(r.span)
	if hi.After(r.top) {
		hi = r.top
	}
	if empty(lo, loIncl, hi, true) {
		r.finished = true
		return nil
	}
	r.hiEff, r.hiIncl = hi, true
	bound, boundIncl := hi, true
	var complete []row
	var ties []time.Time
	evicted, sizing := false, true
	for !empty(lo, loIncl, bound, boundIncl) {
		rows, err := r.rangeQuery(ctx, lo, loIncl, bound, boundIncl)
		if err != nil {
			return err
		}
		if len(rows) < r.pageSize {
			complete = append(complete, rows...)
			break
		}
		m, mx := rows[0].pos.TS, rows[0].pos.TS
		for _, x := range rows {
			if x.pos.TS.Before(m) {
				m = x.pos.TS
			}
			if x.pos.TS.After(mx) {
				mx = x.pos.TS
			}
		}
		if m.Equal(mx) {
			ties = append(ties, m)
			bound, boundIncl = m, false
			sizing = false
			continue
		}
		if sizing {
			// The first full page tells the density: pageSize rows in [m, mx]. When the rest of
			// the window would not fit in the buffer, shrink the window instead of draining it.
			est := float64(r.pageSize) * float64(m.Sub(lo)) / float64(mx.Sub(m))
			if est > float64(r.bufMax) {
				span := time.Duration(float64(mx.Sub(m)) * float64(r.bufMax) / 2 / float64(r.pageSize))
				span = max(span, time.Millisecond)
				if nh := lo.Add(span); nh.Before(m) {
					r.span = span
					r.hiEff, r.hiIncl = nh, true
					bound, boundIncl = nh, true
					continue
				}
			}
		}
		sizing = false
		for _, x := range rows {
			if x.pos.TS.After(m) {
				complete = append(complete, x)
			}
		}
		bound, boundIncl = m, true
		if len(complete) > r.bufMax {
			complete, ties = r.evict(complete, ties)
			evicted = true
		}
	}
	slices.SortFunc(complete, func(a, b row) int { return r.q.Kind.Cmp(a.pos, b.pos) })
	slices.SortFunc(ties, func(a, b time.Time) int { return a.Compare(b) })
	r.pending, r.ties, r.inWindow = complete, ties, true
	// Aim at windows of about half the buffer: fewer rows cost more queries per row (the
	// first query of a window and the re-read boundaries), more risk eviction.
	switch n := len(complete) + len(ties)*r.pageSize; {
	case evicted:
		r.span = max(r.span/2, time.Millisecond)
	case n < r.bufMax/4:
		r.span = min(r.span*2, maxBigSpan)
	}
	return nil
}

// evict gives back the newest EventDates of complete (and the ties at or above them) until at
// most bufMax rows are held; the window then ends before the oldest EventDate given back.
func (r *bigReader) evict(complete []row, ties []time.Time) ([]row, []time.Time) {
	slices.SortFunc(complete, func(a, b row) int { return b.pos.TS.Compare(a.pos.TS) })
	cut := 0
	for len(complete)-cut > r.bufMax {
		ts := complete[cut].pos.TS
		for cut < len(complete) && complete[cut].pos.TS.Equal(ts) {
			cut++
		}
	}
	if cut == 0 {
		return complete, ties
	}
	edge := complete[cut-1].pos.TS
	r.hiEff, r.hiIncl = edge, false
	kept := ties[:0]
	for _, t := range ties {
		if t.Before(edge) {
			kept = append(kept, t)
		}
	}
	return append([]row(nil), complete[cut:]...), kept
}

// rangeQuery returns the newest pageSize rows with EventDate in the range.
func (r *bigReader) rangeQuery(ctx context.Context, lo time.Time, loIncl bool, hi time.Time, hiIncl bool) ([]row, error) {
	ge, le := " > ", " < "
	if loIncl {
		ge = " >= "
	}
	if hiIncl {
		le = " <= "
	}
	f := r.q.TSField
	return r.run(ctx, f+ge+lit(lo)+" AND "+f+le+lit(hi))
}

// fetchTie reads the next page of a tie group.
func (r *bigReader) fetchTie(ctx context.Context, t *tiePager) error {
	cond := r.q.TSField + " = " + lit(t.ts)
	if t.after != "" {
		op := " > "
		if t.incl {
			op = " >= "
		}
		k, err := r.q.Kind.Quote(t.after)
		if err != nil {
			return err
		}
		cond += " AND " + EventIdentifier + op + k
	}
	rows, err := r.run(ctx, cond)
	if err != nil {
		return err
	}
	full := len(rows) >= r.pageSize
	if t.after != "" && !t.incl {
		for _, x := range rows {
			if x.pos.TS.Equal(t.ts) && r.q.Kind.Cmp(x.pos, keyset.Position{TS: t.ts, Key: t.after}) <= 0 {
				// The EventIdentifier filter was not applied: paging would loop.
				return ErrIndexOrder
			}
		}
	}
	if full {
		for i := 1; i < len(rows); i++ {
			if r.q.Kind.Cmp(rows[i-1].pos, rows[i].pos) >= 0 {
				return ErrIndexOrder
			}
		}
	}
	kept := rows[:0]
	for _, x := range rows {
		if x.pos.TS.Equal(t.ts) {
			kept = append(kept, x)
		}
	}
	slices.SortFunc(kept, func(a, b row) int { return r.q.Kind.Cmp(a.pos, b.pos) })
	t.buf, t.done = kept, !full
	if len(kept) > 0 {
		t.after, t.incl = kept[len(kept)-1].pos.Key, false
	}
	return nil
}

// run sends one Big Object query with the condition and returns its parsed rows.
func (r *bigReader) run(ctx context.Context, cond string) ([]row, error) {
	soql := "SELECT " + r.q.Select + " FROM " + r.q.Object + " WHERE " + cond +
		" ORDER BY " + r.q.TSField + " DESC LIMIT " + strconv.Itoa(r.pageSize)
	p, err := r.q.client.QueryRows(ctx, soql)
	if err != nil {
		return nil, err
	}
	out := make([]row, 0, len(p.Rows))
	for _, rec := range p.Rows {
		x, err := r.q.parse(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}
