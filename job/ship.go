package job

import (
	"context"
	"slices"
	"time"

	"github.com/sf2loki/sf2loki/loki"
)

// shipment is what pushing the entries of one batch produced, per entry-carrying item (skips
// excluded, in item order): the index space settle reads outcomes in.
type shipment struct {
	outcomes []loki.Outcome
	rejected map[int]loki.Rejection
	sent     map[int]int // line bytes as sent, for lines the line cap cut
	accepted int
	err      error // why entries were not delivered
	// held are the slots the egress rate caps left no time for in this run: their keys wait
	// for the next run. refused are the slots the caps can never let through, with why.
	held    map[int]bool
	refused map[int]error
}

// hold marks slots as held by the rate caps.
func (sh *shipment) hold(slots []int) {
	for _, n := range slots {
		if sh.held == nil {
			sh.held = map[int]bool{}
		}
		sh.held[n] = true
	}
}

// refuse marks a slot as one the rate caps can never let through, with why.
func (sh *shipment) refuse(slot int, err error) {
	if sh.refused == nil {
		sh.refused = map[int]error{}
	}
	sh.refused[slot] = err
}

// lineBytes is the length of the slot's line as the receiver got it.
func (sh *shipment) lineBytes(slot int, line string) int64 {
	if n, ok := sh.sent[slot]; ok {
		return int64(n)
	}
	return int64(len(line))
}

// pushGroup is what one push to one destination carries: the entries (Ref = index) and the
// slot of each.
type pushGroup struct {
	entries []loki.Entry
	slots   []int
}

// ship pushes the entries of items as the orderer planned them (plan is parallel to items, or
// nil), one push per destination (several when the egress rate caps let only part of them
// through in one push reserve), raises the stream heads, and pushes again, re-stamped, the
// entries a receiver refused for a timestamp the job did not predict.
func (r *run) ship(pushBase context.Context, items []item, plan []planned) shipment {
	// Sized once (appending entry by entry regrew these several times a batch) and reused
	// from batch to batch (r.mem); the entries are cleared once pushed.
	m := &r.mem
	ptrs := grown(m.ptrs, len(items))
	if len(m.groups) != len(r.dests) {
		m.groups = make([]pushGroup, len(r.dests))
	}
	groups := m.groups
	for d := range groups {
		groups[d].entries, groups[d].slots = groups[d].entries[:0], groups[d].slots[:0]
	}
	if len(groups) == 1 { // the common case: every entry goes to the one destination
		groups[0] = pushGroup{entries: grown(groups[0].entries, len(items)), slots: grown(groups[0].slots, len(items))}
	}
	sh := shipment{rejected: map[int]loki.Rejection{}, outcomes: grown(m.outcomes, len(items))}
	defer func() {
		clear(ptrs)
		for d := range groups {
			clear(groups[d].entries) // they hold the batch's lines
		}
		m.ptrs, m.outcomes = ptrs[:0], sh.outcomes[:0]
	}()
	var refusedKeys map[*keyState]bool
	for i := range items {
		if items[i].rec.Skip {
			continue
		}
		n := len(ptrs)
		ptrs = append(ptrs, &items[i].rec.Entry)
		sh.outcomes = append(sh.outcomes, loki.NotDelivered)
		ks := items[i].ks
		if refusedKeys[ks] {
			continue // behind an entry of its key that the caps refuse: it could not be committed
		}
		if plan != nil {
			switch p := plan[i]; {
			case p.rejected != nil:
				rej := *p.rejected
				rej.Index, rej.Ref = n, uint64(n)
				sh.outcomes[n], sh.rejected[n] = loki.Rejected, rej
				continue
			case p.moved != "":
				r.restamped(p.moved)
			}
		}
		if r.egress != nil {
			if err := r.egress.refuses(entryBytes(&items[i].rec.Entry), r.opts.PushReserve); err != nil {
				if refusedKeys == nil {
					refusedKeys = map[*keyState]bool{}
				}
				refusedKeys[ks] = true
				sh.refuse(n, err)
				continue
			}
		}
		g := &groups[ks.dest]
		en := items[i].rec.Entry
		en.Ref = uint64(len(g.entries))
		g.entries = append(g.entries, en)
		g.slots = append(g.slots, n)
	}
	for d := range groups {
		r.pushPaced(pushBase, d, groups[d].entries, groups[d].slots, ptrs, &sh)
	}
	return sh
}

