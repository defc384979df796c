package doctor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/internal/kubeclient"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lease"
	leasek8s "github.com/sf2loki/sf2loki/lease/kubernetes"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/obs"
	"github.com/sf2loki/sf2loki/salesforce"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/configmap"
)

// ProbeSuffix names the probe object next to the document (file path, S3 key, GCS object).
const ProbeSuffix = ".sf2loki-doctor-probe"

// Builders build a configuration's store and lease the way a run builds them.
type Builders struct {
	Store func(ctx context.Context, cfg *config.Config) (*store.Store, error)
	Lease func(ctx context.Context, cfg *config.Config, st *store.Store) (lease.Lease, error)
}

// ForConfig returns every check of the configuration (source says where it was read from)
// and what must be closed once they ran.
func ForConfig(ctx context.Context, source string, cfg *config.Config, b Builders, log *slog.Logger) ([]Check, []io.Closer) {
	var closers []io.Closer
	var warnings []string
	for _, w := range cfg.Warnings() {
		if w != lease.PairingWarning(cfg.Lease.Type, cfg.State.Store) { // the lease's pairing check reports it
			warnings = append(warnings, w)
		}
	}
	checks := []Check{
		Config(source, warnings),
		Budget(cfg.Budget()),
	}
	var clocks []ClockSource
	for _, org := range cfg.OrgList() {
		if !org.Sources.Enabled() && !org.Salesforce.Configured() {
			continue
		}
		o, closer := orgTarget(org, cfg.HTTP, log)
		if closer != nil {
			closers = append(closers, closer)
		}
		checks = append(checks, Salesforce(o)...)
		if o.Client != nil {
			client := o.Client
			name := "Salesforce"
			if org.Name != "" {
				name += " (" + org.Name + ")"
			}
			clocks = append(clocks, ClockSource{Name: name, Offset: func(context.Context) (time.Duration, bool, error) {
				off, ok := client.ServerClockOffset()
				return off, ok, nil
			}})
		}
	}

	run := lease.NewInvocation()
	for _, d := range destinations(cfg) {
		lc, lerr := loki.New(probeOptions(d.loki, cfg.HTTP, log))
		target := Loki{ClientErr: lerr, URL: obs.RedactURL(d.loki.URL), Labels: d.loki.Labels, Run: run}
		if lc != nil {
			target.Client = lc
		}
		lokiChecks := []Check{LokiCheck(target), OrderingCheck(orderingTarget(cfg, d.loki, log, run))}
		checks = append(checks, Prefixed(d.prefix, lokiChecks)...)
		if d.clock != "" {
			clocks = append(clocks, HTTPDate(d.clock, d.loki.URL, nil))
		}
	}

	for _, g := range cfg.Groups() {
		sl, cl := storeAndLease(ctx, g.Config, g.Name, b, log)
		closers = append(closers, cl...)
		if g.Name != "" {
			sl = Prefixed("job["+g.Name+"].", sl)
		}
		checks = append(checks, sl...)
	}
	checks = append(checks, Clock(clocks, cfg.Lease.MaxClockSkew.D()))
	return checks, closers
}

// orgTarget maps one org's configuration onto its checks' target.
func orgTarget(org config.OrgEntry, h config.HTTP, log *slog.Logger) (Org, io.Closer) {
	s := org.Sources
	o := Org{Name: org.Name, Path: org.Path, AuthMode: org.Salesforce.AuthMode, Username: org.Salesforce.Username}
	so := org.Salesforce.ClientOptions(h)
	so.Logger = log.With("org", org.Name)
	client, err := salesforce.New(so)
	if err != nil {
		o.ClientErr = err
		return o, nil
	}
	o.Client = client
	if s.EventLogFile.Enabled {
		o.EventLogFile = &EventLogFile{Interval: s.EventLogFile.Interval, EventTypes: s.EventLogFile.EventTypes, Exclude: s.EventLogFile.Exclude}
	}
	if s.SOQL.Enabled {
		for _, obj := range s.SOQL.Objects {
			o.Objects = append(o.Objects, obj.Name)
		}
	}
	o.ApexLog = s.ApexLog.Enabled
	var closer io.Closer
	if p := s.PubSub; p.Enabled {
		o.PubSub = &PubSub{Endpoint: p.Endpoint, Topics: p.Topics}
		po := p.ClientOptions()
		po.Logger = log
		pc, err := sfpubsub.New(client, po)
		if err != nil {
			o.PubSub.ClientErr = err
		} else {
			o.PubSub.Client, closer = pc, pc
		}
	}
	return o, closer
}

