package job

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/store"
)

// Why intake stopped: each is recorded once, as the cause of the intake context, where intake
// stops (the first one wins). The puller ending by itself (caught up, batch bounds reached, a
// key failing) leaves no cause.
var (
	errIntakeDeadline = errors.New("intake window is over (run.max_duration minus the push, commit and release reserves)")
	errLeaseLost      = fmt.Errorf("the run's %w", lease.ErrLost)
	errBudgetPaused   = errors.New("the daily egress budget is spent; the next UTC day continues where this run stopped")
	errStopped        = errors.New("the run stopped")
	errPushFailed     = errors.New("a push left entries not delivered")
	errRateHeld       = errors.New("the egress rate caps left no time for more pushes in this run")
)

// run is the state of one invocation. Everything in it is per invocation.
type run struct {
	deps Deps
	opts Options
	log  *slog.Logger
	rep  *Report

	start    time.Time // monotonic
	deadline time.Time

	sess        Session
	keys        map[string]*keyState
	keysInOrder []*keyState
	frozen      frozenSet
	egress      *egress
	guard       *labelGuard
	order       *orderer
	dests       []destination     // [0] is Deps.Sink
	bindingDest []int             // binding index -> dests index
	perDest     bool              // the report breaks down by destination
	deadLetter  *deadLetterWriter // Options.DeadLetter, each dead letter on a line of its own

	// sourceReports holds each binding's entry of rep.Sources (sourceReportByBinding).
	sourceReports []*SourceReport

	eventsMu sync.Mutex
	errMu    sync.Mutex

	// The facts the outcome is decided from, besides why intake stopped.
	shipped      bool  // the receiver accepted at least one entry
	commitErr    error // a commit failed: decides the outcome whatever else happened
	pushErr      error // a push left entries not delivered (the first such failure)
	capErr       error // the egress rate caps can never let an entry through: a key is frozen
	held         int64 // entries the egress rate caps left no time for: the next run ships them
	budgetPaused bool  // the daily budget (on_budget: pause) held entries back for the next UTC day
	sourceErrs   []error
	policyFrozen bool // a key was frozen by on_permanent_reject: freeze
	caughtUp     bool // every key reached its end: none failed, none waits for a later run

	mem batchMemory // what consecutive batches reuse
}

// Run performs one invocation and returns its report. It never panics: an internal error is
// reported as OutcomeInternal.
func Run(ctx context.Context, deps Deps, opts Options) (rep *Report) {
	opts = opts.withDefaults()
	if opts.Invocation == "" {
		opts.Invocation = NewInvocationID()
	}
	r := &run{
		deps: deps, opts: opts,
		log: opts.Log,
		rep: &Report{
			Invocation: opts.Invocation, StartedAt: opts.Now().UTC(),
			Sources: map[string]*SourceReport{},
		},
		keys:          map[string]*keyState{},
		sourceReports: make([]*SourceReport, len(deps.Bindings)),
		start:         time.Now(),
	}
	r.deadline = r.start.Add(opts.MaxDuration)
	if opts.DeadLetter != nil {
		r.deadLetter = &deadLetterWriter{w: opts.DeadLetter}
	}
	r.resolveDestinations()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("internal error", "panic", p, "stack", string(debug.Stack()))
			r.rep.Outcome, r.rep.Error = OutcomeInternal, fmt.Sprint("panic: ", p)
			if r.sess != nil {
				r.release(ctx)
			}
		}
		r.rep.Duration = Millis(time.Since(r.start))
		rep = r.rep
	}()
	if opts.DryRun {
		r.dryRun(ctx)
		return r.rep
	}
	r.invoke(ctx)
	return r.rep
}

// NewInvocationID returns a random id for one invocation.
func NewInvocationID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (r *run) hook(s Step) {
	if r.opts.Hook != nil {
		r.opts.Hook(s)
	}
}

