package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/doctor"
	"github.com/sf2loki/sf2loki/internal/kubeclient"
	"github.com/sf2loki/sf2loki/lease"
	leasek8s "github.com/sf2loki/sf2loki/lease/kubernetes"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/obs"
	"github.com/sf2loki/sf2loki/salesforce"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/store/configmap"
)

// probeSuffix names the probe object next to the document (file path, S3 key, GCS object).
const probeSuffix = ".sf2loki-doctor-probe"

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "live preflight: config and time budget, Salesforce auth and permissions, a Loki test write, the store and the lease",
		Description: "Checks run in dependency order; each ends PASS, INFO, WARN, FAIL or SKIP, with a fix for WARN and FAIL.\n" +
			"Nothing real is written: the store probe uses a separate object (<document>" + probeSuffix + "),\n" +
			"Kubernetes permissions are checked with dry runs, and the Loki test entry carries source=\"" + doctor.TestSource + "\".\n" +
			"Exit codes: 0 no FAIL, 1 any FAIL, 2 the configuration does not load.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the results as one JSON document (for CI)"},
			&cli.StringFlag{Name: "job", Usage: "check only this job group (jobs[].name); default: every group's store and lease"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "time limit of each check"},
		},
		Action: runDoctor,
	}
}

func runDoctor(c *cli.Context) error {
	write := func(rep *doctor.Report, r *obs.Redactor) error {
		var b strings.Builder
		var err error
		if c.Bool("json") {
			err = rep.WriteJSON(&b)
		} else {
			err = rep.WriteTable(&b)
		}
		if err != nil {
			return err
		}
		out := b.String()
		if r != nil {
			out = r.Scrub(out)
		}
		_, err = io.WriteString(c.App.Writer, out)
		return err
	}
	cfg, err := loadConfig(c)
	if err != nil {
		if werr := write(&doctor.Report{Results: []doctor.Result{doctor.ConfigFailed(err)}}, nil); werr != nil {
			return werr
		}
		return &ExitError{Code: ExitConfig}
	}
	if name := c.String("job"); name != "" {
		if cfg, err = cfg.ForJob(name); err != nil {
			return exitf(ExitConfig, "%v", err)
		}
	}
	log, redactor, err := newLogger(c, cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	checks, closers := doctorChecks(ctx, configSource(c), cfg, log)
	defer func() {
		for _, cl := range closers {
			_ = cl.Close()
		}
	}()
	rep, err := doctor.Run(ctx, checks, doctor.Options{Timeout: c.Duration("timeout"), Logger: log})
	if err != nil {
		return err
	}
	if err := write(rep, redactor); err != nil {
		return err
	}
	if rep.Failed() {
		return &ExitError{Code: ExitDoctorFail}
	}
	return nil
}

func configSource(c *cli.Context) string {
	if p := globalString(c, "config"); p != "" {
		return p
	}
	return "the configuration (defaults and environment)"
}

// doctorChecks builds every check of the configuration, and what must be closed afterwards.
func doctorChecks(ctx context.Context, source string, cfg *config.Config, log *slog.Logger) ([]doctor.Check, []io.Closer) {
	var closers []io.Closer
	var warnings []string
	for _, w := range cfg.Warnings() {
		if !strings.Contains(w, "flock") { // lease.pairing reports it
			warnings = append(warnings, w)
		}
	}
	b := cfg.Budget()
	checks := []doctor.Check{
		doctor.Config(source, warnings),
		doctor.Budget(doctor.TimeBudget{
			MaxDuration: b.MaxDuration, Push: b.Push, Commit: b.Commit, Release: b.Release, Startup: b.Startup,
			Margin: b.Margin, AcquireWait: b.AcquireWait, LeaseDuration: b.LeaseDuration, RenewInterval: b.RenewInterval,
			ClockSkew: b.ClockSkew, SchedulePeriod: b.SchedulePeriod, Deadline: b.Deadline, TerminationGrace: b.TerminationGrace,
		}),
	}
	var clocks []doctor.ClockSource
	for _, org := range cfg.OrgList() {
		if !org.Sources.Enabled() && !org.Salesforce.Configured() {
			continue
		}
		o, closer := doctorOrg(org, cfg.HTTP, log)
		if closer != nil {
			closers = append(closers, closer)
		}
		checks = append(checks, doctor.Salesforce(o)...)
		if o.Client != nil {
			client := o.Client
			name := "Salesforce"
			if org.Name != "" {
				name += " (" + org.Name + ")"
			}
			clocks = append(clocks, doctor.ClockSource{Name: name, Offset: func(context.Context) (time.Duration, bool, error) {
				off, ok := client.ServerClockOffset()
				return off, ok, nil
			}})
		}
	}

	run := lease.NewInvocation()
	for _, d := range doctorDestinations(cfg) {
		lo := lokiOptions(d.loki, cfg.HTTP, log)
		lo.MaxAttempts = min(lo.MaxAttempts, 3)
		lc, lerr := loki.New(lo)
		target := doctor.Loki{ClientErr: lerr, URL: obs.RedactURL(d.loki.URL), Labels: d.loki.Labels, Run: run}
		if lc != nil {
			target.Client = lc
		}
		lokiChecks := []doctor.Check{doctor.LokiCheck(target), doctor.OrderingCheck(doctorOrdering(cfg, d.loki, log, run))}
		checks = append(checks, doctor.Prefixed(d.prefix, lokiChecks)...)
		if d.clock != "" {
			clocks = append(clocks, doctor.HTTPDate(d.clock, d.loki.URL, nil))
		}
	}

	groups := []string{""}
	if len(cfg.Jobs) > 0 {
		groups = cfg.JobNames()
	}
	for _, g := range groups {
		gcfg := cfg
		if g != "" {
			var err error
			if gcfg, err = cfg.ForJob(g); err != nil {
				continue // cannot happen for a listed name
			}
		}
		sl, cl := doctorStoreAndLease(ctx, gcfg, log)
		closers = append(closers, cl...)
		if g != "" {
			sl = doctor.Prefixed("job["+g+"].", sl)
		}
		checks = append(checks, sl...)
	}
	checks = append(checks, doctor.Clock(clocks, cfg.Lease.MaxClockSkew.D()))
	return checks, closers
}

// doctorOrg maps one org's configuration onto its doctor target.
func doctorOrg(org config.OrgEntry, h config.HTTP, log *slog.Logger) (doctor.Org, io.Closer) {
	s := org.Sources
	o := doctor.Org{Name: org.Name, Path: org.Path, AuthMode: org.Salesforce.AuthMode, Username: org.Salesforce.Username}
	client, err := salesforce.New(salesforceOptions(org.Salesforce, h, log.With("org", org.Name)))
	if err != nil {
		o.ClientErr = err
		return o, nil
	}
	o.Client = client
	if s.EventLogFile.Enabled {
		o.EventLogFile = &doctor.EventLogFile{Interval: s.EventLogFile.Interval, EventTypes: s.EventLogFile.EventTypes, Exclude: s.EventLogFile.Exclude}
	}
	if s.SOQL.Enabled {
		for _, obj := range s.SOQL.Objects {
			o.Objects = append(o.Objects, obj.Name)
		}
	}
	o.ApexLog = s.ApexLog.Enabled
	var closer io.Closer
	if p := s.PubSub; p.Enabled {
		o.PubSub = &doctor.PubSub{Endpoint: p.Endpoint, Topics: p.Topics}
		pc, err := sfpubsub.New(client, sfpubsub.Options{Endpoint: p.Endpoint, Plaintext: p.Plaintext, TLSCAFile: p.TLS.CAFile,
			TLSServerName: p.TLS.ServerName, TLSInsecureSkipVerify: p.TLS.InsecureSkipVerify, Logger: log})
		if err != nil {
			o.PubSub.ClientErr = err
		} else {
			o.PubSub.Client, closer = pc, pc
		}
	}
	return o, closer
}

// doctorStoreAndLease builds the store and lease checks of one document (one job group).
func doctorStoreAndLease(ctx context.Context, cfg *config.Config, log *slog.Logger) ([]doctor.Check, []io.Closer) {
	var closers []io.Closer
	st, serr := buildStore(ctx, cfg, log)
	ds := doctor.Store{Store: st, StoreErr: serr, Type: cfg.State.Store}
	switch cfg.State.Store {
	case "file":
		ds.FilePath = cfg.State.File.Path
	case "configmap":
		ds.ProbeNote = "no probe needed: the Kubernetes API server enforces resourceVersion preconditions on every update (and a least-privilege Role allows no probe object); permissions are checked by dry run in store.rbac"
		cm := cfg.State.ConfigMap
		ds.Kube = kubeObject(cm.Kubeconfig, doctor.ResourceConfigMaps, configmap.Namespace(cm.Namespace), cm.Name)
	}
	if cfg.State.Store != "configmap" {
		pcfg := *cfg
		pcfg.State.File.Path += probeSuffix
		pcfg.State.S3.Key += probeSuffix
		pcfg.State.GCS.Object += probeSuffix
		if pst, err := buildStore(ctx, &pcfg, log); err != nil {
			ds.ProbeErr = err
		} else {
			ds.Probe = pst.Backend()
		}
		if cfg.State.Store == "file" {
			// The probe's lock file outlives the probe object; doctor leaves nothing behind.
			closers = append(closers, closerFunc(func() error { return os.Remove(pcfg.State.File.Path + ".lock") }))
		}
	}
	dl := doctor.Lease{Type: cfg.Lease.Type, StoreType: cfg.State.Store, Store: st, Skew: cfg.Lease.MaxClockSkew.D()}
	if st == nil && cfg.Lease.Type == "store" {
		dl.LeaseErr = fmt.Errorf("the store lease lives in the document: %w", serr)
	} else {
		l, err := buildLease(ctx, cfg, st, lease.NewInvocation(), log)
		dl.Lease, dl.LeaseErr = l, err
		if err == nil {
			dl.Ref = l.Ref()
		}
		if cfg.Lease.Type == "kubernetes" && err == nil {
			dl.Kube = kubeObject(cfg.Lease.Kubeconfig, doctor.ResourceLeases, dl.Ref.Namespace, dl.Ref.Name)
		}
	}
	return append(doctor.StoreChecks(ds), doctor.LeaseChecks(dl)...), closers
}

// closerFunc adapts a function to io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// kubeObject builds the doctor target of a Kubernetes object with sf2loki's credentials.
func kubeObject(kubeconfig, resource, namespace, name string) *doctor.KubeObject {
	k := &doctor.KubeObject{Resource: resource, Namespace: namespace, Name: name}
	rc, err := leasek8s.RESTConfig(nil, kubeconfig)
	if err != nil {
		k.ClientErr = err
		return k
	}
	if k.Client, err = kubeclient.New(rc); err != nil {
		k.ClientErr = err
	}
	return k
}

// doctorOrdering is the ordering check of the configuration: a client without its own checks
// (the probes must reach the receiver as they are), the limits assumed, and what is shipped.
func doctorOrdering(cfg *config.Config, l config.Loki, log *slog.Logger, run string) doctor.Ordering {
	lo := lokiOptions(l, cfg.HTTP, log)
	lo.MaxAttempts = min(lo.MaxAttempts, 3)
	lo.Limits = loki.Limits{MaxAge: -1, CreationGracePeriod: -1, MaxMetadataBytes: -1, MaxMetadataEntries: -1}
	lc, err := loki.New(lo)
	o := doctor.Ordering{ClientErr: err, Labels: l.Labels, Run: run, Configured: l.ReceiverLimits(),
		Sources: doctor.OrderingSources{Restamp: cfg.Sink.Loki.Restamp}}
	if lc != nil {
		o.Client = lc
	}
	for _, org := range cfg.OrgList() {
		if e := org.Sources.EventLogFile; e.Enabled && o.Sources.EventLogFileInterval != "Daily" {
			o.Sources.EventLogFileInterval = e.Interval
		}
		if q := org.Sources.SOQL; q.Enabled {
			for _, obj := range q.Objects {
				o.Sources.SOQLOverlap = max(o.Sources.SOQLOverlap, obj.Overlap.D())
				o.Sources.SOQLLateProbe = o.Sources.SOQLLateProbe || (obj.LateProbe && !obj.BigObject)
			}
		}
	}
	return o
}
