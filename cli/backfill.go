package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/internal/human"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/obs"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source/eventlogfile"
)

func backfillCommand() *cli.Command {
	return &cli.Command{
		Name:  "backfill",
		Usage: "load historical EventLogFile rows of a window, with the backfill's own document and lease",
		Description: "Ships the rows whose event time is in [--since, --until) through the same claim and commit protocol as\n" +
			"run-once (a commit after every push), with its own checkpoint document and lease (<name>-backfill), so it\n" +
			"never touches the live cursors nor fences the live job. Interrupted, the same command resumes at the next\n" +
			"unshipped row. A window left unfinished (--max-duration ran out, or a file Salesforce may still be writing, a\n" +
			"download shorter than its LogFileLength, is held after its whole rows) ends partial (exit 4; 3 if nothing\n" +
			"shipped), not complete, saying what is left: run the same command again (for a held file, once it is complete)\n" +
			"and it ships the rest.\n" +
			"Transforms apply; sampling does not. Rows go to streams of their own, labelled backfill=\"true\"\n" +
			"(--own-streams). Prints a JSON summary on stdout.\n" +
			"Rows older than sink.loki.max_age are refused by Loki: for such a window choose --ingest-time (timestamp\n" +
			"= now, the event time kept in structured metadata " + loki.EventTimeMetadata + ") or --event-time (the receiver accepts them).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "since", Required: true, Usage: "start of the window (RFC 3339, or a date: 2026-11-01)"},
			&cli.StringFlag{Name: "until", Required: true, Usage: "end of the window, exclusive (RFC 3339, or a date)"},
			&cli.StringFlag{Name: "event-types", Usage: "comma-separated event types (default: sources.eventlogfile.event_types)"},
			&cli.StringFlag{Name: "interval", Usage: "Hourly or Daily (default: sources.eventlogfile.interval)"},
			&cli.StringFlag{Name: "org", Usage: "only this org (orgs[].name)"},
			&cli.BoolFlag{Name: "ingest-time", Usage: "stamp entries with the time they are shipped; the event time goes to structured metadata " + loki.EventTimeMetadata},
			&cli.BoolFlag{Name: "event-time", Usage: "keep the event time as the entry timestamp even beyond sink.loki.max_age"},
			&cli.BoolFlag{Name: "own-streams", Value: true, Usage: "ship into streams of their own, labelled backfill=\"true\" (false: into the live job's streams, where rows behind what the live job shipped are re-stamped)"},
			&cli.DurationFlag{Name: "max-duration", Value: 6 * time.Hour, Usage: "stop after this long; a window left unfinished ends partial (exit 4): run the command again to continue"},
			&cli.DurationFlag{Name: "wait", Usage: "how long to wait for another backfill holding the backfill lease"},
			&cli.DurationFlag{Name: "progress-interval", Value: 30 * time.Second, Usage: "how often progress is logged when stderr is not a terminal"},
			&cli.BoolFlag{Name: "plan", Usage: "estimate the backfill's cost per event type and day from the file listing: nothing is downloaded, no lease is taken"},
			&cli.BoolFlag{Name: "json", Usage: "with --plan: print the plan as JSON"},
			&cli.IntFlag{Name: "row-bytes", Usage: fmt.Sprintf("with --plan: the average CSV row size to estimate rows from (default %d)", eventlogfile.DefaultRowBytes)},
			&cli.Float64Flag{Name: "throughput", Usage: "with --plan: encoded Loki bytes per second to estimate the wall time at (default egress.bytes_per_second, else Loki's default ingestion rate, 4 MiB/s)"},
		},
		Action: runBackfill,
	}
}

// parseWindowTime reads an RFC 3339 time, a time without zone (UTC) or a date (UTC midnight).
func parseWindowTime(flag, s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, exitf(ExitConfig, "--%s %q is not a time: use RFC 3339 (2026-11-01T00:00:00Z) or a date (2026-11-01)", flag, s)
}