func (r *run) invoke(ctx context.Context) {
	// The session (and its renewer) lives until the run's deadline or the caller's cancellation.
	sessCtx, cancel := context.WithDeadline(ctx, r.deadline)
	defer cancel()
	sess, err := r.deps.Coordinator.Begin(sessCtx, r.opts.Invocation)
	if err != nil {
		o := OutcomeOf(err, false)
		if o == OutcomeUnavailable && ctx.Err() != nil {
			// The signal cut the claim short: say so, not only what the store call saw.
			err = fmt.Errorf("interrupted by a signal before the lease was claimed: %w", err)
		}
		r.end(o, err)
		return
	}
	r.sess = sess
	r.rep.Epoch, r.rep.Holder, r.rep.LeaseWait = sess.Epoch(), sess.Holder(), Millis(time.Since(r.start))
	r.rep.PreviousEpoch = sess.Floor()
	r.hook(StepAfterClaim)
	checkpoints := sess.Checkpoints()
	if sess.Floor() == 0 && len(checkpoints) == 0 {
		r.note("the checkpoint document did not exist: every source starts from its configured lookback")
	}
	counters := sess.Counters()
	if e := r.opts.Egress; e.DailyBytes > 0 || e.LinesPerSecond > 0 || e.BytesPerSecond > 0 {
		r.egress = newEgress(e, r.opts.Now, counters)
	}
	r.order = newOrderer(r.opts.Ordering, counters, r.destNames())
	if g := r.opts.LabelGuard; g.MaxValuesPerDay > 0 && len(g.Labels) > 0 {
		r.guard = newLabelGuard(g, r.opts.Now, counters)
	}
	if !r.pollLimits(ctx, r.deadline.Add(-(r.opts.PushReserve + r.opts.CommitReserve + r.opts.ReleaseReserve))) {
		r.release(ctx)
		r.decide(false, nil)
		return
	}

	// intake stops on the caller's cancellation (signals), the intake deadline, lease loss, a
	// budget, or a failure; pushes are aborted only by the caller or lease loss.
	// The intake deadline is the context's own, so that a source can see how long it may wait
	// (the Salesforce client retries a concurrent-request limit until then).
	intakeStop := r.deadline.Add(-(r.opts.PushReserve + r.opts.CommitReserve + r.opts.ReleaseReserve))
	untilStop, cancelStop := context.WithDeadlineCause(ctx, intakeStop, errIntakeDeadline)
	defer cancelStop()
	intakeCtx, stopIntake := context.WithCancelCause(untilStop)
	pushBase, abortPushes := context.WithCancelCause(ctx)
	defer stopIntake(errStopped)
	defer abortPushes(errStopped)
	watchDone := make(chan struct{})
	defer close(watchDone)
	watch := func() {
		r.log.Warn("lease lost: stopping intake and in-flight pushes; what is pushed is still committed if no newer epoch claimed the document")
		abortPushes(errLeaseLost) // first: the loop may end as soon as intake stops
		stopIntake(errLeaseLost)
	}
	if sess.Lost() != nil { // lost before intake began: do not start pulling
		watch()
	}
	go func() {
		select {
		case <-sess.Context().Done():
			if sess.Lost() != nil {
				watch()
			}
		case <-watchDone:
		}
	}()
	streams := r.open(intakeCtx, values(checkpoints))
	batches := make(chan *batch)
	r.mem.spare = make(chan []item, 1)
	go r.pull(intakeCtx, streams, batches)
	for b := range batches {
		if intakeCtx.Err() != nil {
			continue // drain: the puller sees the canceled intake soon
		}
		if cause := r.pushAndCommit(ctx, pushBase, b); cause != nil {
			stopIntake(cause)
		}
		r.mem.recycle(b)
	}
	// A signal that arrives once the batch is done (while releasing) does not cut the run short.
	interrupted := ctx.Err() != nil
	r.hook(StepBeforeRelease)
	r.release(ctx)
	r.decide(interrupted, context.Cause(pushBase))
}