// storeAndLease builds the store and lease checks of one document (one job group, job; empty:
// no job groups).
func storeAndLease(ctx context.Context, cfg *config.Config, job string, b Builders, log *slog.Logger) ([]Check, []io.Closer) {
	var closers []io.Closer
	st, serr := b.Store(ctx, cfg)
	ds := Store{Store: st, StoreErr: serr, Type: cfg.State.Store, PubSub: pubsubTopics(cfg, job)}
	switch cfg.State.Store {
	case "file":
		ds.FilePath = cfg.State.File.Path
	case "configmap":
		ds.ProbeNote = "no probe needed: the Kubernetes API server enforces resourceVersion preconditions on every update (and a least-privilege Role allows no probe object); permissions are checked by dry run in store.rbac"
		cm := cfg.State.ConfigMap
		ds.Kube = kubeTarget(cm.Kubeconfig, ResourceConfigMaps, configmap.Namespace(cm.Namespace), cm.Name)
	}
	if cfg.State.Store != "configmap" {
		pcfg := *cfg
		pcfg.State.File.Path += ProbeSuffix
		pcfg.State.S3.Key += ProbeSuffix
		pcfg.State.GCS.Object += ProbeSuffix
		if pst, err := b.Store(ctx, &pcfg); err != nil {
			ds.ProbeErr = err
		} else {
			ds.Probe = pst.Backend()
		}
		if cfg.State.Store == "file" {
			// The probe's lock file outlives the probe object; doctor leaves nothing behind.
			closers = append(closers, closerFunc(func() error { return os.Remove(pcfg.State.File.Path + ".lock") }))
		}
	}
	dl := Lease{Type: cfg.Lease.Type, StoreType: cfg.State.Store, Store: st, Skew: cfg.Lease.MaxClockSkew.D()}
	if st == nil && cfg.Lease.Type == "store" {
		dl.LeaseErr = fmt.Errorf("the store lease lives in the document: %w", serr)
	} else {
		l, err := b.Lease(ctx, cfg, st)
		dl.Lease, dl.LeaseErr = l, err
		if err == nil {
			dl.Ref = l.Ref()
		}
		if cfg.Lease.Type == "kubernetes" && err == nil {
			dl.Kube = kubeTarget(cfg.Lease.Kubeconfig, ResourceLeases, dl.Ref.Namespace, dl.Ref.Name)
		}
	}
	return append(StoreChecks(ds), LeaseChecks(dl)...), closers
}

// pubsubTopics lists the Pub/Sub topics of every org of cfg (job group job) for store.pubsub,
// with the keys a run reads for them: the first org with a source enabled also reads the
// unprefixed keys of a single-org past (job.MarkLegacyFallback).
func pubsubTopics(cfg *config.Config, job string) []PubSubTopics {
	var out []PubSubTopics
	first := true
	for _, org := range cfg.OrgList() {
		if !org.Sources.Enabled() {
			continue
		}
		legacy := first && org.Name != ""
		first = false
		p := org.Sources.PubSub
		if !p.Enabled {
			continue
		}
		out = append(out, PubSubTopics{Org: org.Name, Legacy: legacy, Path: org.SourcesPath() + ".pubsub", Job: job, Topics: p.Topics,
			AgeWarning: p.AgeWarning.D(), ReplayLost: p.ReplayLost, Start: string(p.Start)})
	}
	return out
}

// closerFunc adapts a function to io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// kubeTarget builds the target of a Kubernetes object with sf2loki's credentials.
func kubeTarget(kubeconfig, resource, namespace, name string) *KubeObject {
	k := &KubeObject{Resource: resource, Namespace: namespace, Name: name}
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

// probeOptions are the options of a client that probes a receiver: the configured one's, with
// at most 3 attempts (a check must answer within its timeout).
func probeOptions(l config.Loki, h config.HTTP, log *slog.Logger) loki.Options {
	lo := l.ClientOptions(h)
	lo.Logger, lo.MaxAttempts = log, min(lo.MaxAttempts, 3)
	return lo
}

// orderingTarget is the ordering check of the configuration: a client without its own checks
// (the probes must reach the receiver as they are), the limits assumed, and what is shipped.
func orderingTarget(cfg *config.Config, l config.Loki, log *slog.Logger, run string) Ordering {
	lo := probeOptions(l, cfg.HTTP, log)
	lo.Limits = loki.Limits{MaxAge: -1, CreationGracePeriod: -1, MaxMetadataBytes: -1, MaxMetadataEntries: -1}
	lc, err := loki.New(lo)
	o := Ordering{ClientErr: err, Labels: l.Labels, Run: run, Configured: l.ReceiverLimits(),
		Sources: OrderingSources{Restamp: cfg.Sink.Loki.Restamp}}
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

// destination is one receiver and tenant doctor checks.
type destination struct {
	prefix string // of its checks' ids: "" for sink.loki, "destination[<name>]." for the others
	loki   config.Loki
	clock  string // the name of its clock source, "" when another destination has its URL
}

// destinations names the checks of every receiver the configuration pushes to.
func destinations(cfg *config.Config) []destination {
	var out []destination
	for _, r := range cfg.Receivers() {
		if r.Default {
			out = append(out, destination{loki: r.Loki, clock: "Loki"})
			continue
		}
		name := job.DestinationLabel(r.Name)
		d := destination{prefix: "destination[" + name + "].", loki: r.Loki}
		if r.FirstAtURL {
			d.clock = "Loki (" + name + ")"
		}
		out = append(out, d)
	}
	return out
}