// backfillPlan is what one backfill invocation ships: a window (eventlogfile.NewWindow) of
// every selected org's event types.
type backfillPlan struct {
	window   *eventlogfile.Window
	interval string
	orgs     []config.BackfillOrg
}

func planBackfill(c *cli.Context, cfg *config.Config) (*backfillPlan, error) {
	since, err := parseWindowTime("since", c.String("since"))
	if err != nil {
		return nil, err
	}
	until, err := parseWindowTime("until", c.String("until"))
	if err != nil {
		return nil, err
	}
	var types []string
	for _, t := range strings.Split(c.String("event-types"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			types = append(types, t)
		}
	}
	p := &backfillPlan{}
	if p.orgs, p.interval, err = cfg.BackfillOrgs(c.String("org"), types, c.String("interval")); err != nil {
		return nil, exitf(ExitConfig, "backfill (--org, --event-types): %v", err)
	}
	if p.window, err = eventlogfile.NewWindow(p.interval, since, until); err != nil {
		return nil, exitf(ExitConfig, "backfill window (--since, --until, --interval): %v", err)
	}
	p.window.IngestTime, p.window.OwnStreams = c.Bool("ingest-time"), c.Bool("own-streams")
	maxAge := cfg.Sink.Loki.MaxAge.D()
	if maxAge > 0 && time.Since(since) > maxAge && !p.window.IngestTime && !c.Bool("plan") {
		msg := fmt.Sprintf("warning: the window starts %s ago, further back than the receiver accepts (sink.loki.max_age %s, Loki's reject_old_samples_max_age): "+
			"those rows would be rejected", time.Since(since).Round(time.Hour), maxAge)
		if !c.Bool("event-time") {
			return nil, exitf(ExitConfig, "%s.\n  choose --ingest-time (entries stamped now, the event time in structured metadata %s), "+
				"or --event-time (the receiver was configured to accept them; raise sink.loki.max_age to match)", msg, loki.EventTimeMetadata)
		}
		fmt.Fprintln(c.App.ErrWriter, "sf2loki: "+msg+"; shipping with event times as asked (--event-time)")
	}
	if p.window.IngestTime && c.Bool("event-time") {
		return nil, exitf(ExitConfig, "--ingest-time and --event-time exclude each other")
	}
	return p, nil
}

// backfillSummary is the JSON line a backfill prints on stdout.
type backfillSummary struct {
	Outcome           job.Outcome      `json:"outcome"`
	ExitCode          int              `json:"exit_code"`
	Since             time.Time        `json:"since"`
	Until             time.Time        `json:"until"`
	Interval          string           `json:"interval"`
	EventTypes        []string         `json:"event_types"`
	IngestTime        bool             `json:"ingest_time,omitempty"`
	Document          string           `json:"document"`
	Lease             string           `json:"lease"`
	CaughtUp          bool             `json:"caught_up"`
	Files             int64            `json:"files"`
	Rows              int64            `json:"rows"`
	RowsShipped       int64            `json:"rows_shipped"`
	RowsOutsideWindow int64            `json:"rows_outside_window"`
	Bytes             int64            `json:"bytes"`
	DownloadBytes     int64            `json:"download_bytes"`
	APICalls          map[string]int64 `json:"api_calls"`
	Pushes            int              `json:"pushes"`
	Commits           int              `json:"commits"`
	Duration          job.Millis       `json:"duration_ms"`
	Report            *job.Report      `json:"report"`
}