// pushAndCommit pushes one batch and commits what it settled. It returns why intake must stop,
// or nil to go on.
func (r *run) pushAndCommit(ctx, pushBase context.Context, b *batch) error {
	// Filtered in place: the batch is not used again. Items are moved only when one before them
	// was left out, and never copied to be looked at (an item is 160 bytes).
	n := 0
	for i := range b.items {
		it := &b.items[i]
		if it.ks.frozen { // pulled before its key froze: never pushed, never committed
			it.rec.Lines.Release()
			continue
		}
		if n != i {
			b.items[n] = *it
		}
		n++
	}
	items := b.items[:n]
	if len(items) == 0 {
		return nil
	}
	// Labels are final first (the heads are per stream), then timestamps: a re-stamp adds the
	// event time, which the budget counts.
	if r.guard != nil {
		for label, n := range r.guard.apply(items) {
			if r.rep.LabelOverflow == nil {
				r.rep.LabelOverflow = map[string]int64{}
			}
			r.rep.LabelOverflow[label] += n
		}
	}
	plan := r.order.plan(r.opts.Now(), items)
	var stop error
	if r.egress != nil {
		if cut := r.egress.admit(items); cut < len(items) {
			items, stop = r.overBudget(items, cut)
		}
	}
	sh := r.ship(pushBase, items, plan)
	s := r.settle(items, &sh, r.dispose)
	// Settled: the receiver has what it accepted, and the dead letter and the report keep
	// copies of what they name, so nothing refers to these lines any more: the next rows are
	// shaped into their memory. (Items cut by a paused budget are left to the collector.)
	for i := range items {
		items[i].rec.Lines.Release()
	}
	for _, ks := range r.touched(items) {
		if sh.accepted > 0 {
			r.sourceReport(ks).Pushes++
		}
	}
	r.rep.Records += s.accepted
	r.rep.Bytes += s.bytes
	if sh.err != nil {
		r.log.Warn("push failed: the affected keys are frozen for this run and intake stops", "err", sh.err)
		// A fact of the run, not only why intake stopped: intake may already have stopped for
		// its deadline while the push was retrying, and the first cause is the one kept.
		if r.pushErr == nil {
			r.pushErr = sh.err
		}
		stop = errPushFailed
	} else if len(sh.held) > 0 {
		r.held += int64(len(sh.held))
		if stop == nil { // a spent budget says more
			stop = errRateHeld
		}
	}
	if len(s.updates) > 0 && !r.commit(ctx, s.updates) {
		return errStopped // the commit error decides the outcome
	}
	return stop
}

// overBudget applies the budget policy to items beyond cut: pause pushes only the prefix and
// stops intake; drop turns the rest into skipped records counted as dropped "budget".
func (r *run) overBudget(items []item, cut int) ([]item, error) {
	if r.opts.Egress.OnBudget == BudgetPause {
		r.log.Warn("the daily egress budget is spent: pausing until the next UTC day", "budget_bytes", r.opts.Egress.DailyBytes)
		// A fact of the run, not only why intake stops: intake may stop for its deadline while
		// the admitted prefix is pushed, and the first cause is the one kept.
		r.budgetPaused = true
		return items[:cut], errBudgetPaused
	}
	for i := cut; i < len(items); i++ {
		if !items[i].rec.Skip {
			items[i].rec.Skip, items[i].rec.SkipReason = true, "budget"
			if r.rep.Dropped == nil {
				r.rep.Dropped = map[string]int64{}
			}
			r.rep.Dropped["budget"]++
		}
	}
	return items, nil
}

// touched returns the distinct keys of items, in order.
func (r *run) touched(items []item) []*keyState {
	seen := map[*keyState]bool{}
	var out []*keyState
	var last *keyState
	for i := range items {
		ks := items[i].ks
		if ks == last { // consecutive items mostly share their key
			continue
		}
		last = ks
		if !seen[ks] {
			seen[ks] = true
			out = append(out, ks)
		}
	}
	return out
}

// dispose applies the permanent-rejection policy to one entry; true means the key may advance.
func (r *run) dispose(it item, rej loki.Rejection) bool {
	if r.opts.OnPermanentReject == RejectFreeze {
		r.policyFrozen = true
		return false
	}
	if r.deadLetter != nil {
		if err := r.deadLetter.write(it, rej, r.dests[it.ks.dest].name); err != nil {
			r.log.Error("cannot write the dead letter: the key is frozen instead of dropping the entry", "key", it.ks.key, "err", err)
			r.addErr(fmt.Errorf("dead letter: %w", err))
			return false
		}
	}
	if r.rep.Dropped == nil {
		r.rep.Dropped = map[string]int64{}
	}
	r.rep.Dropped[string(rej.Reason)]++
	r.log.Warn("entry rejected by the receiver for good: dropped", "key", it.ks.key, "reason", rej.Reason, "status", rej.Status, "detail", rej.Detail)
	return true
}

