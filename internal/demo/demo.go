// Package demo is `sf2loki demo`: the real job against a simulated Salesforce org (package
// internal/sim/salesforce) and a strict Loki-protocol receiver (internal/sim/loki) in one
// process, so a newcomer sees it work with no credentials. Tests use its org, data set and
// configuration too.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/config"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
)

// Options configure a demo.
type Options struct {
	// LokiURL, when set, receives the entries instead of the embedded receiver.
	LokiURL string
	// StateDir keeps the checkpoint document (default: a temporary directory, removed after).
	StateDir string
	// Runs is the number of invocations; MaxRecords each one's batch.max_records.
	Runs, MaxRecords int
}

// Invoke runs one invocation with a configuration: the CLI's run-once path.
type Invoke func(ctx context.Context, cfg *config.Config) *job.Report

// RunError is a demo run that did not end ok.
type RunError struct {
	Run     int
	Outcome job.Outcome
	Err     string
}

func (e *RunError) Error() string {
	return fmt.Sprintf("demo run %d ended %s: %s", e.Run, e.Outcome, e.Err)
}

// User and Client are the simulated org's integration user and connected app.
const (
	User   = "integration@demo.example.com"
	Client = "3MVG9-sf2loki-demo"
)

// Run is the demo: a simulated org, a receiver, a configuration pointing at both, and a few
// real invocations (through invoke) with new events arriving between them. A run that does
// not end ok stops it with a *RunError.
func Run(ctx context.Context, w io.Writer, o Options, invoke Invoke) error {
	org, keys, err := NewOrg()
	if err != nil {
		return err
	}
	sfSrv, err := org.Start()
	if err != nil {
		return err
	}
	defer sfSrv.Close()

	var receiver *simloki.Running
	pushURL := o.LokiURL
	if pushURL == "" {
		receiver, err = simloki.Listen("", simloki.New(simloki.Options{}))
		if err != nil {
			return err
		}
		defer receiver.Close()
		pushURL = receiver.PushURL()
	}
	dir := o.StateDir
	if dir == "" {
		dir, err = os.MkdirTemp("", "sf2loki-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	cfg := Config(sfSrv.URL, string(keys.KeyPEM), pushURL, filepath.Join(dir, "state.json"), o.MaxRecords)
	if errs := cfg.Validate(); len(errs) > 0 {
		return fmt.Errorf("demo configuration: %w", errs)
	}
	fmt.Fprintf(w, "sf2loki demo\n  simulated Salesforce org  %s\n  Loki receiver             %s\n  checkpoint document       %s\n\n", sfSrv.URL, pushURL, cfg.State.File.Path)

	for i := 1; i <= o.Runs; i++ {
		if i > 1 {
			if err := newEvents(org, i); err != nil {
				return err
			}
		}
		rep := invoke(ctx, cfg)
		printRun(w, i, rep)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if rep.Outcome != job.OutcomeOK {
			return &RunError{Run: i, Outcome: rep.Outcome, Err: rep.Error}
		}
	}
	if receiver != nil {
		printReceiver(w, receiver.Server)
	}
	return nil
}

// NewOrg returns the demo's simulated org, populated with its data set, and the key pair of
// its integration user's connected app.
func NewOrg() (*simsf.Org, *simsf.KeyPair, error) {
	org := simsf.New(simsf.Options{Seed: 42})
	keys, err := simsf.NewKeyPair(time.Now())
	if err != nil {
		return nil, nil, err
	}
	org.AddUser(User, simsf.AllPermissions())
	if err := org.AddJWTApp(Client, keys.Certificate, User); err != nil {
		return nil, nil, err
	}
	if err := org.Populate(DataSet()); err != nil {
		return nil, nil, fmt.Errorf("demo data: %w", err)
	}
	return org, keys, nil
}

// demoDataSet is what the demo's org holds: the event types the Grafana content pack
// (deploy/grafana/content) draws on, whose test ships this data set.
func DataSet() simsf.DataSet {
	return simsf.DataSet{
		Window: 6 * time.Hour, HourlyFiles: 4, DailyFiles: -1, RowsPerFile: 100,
		EventTypes:   []string{"Login", "API", "ApiTotalUsage", "Report", "ReportExport", "URI", "ApexExecution", "ApexUnexpectedException"},
		LoginHistory: 400, SetupAuditTrail: 50, AuditEvents: -1, LoginEvents: -1, ApiEvents: -1,
		ApiAnomalyEventStore: -1, ApexLogs: 20, LateRows: -1,
	}
}

// Config is the configuration the demo runs with: the same keys a user writes.
func Config(sfURL, keyPEM, pushURL, statePath string, maxRecords int) *config.Config {
	cfg := config.Defaults()
	cfg.Salesforce.LoginURL = sfURL
	cfg.Salesforce.ClientID, cfg.Salesforce.Username = Client, User
	cfg.Salesforce.PrivateKey = config.Secret(keyPEM)
	cfg.Salesforce.Limits = config.OrgLimits{Interval: config.Duration(15 * time.Minute), Ship: true}
	s := &cfg.Sources
	s.EventLogFile.Enabled, s.EventLogFile.Interval = true, "Hourly"
	s.EventLogFile.EventTypes = []string{"*"}
	s.EventLogFile.Lookback = config.Duration(12 * time.Hour)
	s.SOQL.Enabled = true
	// SetupAuditTrail only: LoginHistory would take the login category from the Login
	// EventLogFile type, which the content pack's login panels read.
	s.SOQL.Objects = []config.SOQLObject{Object("SetupAuditTrail")}
	s.ApexLog.Enabled = true
	s.ApexLog.Lookback = config.Duration(12 * time.Hour)
	cfg.Sink.Loki.URL = pushURL
	cfg.Sink.Loki.Labels = map[string]string{"job": "sf2loki-demo", "environment": "demo"}
	cfg.State.File.Path = statePath
	cfg.Batch.MaxRecords = maxRecords
	cfg.Run.MaxDuration = config.Duration(time.Minute)
	return cfg
}

// Object is a SOQL object of the demo configuration, with a 12-hour lookback.
func Object(name string) config.SOQLObject {
	obj := config.SOQLObject{Name: name}
	config.ApplyDefaults(&obj)
	obj.Lookback = config.Duration(12 * time.Hour)
	return obj
}

// demoNewEvents adds what happens in an org between two runs: a new hourly file of logins,
// setup changes.
func newEvents(org *simsf.Org, run int) error {
	now := time.Now().UTC()
	if _, err := org.AddEventLogFile(simsf.EventLogFileSpec{EventType: "Login", Interval: simsf.IntervalHourly,
		LogDate: now.Add(-time.Hour).Truncate(time.Hour), CreatedDate: now.Add(-10 * time.Minute), Sequence: run, Rows: 50}); err != nil {
		return err
	}
	recs := make([]simsf.Record, 0, 5)
	for k := range 5 {
		recs = append(recs, simsf.Record{"CreatedDate": now.Add(-time.Duration(k) * time.Second), "Action": "PermSetAssign",
			"Section": "Manage Users", "Display": fmt.Sprintf("Permission set \"Demo %d\" assigned to %s", run, User)})
	}
	_, err := org.Insert("SetupAuditTrail", recs...)
	return err
}

func printRun(w io.Writer, i int, rep *job.Report) {
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
