package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "run the real job against an embedded simulated Salesforce org and Loki receiver (no credentials needed)",
		Description: "Starts a simulated org with a small, lively data set and a strict Loki-protocol receiver in this\n" +
			"process, runs several invocations through the same run-once path production uses, and prints\n" +
			"what arrived. With --loki-url the entries go to a real Loki (or VictoriaLogs) instead.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "loki-url", Usage: "push to this Loki push URL instead of the embedded receiver"},
			&cli.StringFlag{Name: "state-dir", Usage: "keep the checkpoint document here (default: a temporary directory, removed afterwards)"},
			&cli.IntFlag{Name: "runs", Value: 3, Usage: "number of invocations"},
			&cli.IntFlag{Name: "max-records", Value: 2000, Usage: "batch.max_records of each invocation"},
		},
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			level := globalString(c, "log-level")
			if level == "" {
				level = "warn"
			}
			cfg := config.Defaults()
			cfg.Log.Level, cfg.Log.Format = level, "text"
			if f := globalString(c, "log-format"); f != "" {
				cfg.Log.Format = f
			}
			log, _, err := newLogger(c, cfg)
			if err != nil {
				return err
			}
			return runDemo(ctx, c.App.Writer, log, demoOptions{
				lokiURL: c.String("loki-url"), stateDir: c.String("state-dir"),
				runs: c.Int("runs"), maxRecords: c.Int("max-records"),
			})
		},
	}
}

type demoOptions struct {
	lokiURL, stateDir string
	runs, maxRecords  int
}

// demoUser and demoClient are the simulated org's integration user and connected app.
const (
	demoUser   = "integration@demo.example.com"
	demoClient = "3MVG9-sf2loki-demo"
)

