package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"
)

// Status is the verdict of one check.
type Status string

// Statuses, from good to bad. Only FAIL makes doctor exit non-zero.
const (
	StatusPass Status = "PASS" // works as configured
	StatusInfo Status = "INFO" // a fact worth knowing, not a problem (a recreated lease, a first run)
	StatusWarn Status = "WARN" // works, but something will bite later
	StatusFail Status = "FAIL" // will not work as configured; the fix says what to do
	StatusSkip Status = "SKIP" // not run: a prerequisite did not pass, or it does not apply
)

// Result is the outcome of one check.
type Result struct {
	ID      string   `json:"id"`
	Title   string   `json:"title"`
	Status  Status   `json:"status"`
	Message string   `json:"message"`
	Fix     string   `json:"fix,omitempty"`
	Details []string `json:"details,omitempty"`
	// Millis is how long the check ran.
	Millis int64 `json:"duration_ms"`
}

// Pass returns a PASS result with a formatted message.
func Pass(format string, a ...any) Result {
	return Result{Status: StatusPass, Message: fmt.Sprintf(format, a...)}
}

// Info returns an INFO result with a formatted message.
func Info(format string, a ...any) Result {
	return Result{Status: StatusInfo, Message: fmt.Sprintf(format, a...)}
}

// Warn returns a WARN result with its fix and a formatted message.
func Warn(fix, format string, a ...any) Result {
	return Result{Status: StatusWarn, Message: fmt.Sprintf(format, a...), Fix: fix}
}

// Fail returns a FAIL result with its fix and a formatted message.
func Fail(fix, format string, a ...any) Result {
	return Result{Status: StatusFail, Message: fmt.Sprintf(format, a...), Fix: fix}
}

// Skip returns a SKIP result with a formatted reason.
func Skip(format string, a ...any) Result {
	return Result{Status: StatusSkip, Message: fmt.Sprintf(format, a...)}
}

// With returns r with details appended (one line each).
func (r Result) With(details ...string) Result {
	r.Details = append(r.Details, details...)
	return r
}

// Check is one preflight check.
type Check struct {
	// ID is unique and stable ("store.probe", "salesforce[prod].auth"); Needs refers to it.
	ID string
	// Title says in a few words what is checked.
	Title string
	// Needs lists the IDs of checks that must end PASS, WARN or INFO before this one runs;
	// otherwise it is skipped. Every ID must be in the same Run.
	Needs []string
	// Run performs the check. ID, Title and duration are filled in by the engine.
	Run func(ctx context.Context) Result
}

// Options configures Run. Zero values mean the defaults.
type Options struct {
	// Timeout bounds each check. Default 30s.
	Timeout time.Duration
	// Logger receives one debug line per check. Default slog.Default().
	Logger *slog.Logger
}

// Report is the outcome of a doctor run, in the order the checks ran.
type Report struct {
	Results []Result `json:"results"`
}

// ErrGraph reports checks whose Needs cannot be satisfied (an unknown ID, a duplicate ID, or a
// cycle): a programming error, not a finding.
var ErrGraph = errors.New("doctor: invalid check graph")

// Run runs checks in dependency order (given order among checks that are ready) and returns
// their results. A check runs only when every check it needs ended PASS, WARN or INFO; a
// panicking check ends FAIL. Run returns early only for ErrGraph.
func Run(ctx context.Context, checks []Check, o Options) (*Report, error) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	order, err := sortChecks(checks)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	done := map[string]Result{}
	for _, c := range order {
		var r Result
		if blocker, ok := blocked(c, done); ok {
			r = Skip("needs %s (%s), which did not pass", blocker.ID, blocker.Title)
		} else {
			r = runOne(ctx, c, o.Timeout)
		}
		r.ID, r.Title = c.ID, c.Title
		done[c.ID] = r
		rep.Results = append(rep.Results, r)
		o.Logger.Debug("doctor check", "id", r.ID, "status", r.Status, "message", r.Message, "duration_ms", r.Millis)
	}
	return rep, nil
}

func blocked(c Check, done map[string]Result) (Result, bool) {
	for _, n := range c.Needs {
		if r := done[n]; r.Status == StatusFail || r.Status == StatusSkip {
			return r, true
		}
	}
	return Result{}, false
}

func runOne(ctx context.Context, c Check, timeout time.Duration) (r Result) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			r = Fail("this is a bug in sf2loki doctor; please report it with the output of --log-level debug",
				"internal error: %v", p).With(stackLines(12)...)
		}
		r.Millis = time.Since(start).Milliseconds()
	}()
	r = c.Run(cctx)
	if r.Status == "" {
		r.Status = StatusFail
		r.Message = "check returned no status (bug)"
	}
	if cctx.Err() != nil && ctx.Err() == nil && r.Status == StatusFail && r.Fix == "" {
		r.Fix = fmt.Sprintf("the check did not finish within %s: the endpoint is slow or unreachable", timeout)
	}
	return r
}