func runBackfill(c *cli.Context) error {
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	plan, err := planBackfill(c, cfg)
	if err != nil {
		return err
	}
	if c.Bool("plan") {
		return runBackfillPlan(c, cfg, plan)
	}
	// The flag, not run.max_duration, bounds a backfill, so the configuration's check of the
	// time budget never saw it: with no time to pull, every run would end unfinished.
	budget := cfg.Budget()
	budget.MaxDuration = c.Duration("max-duration")
	if budget.IntakeWindow() <= 0 {
		return exitf(ExitConfig, "--max-duration %s leaves no time to pull: it must exceed run.push_timeout + commit_timeout + release_timeout = %s",
			budget.MaxDuration, budget.Push+budget.Commit+budget.Release)
	}
	bcfg := cfg.ForBackfill()
	bcfg.Lease.AcquireWait = config.Duration(c.Duration("wait")) // another backfill may hold the backfill lease
	log, _, err := newLogger(c, bcfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	prog := newBackfillProgress(plan)
	p, sh, log, err := buildCore(ctx, bcfg, log, nil)
	if err != nil {
		return storeExit(err)
	}
	defer p.close()
	if err := openDeadLetter(ctx, bcfg, p, nil); err != nil { // what the receiver refuses for good goes there
		return storeExit(err)
	}
	log = log.With("backfill", plan.window.KeyPrefix)
	if err := p.bindWindow(bcfg, plan, sh, prog.window, log); err != nil {
		return storeExit(err)
	}
	p.opts.Log, p.opts.Drain, p.opts.MaxDuration, p.opts.Observer = log, true, c.Duration("max-duration"), prog
	// The live job never reads the window's keys: what a run leaves (a held file, the rest of
	// the window when --max-duration runs out) ships only when the backfill is run again, so
	// the run must not end ok as if the window were done.
	p.opts.MustFinish = true
	stopProgress := obs.StartProgress(c.App.ErrWriter, log, c.Duration("progress-interval"), "backfill progress", prog.bar, prog.attrs)
	start := time.Now()
	rep := job.Run(ctx, p.deps, p.opts)
	stopProgress()
	rep.ExitCode = backfillExit(rep)
	logOutcome(log, rep)

	sum := backfillSummary{
		Outcome: rep.Outcome, ExitCode: rep.ExitCode, Since: plan.window.Since, Until: plan.window.Until, Interval: plan.interval,
		EventTypes: plan.eventTypesOf(), IngestTime: plan.window.IngestTime, CaughtUp: rep.CaughtUp, Files: prog.window.Files.Load(), Rows: prog.window.Rows.Load(),
		RowsShipped: rep.Records, RowsOutsideWindow: prog.window.Outside.Load(), Bytes: rep.Bytes,
		DownloadBytes: prog.window.Bytes.Load(), APICalls: map[string]int64{},
		Pushes: rep.Pushes, Commits: rep.Commits, Duration: job.Millis(time.Since(start)), Report: rep,
	}
	if lc, ok := p.deps.Coordinator.(*job.LeaseCoordinator); ok {
		sum.Document, sum.Lease = lc.Store.Object(), lc.Lease.Ref().String()
	}
	for _, s := range rep.Sources {
		for k, n := range s.APICalls {
			sum.APICalls[k] += n
		}
	}
	b, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "%s\n", b)
	fmt.Fprint(c.App.ErrWriter, backfillHuman(sum))
	if rep.ExitCode != ExitOK {
		return &ExitError{Code: rep.ExitCode}
	}
	return nil
}

// backfillExit is the exit code of a backfill run: 0 only when the window is complete. A run
// paused by the daily egress budget exits as an unfinished window does, 4 (3 when nothing
// shipped): the live job never reads the window's keys, so no later scheduled run continues it.
func backfillExit(rep *job.Report) int {
	code := outcomeExit(rep.Outcome, true)
	if rep.Outcome == job.OutcomeBudgetPaused {
		code = ExitPartial
		if rep.Records == 0 {
			code = ExitUnavailable
		}
	}
	return code
}

