package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/store"
)

// LimitsCounter names the checkpoint-document counter that holds when an org's limits were last
// sampled (Unix seconds): "limits_sampled_at" for the single-org form, "limits_sampled_at:<org>"
// otherwise. It lives with the checkpoints, so every run of the job (group) sees it, and it is
// written through the fenced writer, so overlapping invocations cannot both sample.
const LimitsCounter = "limits_sampled_at"

// LimitsReader reads an org's limits (*salesforce.Client implements it).
type LimitsReader interface {
	Limits(ctx context.Context) (map[string]salesforce.Limit, error)
}

// LimitsPoll samples one org's /limits at most once per Interval across the runs of a job.
// Every /limits call counts against the org's daily API allocation, so the interval is kept in
// the checkpoint document and the slot is committed before the call: a crash after the commit
// loses one sample, never spends a second call in the interval.
type LimitsPoll struct {
	// Org is the org's name ("" for the single-org form).
	Org string
	// Interval is the shortest time between two samples (positive).
	Interval time.Duration
	// Client reads the limits.
	Client LimitsReader
	// Entry, when set, turns a sample into one Loki entry that the run pushes (best effort: a
	// failed push is reported, not retried, and moves no cursor) to the org's destination: that
	// of its bindings (Binding.Org = Org; the first one's if they differ), else Deps.Sink.
	Entry func(ctx context.Context, at time.Time, limits map[string]salesforce.Limit) (loki.Entry, error)
}

// LimitsSample is one org's sample in the run report.
type LimitsSample struct {
	Org    string                      `json:"org,omitempty"`
	At     time.Time                   `json:"at"`
	Limits map[string]salesforce.Limit `json:"limits,omitempty"`
	// Shipped says the sample's entry was accepted by the receiver.
	Shipped bool   `json:"shipped,omitempty"`
	Error   string `json:"error,omitempty"`
}

// limitsCounterName is the counter of one org.
func limitsCounterName(org string) string {
	if org == "" {
		return LimitsCounter
	}
	return LimitsCounter + ":" + org
}

// limitsDue reports whether an org last sampled at the stored counter may be sampled at now. A
// stored time more than one interval in the future (a host with a clock far ahead) does not hold
// the poller back forever.
func limitsDue(c store.Counter, ok bool, now time.Time, interval time.Duration) bool {
	if !ok {
		return true
	}
	last := time.Unix(c.Value, 0)
	return now.Sub(last) >= interval || last.Sub(now) > interval
}

// pollLimits samples the orgs whose interval has passed, before intake: it commits their new
// sample times (one counters-only commit), then calls /limits and pushes the entries. It returns
// false when that commit failed: the run then ends as a failed commit does (fenced, unavailable).
func (r *run) pollLimits(ctx context.Context, stop time.Time) bool {
	if len(r.deps.Limits) == 0 {
		return true
	}
	stored := r.sess.Counters()
	now := r.opts.Now()
	var due []LimitsPoll
	counters := map[string]store.Counter{}
	for _, p := range r.deps.Limits {
		name := limitsCounterName(p.Org)
		c, ok := stored[name]
		if p.Interval <= 0 || !limitsDue(c, ok, now, p.Interval) {
			continue
		}
		due = append(due, p)
		counters[name] = store.Counter{Value: now.Unix()}
	}
	if len(due) == 0 {
		return true
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.CommitReserve)
	err := r.sess.Commit(cctx, store.Change{Counters: counters})
	cancel()
	if err != nil {
		r.commitErr = err
		r.log.Error("commit of the limits sample times failed: stopping", "err", err)
		return false
	}
	callCtx, cancel := context.WithDeadline(ctx, stop)
	defer cancel()
	var entries []loki.Entry
	var owners []int // entries[i] is the sample of r.rep.Limits[owners[i]]
	var dests []int  // entries[i] goes to r.dests[dests[i]]
	for _, p := range due {
		s := LimitsSample{Org: p.Org, At: now.UTC()}
		limits, err := p.Client.Limits(callCtx)
		switch {
		case err != nil:
			s.Error = err.Error()
			r.log.Warn("cannot sample the org limits; next try after the interval", "org", p.Org, "interval", p.Interval, "err", err)
		default:
			s.Limits = limits
			if p.Entry != nil {
				e, err := p.Entry(callCtx, now, limits)
				if err != nil {
					s.Error = fmt.Sprintf("shaping the limits entry: %v", err)
					break
				}
				entries = append(entries, e)
				owners = append(owners, len(r.rep.Limits))
				dests = append(dests, r.limitsDest(p.Org))
			}
		}
		r.rep.Limits = append(r.rep.Limits, s)
	}
	if len(entries) > 0 {
		for d := range r.dests {
			var own []int
			var group []loki.Entry
			for i := range entries {
				if dests[i] == d {
					own, group = append(own, owners[i]), append(group, entries[i])
				}
			}
			if len(group) > 0 {
				r.pushLimits(ctx, stop, d, group, own)
			}
		}
	}
	return true
}