// paced is how pushPaced ended.
type paced int

const (
	pacedAll    paced = iota // every entry was pushed
	pacedHeld                // the rate caps left no time for the rest in this run: held
	pacedFailed              // a push left entries not delivered, or the run aborted the wait
)

// pushPaced pushes entries (slots[i] is entry i's item slot) to destination d, in as many
// pushes as the egress rate caps need: each holds what they let through in one push reserve.
// What they leave no time for in this run is held. It stops at a push that leaves entries not
// delivered: their keys freeze, and what follows could not be committed. ptrs gives the
// re-stamped retries their entries (nil: no retries).
func (r *run) pushPaced(pushBase context.Context, d int, entries []loki.Entry, slots []int, ptrs []*loki.Entry, sh *shipment) paced {
	if r.egress != nil { // the caps may cut them into several pushes
		inStreamOrder(entries, slots)
	}
	for off := 0; off < len(entries); {
		n := len(entries) - off
		if r.egress != nil {
			var err error
			if n, err = r.egress.grant(pushBase, entries[off:], r.opts.PushReserve, r.pushEnd()); err != nil {
				sh.err = err // the rest is not delivered
				return pacedFailed
			}
			if n == 0 {
				sh.hold(slots[off:])
				return pacedHeld
			}
		}
		res := r.push(pushBase, d, entries[off:off+n], slots[off:off+n], sh)
		sh.merge(&res, slots[off:off+n])
		if len(res.NotDelivered) > 0 {
			return pacedFailed
		}
		off += n
		if ptrs == nil {
			continue
		}
		switch r.pushRefusedAgain(pushBase, d, &res, slots[off-n:off], ptrs, sh) {
		case pacedHeld:
			sh.hold(slots[off:])
			return pacedHeld
		case pacedFailed:
			return pacedFailed
		}
	}
	return pacedAll
}

// inStreamOrder orders entries (Ref = index), their slots moving with them, so that each
// stream's entries come oldest first, as within one push (the client sends each stream's
// entries in time order). Items are not in time order within a stream (a late file after a
// newer one, two keys of one stream), and a batch cut into several pushes in item order would
// send an entry after a newer one of its stream: refused as too far behind when the window lies
// between them, although the orderer planned it against the stream's head and found it in time.
// Each stream's entries take the positions its entries held, so the streams stay interleaved as
// the items were. A key whose newer entries the caps hold while its older ones go out is held at
// the first held one: the entries pushed after it are sent again by the next run.
func inStreamOrder(entries []loki.Entry, slots []int) {
	newest := map[string]int64{}
	ordered := true
	for i := range entries {
		id, ns := entries[i].Labels.String(), entries[i].Timestamp.UnixNano()
		if last, ok := newest[id]; ok && ns < last {
			ordered = false
			break
		}
		newest[id] = ns
	}
	if ordered {
		return
	}
	at := map[string][]int{} // stream -> the positions of its entries, ascending
	for i := range entries {
		id := entries[i].Labels.String()
		at[id] = append(at[id], i)
	}
	es, ss := slices.Clone(entries), slices.Clone(slots)
	for _, pos := range at {
		byTime := slices.Clone(pos)
		slices.SortStableFunc(byTime, func(a, b int) int { return es[a].Timestamp.Compare(es[b].Timestamp) })
		for j, p := range pos {
			entries[p], slots[p] = es[byTime[j]], ss[byTime[j]]
		}
	}
	for i := range entries {
		entries[i].Ref = uint64(i)
	}
}

// grown returns s emptied, with room for n elements.
func grown[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, 0, n)
	}
	return s[:0]
}