func (r *run) commit(ctx context.Context, updates map[string]json.RawMessage) bool {
	r.hook(StepBeforeCommit)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.CommitReserve)
	t0 := time.Now()
	// The stream heads and the day's egress travel with the cursors they belong to.
	c := store.Change{Set: updates}
	c.Counters, c.DeleteCounters = r.order.change(r.opts.Now())
	if r.egress != nil && r.opts.Egress.DailyBytes > 0 {
		if c.Counters == nil {
			c.Counters = map[string]store.Counter{}
		}
		c.Counters[EgressCounter] = r.egress.counter()
	}
	if r.guard != nil {
		r.guard.change(&c)
	}
	err := r.sess.Commit(cctx, c)
	cancel()
	if r.opts.Observer != nil {
		r.opts.Observer.Committed(time.Since(t0), err)
	}
	r.hook(StepAfterCommit)
	if err != nil {
		r.commitErr = err
		for _, ks := range r.keysInOrder {
			r.rep.Uncommitted += ks.pendingAccepted
		}
		r.log.Error("commit failed: stopping", "err", err)
		return false
	}
	r.rep.Commits++
	r.committedAll()
	r.order.heads.committed()
	if r.guard != nil {
		r.guard.committed()
	}
	if r.egress != nil {
		r.egress.committed()
		if r.egress.overWarn() {
			r.log.Warn("the daily egress budget is nearly spent", "used_bytes", r.egress.used, "budget_bytes", r.opts.Egress.DailyBytes)
		}
	}
	return true
}

func (r *run) release(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.ReleaseReserve)
	defer cancel()
	if err := r.sess.Release(rctx); err != nil {
		r.log.Warn("lease release failed; it expires on its own", "err", err)
	}
	st := r.sess.Stats()
	r.rep.CASRetries, r.rep.CASConflicts, r.rep.LostAcks = st.Conflicts+st.Retries, st.Conflicts, st.LostAcks
	for _, ks := range r.keysInOrder {
		if ks.committed != nil {
			if r.rep.Cursors == nil {
				r.rep.Cursors = map[string]CursorChange{}
			}
			b := r.deps.Bindings[ks.binding]
			at, _ := b.Source.CursorTime(ks.key[len(b.KeyPrefix()):], ks.committed)
			r.rep.Cursors[ks.key] = CursorChange{Before: ks.before, After: ks.committed, At: at}
		}
	}
	for i, b := range r.deps.Bindings {
		if calls := b.Source.Calls(); len(calls) > 0 {
			r.sourceReportByBinding(i).APICalls = calls
		}
	}
}

