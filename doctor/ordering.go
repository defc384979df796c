package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/loki"
)

// Ordering measures the receiver's timestamp rules - its out-of-order window, its maximum age
// and whether it stores structured metadata - with test entries on streams of their own, and
// says whether this configuration's ordering design (docs/ordering.md) works with them.
type Ordering struct {
	// Client pushes the probes. Its own checks must be off (loki.Limits with negative ages
	// and sizes): it must send what the receiver is asked about. Nil: ClientErr says why.
	Client    Pusher
	ClientErr error
	// Labels are the static stream labels (sink.loki.labels); Run names this doctor run.
	Labels map[string]string
	Run    string
	// Configured are the limits this configuration assumes (sink.loki.*).
	Configured loki.Limits
	// Sources describe what this configuration ships, for the consequences of a window.
	Sources OrderingSources
	// Now is the clock of the probes. Default time.Now.
	Now func() time.Time
}

// OrderingSources is what the configuration ships, as far as ordering is concerned.
type OrderingSources struct {
	// EventLogFileInterval is "Hourly" or "Daily" ("" when the source is off).
	EventLogFileInterval string
	// SOQLOverlap is the longest SOQL overlap window (0 when the source is off); SOQLLateProbe
	// says whether rows older than it are probed for.
	SOQLOverlap   time.Duration
	SOQLLateProbe bool
	// Restamp is sink.loki.restamp.
	Restamp bool
}

// Search bounds of the measurements: the window to the minute up to 2 days, the maximum age to
// the hour up to 60 days.
const (
	maxWindowProbe = 48 * time.Hour
	maxAgeProbe    = 60 * 24 * time.Hour
)

// OrderingCheck returns the check that measures the receiver's timestamp rules.
func OrderingCheck(o Ordering) Check {
	return Check{ID: "loki.ordering", Title: "Loki ordering window, max age and structured metadata", Needs: []string{"loki.write"}, Run: o.check}
}

// probe pushes one entry and returns how the receiver answered it: "" accepted, else the
// reason, or an error when the receiver could not be asked.
func (o Ordering) probe(ctx context.Context, stream loki.Labels, ts time.Time, md []loki.Label, line string) (loki.Reason, error) {
	res := o.Client.Push(ctx, []loki.Entry{{Timestamp: ts, Labels: stream, Line: line, Metadata: md}})
	switch {
	case len(res.Accepted) == 1:
		return "", nil
	case len(res.Rejected) == 1:
		return res.Rejected[0].Reason, nil
	}
	return "", fmt.Errorf("the receiver did not answer the probe: %w", res.Err)
}

func (o Ordering) stream(kind string) loki.Labels {
	pairs := make([]loki.Label, 0, len(o.Labels)+2)
	for k, v := range o.Labels {
		pairs = append(pairs, loki.Label{Name: k, Value: v})
	}
	pairs = append(pairs, loki.Label{Name: "source", Value: TestSource}, loki.Label{Name: "event_type", Value: "ordering-" + kind + "-" + o.Run})
	return loki.NewLabels(pairs...)
}

// measured is what the probes found.
type measured struct {
	window, maxAge time.Duration
	windowAtLeast  bool // no refusal up to maxWindowProbe
	ageAtLeast     bool // no refusal up to maxAgeProbe
	metadata       bool
	probes         int
}

func (o Ordering) measure(ctx context.Context) (measured, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	var m measured
	t0 := now()
	line := func(what string) string {
		m.probes++
		return fmt.Sprintf(`{"message":"sf2loki doctor ordering probe (%s); safe to ignore","doctor_run":%q}`, what, o.Run)
	}

	// Structured metadata, on a stream of its own.
	r, err := o.probe(ctx, o.stream("metadata"), t0, []loki.Label{{Name: "doctor_run", Value: o.Run}}, line("metadata"))
	if err != nil {
		return m, err
	}
	m.metadata = r == ""

	// Maximum age, to the hour: the distributor checks age before anything else, so a refusal
	// for age means too old whatever the stream holds. A minute of slack covers the time the
	// probe takes to reach the receiver.
	age := o.stream("age")
	tooOld := func(hours int) (bool, error) {
		d := time.Duration(hours) * time.Hour
		r, err := o.probe(ctx, age, t0.Add(time.Minute-d), nil, line("age "+d.String()))
		return r == loki.ReasonTooOld, err
	}
	lo, hi := 1, int(maxAgeProbe/time.Hour)
	if old, err := tooOld(hi); err != nil {
		return m, err
	} else if !old {
		lo, m.ageAtLeast = hi, true
	}
	for hi-lo > 1 && !m.ageAtLeast {
		mid := (lo + hi) / 2
		old, err := tooOld(mid)
		if err != nil {
			return m, err
		}
		if old {
			hi = mid
		} else {
			lo = mid
		}
	}
	m.maxAge = time.Duration(lo) * time.Hour

	// Out-of-order window, to the minute: behind a head at t0, an entry is refused
	// too_far_behind once it is more than the window behind. Accepted probes are older than the
	// head: they never move it.
	win := o.stream("window")
	if r, err := o.probe(ctx, win, t0, nil, line("head")); err != nil || r != "" {
		if err == nil {
			err = fmt.Errorf("the receiver refused the probe stream's head entry (%s)", r)
		}
		return m, err
	}
	behind := func(minutes int) (bool, error) {
		d := time.Duration(minutes) * time.Minute
		r, err := o.probe(ctx, win, t0.Add(-d), nil, line("window "+d.String()))
		return r == loki.ReasonTooFarBehind || r == loki.ReasonOutOfOrder, err
	}
	lo, hi = 0, int(min(maxWindowProbe, m.maxAge-time.Hour)/time.Minute)
	if far, err := behind(hi); err != nil {
		return m, err
	} else if !far {
		lo, m.windowAtLeast = hi, true
	}
	for hi-lo > 1 && !m.windowAtLeast {
		mid := (lo + hi) / 2
		far, err := behind(mid)
		if err != nil {
			return m, err
		}
		if far {
			hi = mid
		} else {
			lo = mid
		}
	}
	m.window = time.Duration(lo) * time.Minute
	return m, nil
}