// pushRefusedAgain handles a refusal for the timestamp that the heads did not predict (the
// receiver holds a newer entry than was committed, or its limits are stricter than
// configured): the entry was not stored, so it is pushed again, to the same destination, with
// a timestamp the receiver accepts.
func (r *run) pushRefusedAgain(pushBase context.Context, d int, res *loki.Result, slots []int, ptrs []*loki.Entry, sh *shipment) paced {
	var again []loki.Entry
	var againSlots []int
	var m moves
	for _, rej := range res.Rejected {
		if !r.order.retryable(rej) {
			continue
		}
		if m == nil {
			m = moves{}
		}
		n := slots[rej.Index]
		restamp(ptrs[n], r.order.retryStamp(r.opts.Now(), rej, d, ptrs[n].Labels, m))
		r.restamped(rej.Reason)
		delete(sh.rejected, n)
		sh.outcomes[n] = loki.NotDelivered // until pushed again
		if r.egress != nil {
			if err := r.egress.refuses(entryBytes(ptrs[n]), r.opts.PushReserve); err != nil {
				sh.refuse(n, err) // the re-stamp made it larger
				continue
			}
		}
		en := *ptrs[n]
		en.Ref = uint64(len(again))
		again = append(again, en)
		againSlots = append(againSlots, n)
	}
	if len(again) == 0 {
		return pacedAll
	}
	r.log.Warn("the receiver refused entries for their timestamp although the stream heads predicted none: pushing them again, re-stamped",
		"entries", len(again), "reason", res.Rejected[0].Reason, "destination", DestinationLabel(r.dests[d].name))
	return r.pushPaced(pushBase, d, again, againSlots, nil, sh)
}

// merge records a push's result for the items at slots (slots[i] is entry i's item slot).
func (sh *shipment) merge(res *loki.Result, slots []int) {
	for i, o := range res.Outcomes {
		sh.outcomes[slots[i]] = o
	}
	for _, rej := range res.Rejected {
		sh.rejected[slots[rej.Index]] = rej
	}
	for _, tr := range res.Truncations {
		if sh.sent == nil {
			sh.sent = map[int]int{}
		}
		sh.sent[slots[tr.Index]] = tr.Bytes
	}
	sh.accepted += len(res.Accepted)
	if len(res.NotDelivered) > 0 {
		sh.err = res.Err
	}
}

// cutBefore counts the lines res cut that an earlier push of the shipment cut already: entries
// pushed again, re-stamped after the receiver refused them for their timestamp.
func (sh *shipment) cutBefore(res *loki.Result, slots []int) int {
	n := 0
	for _, tr := range res.Truncations {
		if _, ok := sh.sent[slots[tr.Index]]; ok {
			n++
		}
	}
	return n
}

// pushContext bounds one push: the push reserve, and never into the commit and release
// reserves at the end of the run.
func (r *run) pushContext(pushBase context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(pushBase, minTime(time.Now().Add(r.opts.PushReserve), r.pushEnd()))
}

// pushEnd is when the run's pushes must be over: the commit and release reserves follow.
func (r *run) pushEnd() time.Time {
	return r.deadline.Add(-(r.opts.CommitReserve + r.opts.ReleaseReserve))
}

// push sends entries (Ref = index; entry i is the item at slots[i] of sh) to destination d,
// reports the push to the observer and the egress budget, and raises the stream heads.
func (r *run) push(pushBase context.Context, d int, entries []loki.Entry, slots []int, sh *shipment) loki.Result {
	pushCtx, cancel := r.pushContext(pushBase)
	defer cancel()
	// The client checks timestamps on the receiver's clock, as the plan did; the answers state
	// it anew before anything refused is pushed again.
	pushCtx = r.order.clockContext(pushCtx, d)
	t0 := time.Now()
	res := r.dests[d].sink.Push(pushCtx, entries)
	r.learnClock(d, entries, &res)
	res.Truncated -= sh.cutBefore(&res, slots) // a line is cut once, however often it is pushed
	if r.opts.Observer != nil {
		r.opts.Observer.Pushed(DestinationLabel(r.dests[d].name), entries, &res, time.Since(t0))
	}
	r.hook(StepAfterPush)
	if r.egress != nil {
		r.egress.accepted(entries, res.Outcomes)
	}
	r.order.pushed(d, entries, &res)
	r.rep.Resent += int64(res.Resent)
	r.rep.Truncated += int64(res.Truncated)
	r.rep.InDoubt += int64(res.InDoubt)
	if len(res.Accepted) > 0 {
		r.rep.Pushes++
		r.shipped = true
	}
	if dr := r.destReport(d); dr != nil {
		if len(res.Accepted) > 0 {
			dr.Pushes++
		}
		for _, rej := range res.Rejected {
			if !r.order.retryable(rej) { // a re-stamped retry is not a refusal
				dr.Rejected++
			}
		}
	}
	return res
}

// restamped counts an entry shipped with another timestamp, by Loki's reason for the refusal
// the new timestamp avoids.
func (r *run) restamped(reason loki.Reason) {
	if r.rep.Restamped == nil {
		r.rep.Restamped = map[string]int64{}
	}
	r.rep.Restamped[string(reason)]++
}
