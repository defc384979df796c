package job

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// Outcome names how an invocation ended. The CLI maps each to an exit code in one table.
type Outcome string

// Outcomes of an invocation (docs/fencing.md, "What each outcome means").
const (
	OutcomeOK           Outcome = "ok"           // shipped, or nothing new
	OutcomeBusy         Outcome = "busy"         // a live holder has the lease; nothing written
	OutcomeFenced       Outcome = "fenced"       // superseded by a newer epoch; stopped writing
	OutcomeUnavailable  Outcome = "unavailable"  // nothing shipped: Salesforce, Loki, store or lease down
	OutcomePartial      Outcome = "partial"      // something shipped, then the run ended early
	OutcomeIntegrity    Outcome = "integrity"    // needs a human: corrupt document, impossible state
	OutcomeConfig       Outcome = "config_error" // configuration or permission problem
	OutcomeInternal     Outcome = "internal_error"
	OutcomeBudgetPaused Outcome = "budget_paused" // the daily egress budget is spent; resumes next day
	OutcomeDryRun       Outcome = "dry_run"       // pulled and shaped, pushed nothing
)

// Report is the result of one invocation, printed as one JSON line on stdout.
type Report struct {
	Outcome    Outcome `json:"outcome"`
	ExitCode   int     `json:"exit_code"`
	Error      string  `json:"error,omitempty"`
	Invocation string  `json:"invocation"`
	Holder     string  `json:"holder,omitempty"`
	Epoch      uint64  `json:"epoch,omitempty"`
	// PreviousEpoch is the document's fence before this run's claim: Epoch-PreviousEpoch above 1
	// means the epoch jumped (a recreated lease, runs that acquired and never claimed).
	PreviousEpoch uint64    `json:"previous_epoch,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	Duration      Millis    `json:"duration_ms"`
	LeaseWait     Millis    `json:"lease_wait_ms"`
	CASRetries    int       `json:"cas_retries"`
	// CASConflicts and LostAcks detail the store writes: precondition failures met, and
	// ambiguous writes a re-read proved had landed.
	CASConflicts int  `json:"cas_conflicts,omitempty"`
	LostAcks     int  `json:"lost_acks,omitempty"`
	CaughtUp     bool `json:"caught_up"`
	// Records counts entries the receiver accepted; Bytes their line bytes as sent (after the
	// line cap).
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// Truncated counts lines cut by the line cap (sink.loki.line_max_bytes). A cut line carries
	// the structured-metadata marker sf2loki_truncated only where the receiver's limits take it
	// (loki.Truncation.Marked); it is counted either way.
	Truncated int64 `json:"truncated,omitempty"`
	// InDoubt counts entries of pushes that were sent but never answered (cut by a lost lease,
	// a signal or a timeout): the receiver may hold them although they are not counted as
	// records; the next run sends them again.
	InDoubt int64 `json:"in_doubt,omitempty"`
	// Pushes and Commits count successful pushes and checkpoint commits.
	Pushes  int `json:"pushes"`
	Commits int `json:"commits"`
	// Uncommitted counts entries accepted by the receiver whose cursor could not be committed (a
	// failed commit, or an entry beyond a key frozen at an earlier one): they will be shipped
	// again by the next run.
	Uncommitted int64                    `json:"uncommitted,omitempty"`
	Sources     map[string]*SourceReport `json:"sources"`
	// Destinations breaks the accepted entries down by destination (DestinationLabel), when
	// the run pushes to more than one.
	Destinations map[string]*DestinationReport `json:"destinations,omitempty"`
	Cursors      map[string]CursorChange       `json:"cursors,omitempty"`
	Dropped      map[string]int64              `json:"dropped,omitempty"`
	// LabelOverflow counts, per promoted label, the entries whose value was past the day's
	// cap of distinct values (LabelGuardOptions): shipped with the overflow value.
	LabelOverflow map[string]int64 `json:"label_overflow,omitempty"`
	// Restamped counts entries shipped with another timestamp than their own (kept in structured
	// metadata event_time), by Loki's reason for the refusal the move avoided.
	Restamped map[string]int64 `json:"restamped,omitempty"`
	// Resent counts entries the Loki client sent again after a 400 it could not predict (each
	// possibly stored twice at a receiver that keeps exact duplicates).
	Resent int64       `json:"resent,omitempty"`
	Frozen []FrozenKey `json:"frozen,omitempty"`
	// Waiting lists the keys that stopped in this run with more to ship that a later run ships
	// (source.ErrWaiting), and why: the run is not caught up.
	Waiting []WaitingKey     `json:"waiting,omitempty"`
	Events  map[string]int64 `json:"events,omitempty"`
	Egress  *EgressReport    `json:"egress,omitempty"`
	// Limits are the org limits sampled in this run (only when an org's interval had passed).
	Limits []LimitsSample `json:"limits,omitempty"`
	Errors []string       `json:"errors,omitempty"`
	Notes  []string       `json:"notes,omitempty"`
}

// SourceReport is one source's share of a run (sources of several orgs are reported apart).
type SourceReport struct {
	Records  int64            `json:"records"`
	Bytes    int64            `json:"bytes"`
	Skipped  int64            `json:"skipped,omitempty"`
	Dropped  int64            `json:"dropped,omitempty"`
	Pushes   int              `json:"pushes"`
	Keys     int              `json:"keys"`
	APICalls map[string]int64 `json:"api_calls,omitempty"`
	// Org and Source name the binding (the report's key joins them), and Events are its named
	// counts (late_rows, cursor_reset, ...), for the metrics; the JSON report keeps the events
	// in Report.Events.
	Org    string           `json:"-"`
	Source string           `json:"-"`
	Events map[string]int64 `json:"-"`
}

// CursorChange is a key's cursor before the run (as claimed) and after it (as committed).
type CursorChange struct {
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
	// At is the time position of After, read by its source (zero when it names none).
	At time.Time `json:"at,omitzero"`
}

// FrozenKey is a key that stopped advancing in this run, and the record it stopped at.
type FrozenKey struct {
	Key       string    `json:"key"`
	Reason    string    `json:"reason"`
	Timestamp time.Time `json:"timestamp,omitzero"`
	Stream    string    `json:"stream,omitempty"`
	Line      string    `json:"line,omitempty"` // excerpt
}

// WaitingKey is a key that stopped in this run with more to ship, and its source's reason
// (what waits, and for what).
type WaitingKey struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// Millis is a duration printed as whole milliseconds.
type Millis time.Duration

// MarshalJSON prints the duration in milliseconds.
func (m Millis) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(m).Milliseconds())
}

// Summary is the report for a person: the outcome, what was shipped per source, the error and
// the notes (run-once prints it on a terminal).
func (rep *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "outcome %s (exit %d) epoch %d: %d records, %d bytes in %d pushes, %d commits, %s\n",
		rep.Outcome, rep.ExitCode, rep.Epoch, rep.Records, rep.Bytes, rep.Pushes, rep.Commits, time.Duration(rep.Duration).Round(time.Millisecond))
	for _, n := range slices.Sorted(maps.Keys(rep.Sources)) {
		s := rep.Sources[n]
		fmt.Fprintf(&b, "  %-28s %8d records %10d bytes  %d keys\n", n, s.Records, s.Bytes, s.Keys)
	}
	if rep.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", rep.Error)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

// ReplaySummary says what a replay shipped and what the receiver refused again.
func (rep *Report) ReplaySummary(file string) string {
	var b strings.Builder
	var refused int64
	for _, n := range rep.Dropped {
		refused += n
	}
	fmt.Fprintf(&b, "deadletter replay %s: %s; %d entries shipped, %d refused again", file, rep.Outcome, rep.Records, refused)
	if refused > 0 {
		reasons := make([]string, 0, len(rep.Dropped))
		for r, n := range rep.Dropped {
			reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
		}
		sort.Strings(reasons)
		fmt.Fprintf(&b, " (%s)", strings.Join(reasons, ", "))
	}
	if n := rep.Restamped; len(n) > 0 {
		var moved int64
		for _, k := range n {
			moved += k
		}
		fmt.Fprintf(&b, "; %d re-stamped (their own time in structured metadata %s)", moved, EventTimeMetadata)
	}
	b.WriteString("\n")
	for _, f := range rep.Frozen {
		fmt.Fprintf(&b, "  stopped at an entry refused again (%s); fix the cause and replay again\n", f.Reason)
	}
	if rep.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", rep.Error)
	}
	return b.String()
}