func (o Ordering) check(ctx context.Context) Result {
	if o.Client == nil {
		return Fail("fix sink.loki (sf2loki config check)", "cannot build the Loki client: %v", o.ClientErr)
	}
	m, err := o.measure(ctx)
	if err != nil {
		return Fail("check that the receiver is reachable and accepts the test write (loki.write)", "cannot measure the receiver's timestamp rules: %v", err)
	}
	c := o.Configured.WithDefaults()
	atLeast := func(d time.Duration, open bool) string {
		if open {
			return "at least " + d.String()
		}
		return d.String()
	}
	details := []string{
		fmt.Sprintf("out-of-order window: %s behind a stream's newest entry (to the minute; sink.loki.out_of_order_window %s)", atLeast(m.window, m.windowAtLeast), c.OutOfOrderWindow),
		fmt.Sprintf("max age: %s (to the hour; sink.loki.max_age %s)", atLeast(m.maxAge, m.ageAtLeast), c.MaxAge),
		fmt.Sprintf("structured metadata: %s (sink.loki.allow_structured_metadata %v)", map[bool]string{true: "stored", false: "refused"}[m.metadata], !c.DisallowStructuredMetadata),
		fmt.Sprintf("%d probe entries on the streams {source=%q, event_type=~\"ordering-.*-%s\"}", m.probes, TestSource, o.Run),
	}
	var problems, fixes []string
	if !m.metadata && !c.DisallowStructuredMetadata {
		return Fail("enable structured metadata on the receiver (Loki 3: allow_structured_metadata on a TSDB v13 schema), or set sink.loki.allow_structured_metadata: false (re-stamped entries then cannot keep their time and are dropped instead)",
			"the receiver refuses structured metadata, which this configuration sends").With(details...)
	}
	if m.window+time.Minute <= c.OutOfOrderWindow && !m.windowAtLeast {
		problems = append(problems, fmt.Sprintf("the receiver's out-of-order window (%s) is shorter than sink.loki.out_of_order_window (%s)", m.window, c.OutOfOrderWindow))
		fixes = append(fixes, fmt.Sprintf("set sink.loki.out_of_order_window: %s (or raise the receiver's max_chunk_age: the window is half of it)", m.window.Round(time.Minute)))
		details = append(details, o.consequences(m.window, c.OutOfOrderWindow)...)
	} else if m.window >= c.OutOfOrderWindow+time.Minute {
		details = append(details, fmt.Sprintf("the receiver accepts entries up to %s behind: sink.loki.out_of_order_window: %s would re-stamp fewer entries", atLeast(m.window, m.windowAtLeast), m.window.Round(time.Minute)))
	}
	if m.maxAge+time.Hour <= c.MaxAge && !m.ageAtLeast {
		problems = append(problems, fmt.Sprintf("the receiver's max age (%s) is shorter than sink.loki.max_age (%s)", m.maxAge, c.MaxAge))
		fixes = append(fixes, fmt.Sprintf("set sink.loki.max_age: %s", m.maxAge))
	}
	if len(problems) > 0 {
		return Warn(strings.Join(fixes, "; "), "%s: entries the configuration expects the receiver to take would be refused, then pushed again re-stamped (more requests) or, without re-stamping, dropped",
			strings.Join(problems, "; ")).With(details...)
	}
	return Pass("the receiver's timestamp rules match this configuration").With(details...)
}

// consequences says what a receiver window shorter than the configured one means for what this
// configuration ships.
func (o Ordering) consequences(window, configured time.Duration) []string {
	s := o.Sources
	act := "re-stamped (shipped at their stream's newest time, their own time in structured metadata event_time)"
	if !s.Restamp {
		act = "refused before pushing and dropped or frozen (sink.loki.restamp: false)"
	}
	out := []string{fmt.Sprintf("consequence for this configuration: with sink.loki.out_of_order_window set to %s, entries between %s and %s behind their stream's newest entry are refused by the receiver and pushed again at the cost of extra requests; set to %s, entries more than about %s behind are %s:",
		configured, window, configured, window, window*3/4, act)}
	switch s.EventLogFileInterval {
	case "Hourly":
		out = append(out, fmt.Sprintf("  - eventlogfile (Hourly): a file spans an hour; rows of a file split over several pushes that are not in time order, and every row of a late Sequence file more than %s behind, are moved", window))
	case "Daily":
		out = append(out, fmt.Sprintf("  - eventlogfile (Daily): a file spans 24 hours; its rows must reach the receiver within %s of time order, or they are moved", window))
	}
	if s.SOQLOverlap > 0 {
		line := fmt.Sprintf("  - soql: rows found late inside the overlap window (%s)", s.SOQLOverlap)
		if s.SOQLOverlap > window {
			line += fmt.Sprintf(" - longer than %s - ", window)
		}
		if s.SOQLLateProbe {
			line += " and every row the late probe finds"
		}
		out = append(out, line+" are moved when more than the window behind")
	}
	return out
}