// runDemo is the demo: a simulated org, a receiver, a configuration pointing at both, and a few
// real invocations with new events arriving between them.
func runDemo(ctx context.Context, w io.Writer, log *slog.Logger, o demoOptions) error {
	org, keys, err := newDemoOrg()
	if err != nil {
		return err
	}
	sfSrv, err := org.Start()
	if err != nil {
		return err
	}
	defer sfSrv.Close()

	var receiver *simloki.Running
	pushURL := o.lokiURL
	if pushURL == "" {
		receiver, err = simloki.Listen("", simloki.New(simloki.Options{}))
		if err != nil {
			return err
		}
		defer receiver.Close()
		pushURL = receiver.PushURL()
	}
	dir := o.stateDir
	if dir == "" {
		dir, err = os.MkdirTemp("", "sf2loki-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	cfg := demoConfig(sfSrv.URL, string(keys.KeyPEM), pushURL, filepath.Join(dir, "state.json"), o.maxRecords)
	if errs := cfg.Validate(); len(errs) > 0 {
		return fmt.Errorf("demo configuration: %w", errs)
	}
	fmt.Fprintf(w, "sf2loki demo\n  simulated Salesforce org  %s\n  Loki receiver             %s\n  checkpoint document       %s\n\n", sfSrv.URL, pushURL, cfg.State.File.Path)

	for i := 1; i <= o.runs; i++ {
		if i > 1 {
			if err := demoNewEvents(org, i); err != nil {
				return err
			}
		}
		rep := runInvocation(ctx, cfg, log, invocationFlags{})
		printDemoRun(w, i, rep)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if rep.Outcome != job.OutcomeOK {
			return exitf(outcomeExit(rep.Outcome, false), "demo run %d ended %s: %s", i, rep.Outcome, rep.Error)
		}
	}
	if receiver != nil {
		printReceiver(w, receiver.Server)
	}
	return nil
}

// newDemoOrg returns the demo's simulated org, populated with its data set, and the key pair of
// its integration user's connected app.
func newDemoOrg() (*simsf.Org, *simsf.KeyPair, error) {
	org := simsf.New(simsf.Options{Seed: 42})
	keys, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		return nil, nil, err
	}
	org.AddUser(demoUser, simsf.AllPermissions())
	if err := org.AddJWTApp(demoClient, keys.Certificate, demoUser); err != nil {
		return nil, nil, err
	}
	if err := org.Populate(demoDataSet()); err != nil {
		return nil, nil, fmt.Errorf("demo data: %w", err)
	}
	return org, keys, nil
}

// demoDataSet is what the demo's org holds: the event types the Grafana content pack
// (deploy/grafana/content) draws on, whose test ships this data set.
func demoDataSet() simsf.DataSet {
	return simsf.DataSet{
		Window: 6 * time.Hour, HourlyFiles: 4, DailyFiles: -1, RowsPerFile: 100,
		EventTypes:   []string{"Login", "API", "ApiTotalUsage", "Report", "ReportExport", "URI", "ApexExecution", "ApexUnexpectedException"},
		LoginHistory: 400, SetupAuditTrail: 50, AuditEvents: -1, LoginEvents: -1, ApiEvents: -1,
		ApiAnomalyEventStore: -1, ApexLogs: 20, LateRows: -1,
	}
}

// demoConfig is the configuration the demo runs with: the same keys a user writes.
func demoConfig(sfURL, keyPEM, pushURL, statePath string, maxRecords int) *config.Config {
	cfg := config.Defaults()
	cfg.Salesforce.LoginURL = sfURL
	cfg.Salesforce.ClientID, cfg.Salesforce.Username = demoClient, demoUser
	cfg.Salesforce.PrivateKey = config.Secret(keyPEM)
	cfg.Salesforce.Limits = config.OrgLimits{Interval: config.Duration(15 * time.Minute), Ship: true}
	s := &cfg.Sources
	s.EventLogFile.Enabled, s.EventLogFile.Interval = true, "Hourly"
	s.EventLogFile.EventTypes = []string{"*"}
	s.EventLogFile.Lookback = config.Duration(12 * time.Hour)
	s.SOQL.Enabled = true
	// SetupAuditTrail only: LoginHistory would take the login category from the Login
	// EventLogFile type, which the content pack's login panels read.
	s.SOQL.Objects = []config.SOQLObject{demoObject("SetupAuditTrail")}
	s.ApexLog.Enabled = true
	s.ApexLog.Lookback = config.Duration(12 * time.Hour)
	cfg.Sink.Loki.URL = pushURL
	cfg.Sink.Loki.Labels = map[string]string{"job": "sf2loki-demo", "environment": "demo"}
	cfg.State.File.Path = statePath
	cfg.Batch.MaxRecords = maxRecords
	cfg.Run.MaxDuration = config.Duration(time.Minute)
	return cfg
}

func demoObject(name string) config.SOQLObject {
	obj := config.SOQLObject{Name: name}
	config.ApplyDefaults(&obj)
	obj.Lookback = config.Duration(12 * time.Hour)
	return obj
}

// demoNewEvents adds what happens in an org between two runs: a new hourly file of logins,
// setup changes.
func demoNewEvents(org *simsf.Org, run int) error {
	now := time.Now().UTC()
	if _, err := org.AddEventLogFile(simsf.EventLogFileSpec{EventType: "Login", Interval: simsf.IntervalHourly,
		LogDate: now.Add(-time.Hour).Truncate(time.Hour), CreatedDate: now.Add(-10 * time.Minute), Sequence: run, Rows: 50}); err != nil {
		return err
	}
	recs := make([]simsf.Record, 0, 5)
	for k := range 5 {
		recs = append(recs, simsf.Record{"CreatedDate": now.Add(-time.Duration(k) * time.Second), "Action": "PermSetAssign",
			"Section": "Manage Users", "Display": fmt.Sprintf("Permission set \"Demo %d\" assigned to %s", run, demoUser)})
	}
	_, err := org.Insert("SetupAuditTrail", recs...)
	return err
}

func printDemoRun(w io.Writer, i int, rep *job.Report) {
	fmt.Fprintf(w, "run %d: outcome %s, epoch %d, %d records in %d pushes, %d commits, caught up: %v (%s)\n",
		i, rep.Outcome, rep.Epoch, rep.Records, rep.Pushes, rep.Commits, rep.CaughtUp, time.Duration(rep.Duration).Round(time.Millisecond))
	names := sortedKeys(rep.Sources)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %6d records  %3d keys\n", n, rep.Sources[n].Records, rep.Sources[n].Keys)
	}
	for _, k := range sortedKeys(rep.Cursors) {
		fmt.Fprintf(w, "  cursor %-28s %s\n", k, excerpt(string(rep.Cursors[k].After), 90))
	}
	for _, s := range rep.Limits {
		if s.Shipped {
			fmt.Fprintf(w, "  org limits sampled and shipped: DailyApiRequests %d of %d remaining\n",
				s.Limits["DailyApiRequests"].Remaining, s.Limits["DailyApiRequests"].Max)
		}
	}
	fmt.Fprintln(w)
}

func printReceiver(w io.Writer, srv *simloki.Server) {
	streams := srv.Streams()
	sort.Strings(streams)
	fmt.Fprintf(w, "receiver: %d entries in %d streams (%d exact duplicates)\n", srv.Count(), len(streams), len(srv.Duplicates()))
	for _, s := range streams {
		fmt.Fprintf(w, "  %6d  %s\n", len(srv.Stream(s)), s)
	}
	fmt.Fprintln(w, "\nsample lines:")
	for _, s := range streams[:min(3, len(streams))] {
		if es := srv.Stream(s); len(es) > 0 {
			fmt.Fprintf(w, "  %s\n    %s\n", s, excerpt(es[0].Line, 160))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func excerpt(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