// decide names the outcome from the facts gathered during the run (interrupted: a signal cut
// the batch short; aborted: the pushes' context's cause). Why intake stopped is no such fact:
// its first cause is the one kept, and the intake deadline may come first.
func (r *run) decide(interrupted bool, aborted error) {
	switch {
	case r.commitErr != nil:
		r.end(commitOutcome(r.commitErr, r.shipped), r.commitErr)
	case interrupted && r.shipped:
		r.end(OutcomePartial, errors.New("interrupted by a signal before the batch finished; the pushed prefix is committed"))
	case interrupted:
		r.end(OutcomeUnavailable, errors.New("interrupted by a signal before anything was shipped"))
	// A loss that cut the run short aborted the pushes before it stopped intake, so a push it
	// cut reads as lost lease, not as a failed push.
	case errors.Is(aborted, errLeaseLost):
		cause := r.sess.Lost()
		if cause == nil {
			cause = errLeaseLost
		}
		if r.shipped {
			r.end(OutcomePartial, cause) // the pushed prefix is committed if no newer epoch claimed
		} else {
			r.end(OutcomeOf(cause, false), cause) // fenced if taken over, unavailable if renewals failed
		}
	case r.pushErr != nil:
		r.end(r.partialOr(OutcomeUnavailable), r.pushErr)
	case r.needsHuman():
		r.end(OutcomeIntegrity, errors.Join(r.sourceErrs...))
	case r.capErr != nil:
		r.end(OutcomeOf(r.capErr, r.shipped), r.capErr)
	case len(r.sourceErrs) > 0:
		r.end(r.partialOr(OutcomeUnavailable), errors.Join(r.sourceErrs...))
	case r.budgetPaused && r.opts.MustFinish:
		r.end(OutcomeBudgetPaused, errors.New("not finished: the daily egress budget (egress.daily_bytes) is spent, and only running this again "+
			"(after 00:00 UTC, or with a larger egress.daily_bytes) ships the rest"))
	case r.budgetPaused:
		r.end(OutcomeBudgetPaused, errBudgetPaused)
	case r.policyFrozen:
		r.end(OutcomePartial, errors.New("a key is frozen at an entry the receiver rejects (sink.loki.on_permanent_reject: freeze); see frozen"))
	case r.opts.MustFinish && (!r.caughtUp || r.held > 0):
		r.end(r.partialOr(OutcomeUnavailable), r.unfinished())
	default:
		if r.held > 0 {
			r.note(fmt.Sprintf("the egress rate caps (egress.lines_per_second, egress.bytes_per_second) left no time in this run "+
				"for %d entries; the next run ships them", r.held))
		}
		r.rep.CaughtUp = r.caughtUp && r.held == 0
		r.end(OutcomeOK, nil)
	}
	if r.egress != nil && r.opts.Egress.DailyBytes > 0 {
		r.rep.Egress = r.egress.report()
	}
}

// unfinished says why a MustFinish run ended before every key reached its end, when nothing
// failed: a key waits for a later run, or the run's time ran out (its intake deadline, or the
// egress rate caps that held entries back until then).
func (r *run) unfinished() error {
	const again = "and only running this again ships the rest"
	if len(r.rep.Waiting) > 0 {
		keys := make([]string, len(r.rep.Waiting))
		for i, w := range r.rep.Waiting {
			keys[i] = w.Key
		}
		return fmt.Errorf("not finished: %s waits for a later run, %s (see waiting)", strings.Join(keys, ", "), again)
	}
	if r.held > 0 {
		return fmt.Errorf("not finished: its time ran out with %d entries the egress rate caps (egress.lines_per_second, egress.bytes_per_second) held back, %s",
			r.held, again)
	}
	if !r.opts.Drain {
		return fmt.Errorf("not finished: the batch bounds were reached, or its time ran out, before every key reached its end, %s", again)
	}
	return fmt.Errorf("not finished: its time ran out before every key reached its end, %s", again)
}

func (r *run) partialOr(o Outcome) Outcome {
	if r.shipped {
		return OutcomePartial
	}
	return o
}

func (r *run) end(o Outcome, err error) {
	r.rep.Outcome = o
	if err != nil {
		r.rep.Error = err.Error()
	}
	for _, e := range r.sourceErrs {
		r.rep.Errors = append(r.rep.Errors, e.Error())
	}
}

// addErr records an error of a source (or the dead letter); safe from the puller goroutine.
func (r *run) addErr(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	r.sourceErrs = append(r.sourceErrs, err)
}

func (r *run) needsHuman() bool {
	for _, err := range r.sourceErrs {
		if errors.Is(err, source.ErrNeedsHuman) {
			return true
		}
	}
	return false
}

// noteSafe is note for sources (called from the puller goroutine).
func (r *run) noteSafe(s string) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	r.note(s)
}

func (r *run) note(s string) {
	r.rep.Notes = append(r.rep.Notes, s)
	r.log.Info(s)
}

// commitOutcome is the outcome of a run whose commit failed: a fenced commit is fenced even
// after shipping (the new holder ships the batch again); anything else as OutcomeOf says.
func commitOutcome(err error, shipped bool) Outcome {
	if errors.Is(err, store.ErrFenced) {
		return OutcomeFenced
	}
	return OutcomeOf(err, shipped)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// fatalForRun reports source errors after which no source should keep pulling.
func fatalForRun(err error) bool {
	return errors.Is(err, salesforce.ErrRequestLimit)
}