func backfillHuman(s backfillSummary) string {
	var calls int64
	for _, n := range s.APICalls {
		calls += n
	}
	var b strings.Builder
	fmt.Fprintf(&b, "backfill %s..%s (%s): %s; %d files, %d rows in the window (%d shipped), %d rows outside it, %d bytes, %d API calls, %d commits\n",
		s.Since.Format(time.RFC3339), s.Until.Format(time.RFC3339), s.Interval, s.Outcome, s.Files, s.Rows, s.RowsShipped,
		s.RowsOutsideWindow, s.Bytes, calls, s.Commits)
	if s.Outcome == job.OutcomeOK && s.CaughtUp {
		b.WriteString("  complete\n")
		return b.String()
	}
	if s.Report.Error != "" {
		fmt.Fprintf(&b, "  %s\n", s.Report.Error)
	}
	if len(s.Report.Waiting) > 0 {
		for _, w := range s.Report.Waiting {
			fmt.Fprintf(&b, "  %s %s\n", w.Key, w.Reason)
		}
		b.WriteString("  the window is not complete: run the same command again once the file is complete (Salesforce has finished writing it); " +
			"that run ships the rest and finishes the window\n")
		return b.String()
	}
	b.WriteString("  the window is not complete: run the same command again; it resumes at the next unshipped row\n")
	return b.String()
}

// bindWindow binds, per org of the plan, an EventLogFile source restricted to the window.
func (p *invocationParts) bindWindow(cfg *config.Config, plan *backfillPlan, sh *shape.Shaper, prog *eventlogfile.WindowProgress, log *slog.Logger) error {
	dests := &destinations{cfg: cfg, allowed: sh.PromotedLabelNames(), log: log}
	for _, o := range plan.orgs {
		dest, osh, err := dests.forOrg(o.OrgEntry, sh)
		if err != nil {
			return err
		}
		src, err := backfillSource(cfg, plan, o, osh, prog, log)
		if err != nil {
			return err
		}
		p.deps.Bindings = append(p.deps.Bindings, job.Binding{Org: o.Name, Source: src, Destination: dest})
	}
	return nil
}

// backfillSource is the EventLogFile source of one org restricted to the plan's window.
func backfillSource(cfg *config.Config, plan *backfillPlan, o config.BackfillOrg, sh *shape.Shaper, prog *eventlogfile.WindowProgress, log *slog.Logger) (*eventlogfile.Source, error) {
	client, err := salesforce.New(salesforceOptions(o.Salesforce, cfg.HTTP, log.With("org", o.Name)))
	if err != nil {
		return nil, fmt.Errorf("%w the Salesforce client (%s): %w", errWiring, o.Path, err)
	}
	opts := cfg.EventLogFileOptions(o.OrgEntry)
	opts.Client, opts.Shaper, opts.Log = client, sh, log.With("org", o.Name)
	opts.Interval, opts.EventTypes = plan.interval, o.EventTypes
	w := *plan.window
	w.Progress = prog
	opts.ForWindow(&w, time.Now())
	src, err := eventlogfile.New(opts)
	if err != nil {
		return nil, fmt.Errorf("%w the eventlogfile source (%s): %w", errWiring, o.Path, err)
	}
	return src, nil
}

// backfillProgress is what the backfill read (the window's counters) and shipped.
type backfillProgress struct {
	window *eventlogfile.WindowProgress
	job.Progress
}

func newBackfillProgress(p *backfillPlan) *backfillProgress {
	return &backfillProgress{window: eventlogfile.NewWindowProgress(p.window.Since, p.window.Until)}
}

// attrs are the fields of a progress log line.
func (p *backfillProgress) attrs() []any {
	return []any{"window_done", fmt.Sprintf("%.1f%%", 100*p.window.Fraction()), "files", p.window.Files.Load(),
		"rows", p.window.Rows.Load(), "shipped", p.Shipped.Load(), "bytes", p.Bytes.Load(), "commits", p.Commits.Load()}
}

func (p *backfillProgress) bar() string {
	const width = 30
	f := p.window.Fraction()
	n := int(f * width)
	return fmt.Sprintf("[%s%s] %5.1f%%  %d files  %d rows shipped  %s", strings.Repeat("=", n), strings.Repeat(" ", width-n),
		100*f, p.window.Files.Load(), p.Shipped.Load(), human.Bytes(p.Bytes.Load()))
}

// eventTypesOf lists the event types of the plan, for messages.
func (p *backfillPlan) eventTypesOf() []string {
	var out []string
	for _, o := range p.orgs {
		out = append(out, o.EventTypes...)
	}
	sort.Strings(out)
	return slices.Compact(out)
}