// limitsDest is the index in r.dests of the destination of an org's limits samples: that of
// the org's bindings (the first one's), the default one when the org has none.
func (r *run) limitsDest(org string) int {
	for i, b := range r.deps.Bindings {
		if b.Org == org {
			return r.bindingDest[i]
		}
	}
	return 0
}

// pushLimits pushes the samples' entries to destination d once; they carry no cursor, so
// nothing is retried.
func (r *run) pushLimits(ctx context.Context, stop time.Time, d int, entries []loki.Entry, owners []int) {
	for i := range entries {
		entries[i].Ref = uint64(i)
	}
	pctx, cancel := context.WithDeadline(ctx, minTime(time.Now().Add(r.opts.PushReserve), stop))
	res := r.dests[d].sink.Push(pctx, entries)
	cancel()
	for i, o := range res.Outcomes {
		if i >= len(owners) {
			break
		}
		s := &r.rep.Limits[owners[i]]
		if o == loki.Accepted {
			s.Shipped = true
			continue
		}
		err := res.Err
		if o == loki.Rejected || err == nil {
			err = errors.New(o.String())
			for _, rej := range res.Rejected {
				if rej.Index == i {
					err = fmt.Errorf("rejected (%s): %s", rej.Reason, rej.Detail)
				}
			}
		}
		s.Error = fmt.Sprintf("pushing the limits entry: %v", err)
		r.log.Warn("the org limits entry was not shipped", "org", s.Org, "destination", DestinationLabel(r.dests[d].name), "err", err)
	}
}

// Labels of the org-limits entries (salesforce.limits.ship).
const (
	LimitsSource    = "limits"
	LimitsEventType = "OrgLimits"
)

// ShipLimits is a LimitsPoll.Entry: it shapes a sample (ShapeLimits) labelled, like the org's
// sources label their entries, with the org's Salesforce ID (sf_org_id, read through orgID) and
// labels.
func ShipLimits(sh *shape.Shaper, orgID func(context.Context) (string, error), labels []loki.Label) func(context.Context, time.Time, map[string]salesforce.Limit) (loki.Entry, error) {
	return func(ctx context.Context, at time.Time, limits map[string]salesforce.Limit) (loki.Entry, error) {
		id, err := orgID(ctx)
		if err != nil {
			return loki.Entry{}, err
		}
		return ShapeLimits(sh, append([]loki.Label{{Name: "sf_org_id", Value: id}}, labels...), at, limits)
	}
}

// ShapeLimits shapes one sample into an entry the way a source shapes its records: the shaper's
// transforms and static labels plus labels, source "limits", event type "OrgLimits", and the
// fields <Limit>.Max and <Limit>.Remaining.
func ShapeLimits(sh *shape.Shaper, labels []loki.Label, at time.Time, limits map[string]salesforce.Limit) (loki.Entry, error) {
	names := make([]string, 0, len(limits))
	for n := range limits {
		names = append(names, n)
	}
	slices.Sort(names)
	fields := make([]string, 0, 2*len(names))
	for _, n := range names {
		fields = append(fields, n+".Max", n+".Remaining")
	}
	plan := sh.Plan(shape.Schema{Source: LimitsSource, Type: LimitsEventType, Fields: fields, Labels: labels})
	rec := shape.Record{Type: LimitsEventType, Time: at, ID: []byte(at.UTC().Format(time.RFC3339))}
	for _, n := range names {
		rec.Append(n+".Max", shape.Number, strconv.AppendInt(nil, limits[n].Max, 10))
		rec.Append(n+".Remaining", shape.Number, strconv.AppendInt(nil, limits[n].Remaining, 10))
	}
	e, skip := plan.Shape(&rec)
	if skip != "" {
		return loki.Entry{}, fmt.Errorf("the shape section drops it (%s)", skip)
	}
	return e, nil
}