// sortChecks orders checks so that each comes after everything it needs, keeping the given
// order otherwise.
func sortChecks(checks []Check) ([]Check, error) {
	index := map[string]int{}
	for i, c := range checks {
		if c.ID == "" {
			return nil, fmt.Errorf("%w: check %d has no ID", ErrGraph, i)
		}
		if _, dup := index[c.ID]; dup {
			return nil, fmt.Errorf("%w: duplicate check ID %q", ErrGraph, c.ID)
		}
		index[c.ID] = i
	}
	for _, c := range checks {
		for _, n := range c.Needs {
			if _, ok := index[n]; !ok {
				return nil, fmt.Errorf("%w: %s needs unknown check %q", ErrGraph, c.ID, n)
			}
		}
	}
	placed := make([]bool, len(checks))
	out := make([]Check, 0, len(checks))
	for len(out) < len(checks) {
		progress := false
		for i, c := range checks {
			if placed[i] {
				continue
			}
			ready := true
			for _, n := range c.Needs {
				if !placed[index[n]] {
					ready = false
					break
				}
			}
			if ready {
				placed[i] = true
				out = append(out, c)
				progress = true
				break // restart from the top: earlier checks keep priority
			}
		}
		if !progress {
			var stuck []string
			for i, c := range checks {
				if !placed[i] {
					stuck = append(stuck, c.ID)
				}
			}
			return nil, fmt.Errorf("%w: dependency cycle among %s", ErrGraph, strings.Join(stuck, ", "))
		}
	}
	return out, nil
}

// Count returns how many results have status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, x := range r.Results {
		if x.Status == s {
			n++
		}
	}
	return n
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool { return r.Count(StatusFail) > 0 }

// Result returns the result of the check with the given ID.
func (r *Report) Result(id string) (Result, bool) {
	for _, x := range r.Results {
		if x.ID == id {
			return x, true
		}
	}
	return Result{}, false
}

// Summary is one line: "14 checks: 11 PASS, 1 INFO, 1 WARN, 1 FAIL, 0 SKIP".
func (r *Report) Summary() string {
	return fmt.Sprintf("%d checks: %d PASS, %d INFO, %d WARN, %d FAIL, %d SKIP", len(r.Results),
		r.Count(StatusPass), r.Count(StatusInfo), r.Count(StatusWarn), r.Count(StatusFail), r.Count(StatusSkip))
}

// WriteTable writes the report for humans: one line per check, its details and fix indented
// below it, and the summary.
func (r *Report) WriteTable(w io.Writer) error {
	width := len("CHECK")
	for _, x := range r.Results {
		width = max(width, len(x.ID))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s %-*s  %s\n", "STATUS", width, "CHECK", "RESULT")
	pad := strings.Repeat(" ", 7+width+2)
	for _, x := range r.Results {
		fmt.Fprintf(&b, "%-6s %-*s  %s\n", x.Status, width, x.ID, oneLine(x.Message))
		for _, d := range x.Details {
			fmt.Fprintf(&b, "%s  %s\n", pad, oneLine(d))
		}
		if x.Fix != "" && (x.Status == StatusFail || x.Status == StatusWarn) {
			fmt.Fprintf(&b, "%sfix: %s\n", pad, oneLine(x.Fix))
		}
	}
	b.WriteString(r.Summary())
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// jsonReport is the --json form: the results, the counts and the verdict.
type jsonReport struct {
	OK      bool           `json:"ok"`
	Summary map[string]int `json:"summary"`
	Results []Result       `json:"results"`
}

// WriteJSON writes the report as one JSON document (for CI).
func (r *Report) WriteJSON(w io.Writer) error {
	j := jsonReport{OK: !r.Failed(), Results: r.Results, Summary: map[string]int{}}
	for _, s := range []Status{StatusPass, StatusInfo, StatusWarn, StatusFail, StatusSkip} {
		j.Summary[strings.ToLower(string(s))] = r.Count(s)
	}
	if j.Results == nil {
		j.Results = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(j)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Prefixed returns checks with prefix prepended to every ID and to every Needs entry that
// names a check of the same set (job groups: "job[elf].store.read").
func Prefixed(prefix string, checks []Check) []Check {
	ids := map[string]bool{}
	for _, c := range checks {
		ids[c.ID] = true
	}
	out := make([]Check, len(checks))
	for i, c := range checks {
		c.ID = prefix + c.ID
		needs := make([]string, len(c.Needs))
		for k, n := range c.Needs {
			if ids[n] {
				n = prefix + n
			}
			needs[k] = n
		}
		c.Needs = needs
		out[i] = c
	}
	return out
}

// stackLines returns up to n lines of the current goroutine's stack, past the panic machinery.
func stackLines(n int) []string {
	lines := strings.Split(strings.TrimSpace(string(debug.Stack())), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic(") {
			lines = lines[i:]
			break
		}
	}
	return lines[:min(n, len(lines))]
}
