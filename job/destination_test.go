package job_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
)

// tenantClient is a client of srv pushing as tenant.
func tenantClient(t *testing.T, srv *simloki.Server, tenant string) *loki.Client {
	t.Helper()
	c, err := loki.New(loki.Options{URL: "http://loki.test" + simloki.PushPath, TenantID: tenant, Transport: srv.Transport(),
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Two orgs routed to two tenants of one strict receiver, and a third org on the default sink:
// each tenant holds exactly its org's records, once each; the pushes of a batch are one per
// destination; the report and the stream heads are kept per destination.
func TestOrgsRoutedToTheirOwnTenants(t *testing.T) {
	coord := jobtest.New()
	srv := simloki.New(simloki.Options{RequireTenant: true})
	dA := &job.Destination{Name: "tenant-a", Sink: tenantClient(t, srv, "tenant-a")}
	dB := &job.Destination{Name: "tenant-b", Sink: tenantClient(t, srv, "tenant-b")}
	def := tenantClient(t, srv, "shared")
	totals := map[string]map[string]int{
		"a": {"alpha1": 700, "alpha2": 300},
		"b": {"beta": 1200},
		"c": {"gamma": 50},
	}
	deps := job.Deps{Coordinator: coord, Sink: def, Bindings: []job.Binding{
		{Org: "a", Source: numbered(totals["a"]), Destination: dA},
		{Org: "b", Source: numbered(totals["b"]), Destination: dB},
		{Org: "c", Source: numbered(totals["c"])},
	}}
	opts := baseOptions()
	opts.PushEntries = 500
	opts.Ordering.Destination = "shared"

	rep := job.Run(context.Background(), deps, opts)
	if rep.Outcome != job.OutcomeOK || !rep.CaughtUp {
		t.Fatalf("outcome %s (%s), caught up %v", rep.Outcome, rep.Error, rep.CaughtUp)
	}
	tenantOf := map[string]string{"a": "tenant-a", "b": "tenant-b", "c": "shared"}
	want := map[string]int{}
	for org, keys := range totals {
		for k, n := range keys {
			want[tenantOf[org]+"/"+k] = n
		}
	}
	got := map[string]int{}
	for _, e := range srv.Entries() {
		got[e.Tenant+"/"+e.Label("event_type")]++
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d entries, want %d", k, got[k], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("entries landed at %v, want only %v", got, want)
	}
	if d := srv.Duplicates(); len(d) > 0 {
		t.Errorf("%d duplicates", len(d))
	}

	// A push carries one tenant's entries only: the client sends one tenant per request.
	for _, rq := range srv.Requests() {
		if rq.Header.Get("X-Scope-OrgID") == "" {
			t.Errorf("a request without a tenant")
		}
	}
	for name, n := range map[string]int64{"tenant-a": 1000, "tenant-b": 1200, "shared": 50} {
		dr := rep.Destinations[name]
		if dr == nil || dr.Records != n || dr.Pushes == 0 {
			t.Errorf("report for %s: %+v, want %d records", name, dr, n)
		}
	}

	// The heads are kept per destination: the same label set at two tenants is two streams.
	snap, err := coord.Store.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	heads := map[string]bool{}
	for name := range snap.Doc.Counters {
		if id, ok := strings.CutPrefix(name, job.HeadCounterPrefix); ok {
			dest, _, _ := strings.Cut(id, "|")
			heads[dest] = true
		}
	}
	for _, d := range []string{"tenant-a", "tenant-b", "shared"} {
		if !heads[d] {
			t.Errorf("no stream head kept for destination %s (heads: %v)", d, heads)
		}
	}
}

// A run with one destination reports no breakdown: the report of a single-tenant setup is
// unchanged.
func TestOneDestinationHasNoBreakdown(t *testing.T) {
	coord := jobtest.New()
	_, sink := receiver(t, simloki.Options{})
	d := &job.Destination{Name: "only", Sink: sink}
	deps := job.Deps{Coordinator: coord, Bindings: []job.Binding{{Source: numbered(map[string]int{"a": 10}), Destination: d}}}
	rep := job.Run(context.Background(), deps, baseOptions())
	if rep.Outcome != job.OutcomeOK || rep.Records != 10 {
		t.Fatalf("outcome %s (%s), %d records", rep.Outcome, rep.Error, rep.Records)
	}
	if rep.Destinations != nil {
		t.Errorf("destinations %v, want none for a single destination", rep.Destinations)
	}
}

// A dead letter records the destination that refused the entry, and a replay with one source
// per destination sends each line back to that destination only: a line written before
// destinations were recorded goes to the default one, and a line of a destination no longer
// configured is skipped and counted, never sent to another tenant.
func TestDeadLettersGoBackToTheirDestination(t *testing.T) {
	srv := simloki.New(simloki.Options{RequireTenant: true})
	dA := &job.Destination{Name: "tenant-a", Sink: tenantClient(t, srv, "tenant-a")}
	dB := &job.Destination{Name: "tenant-b", Sink: tenantClient(t, srv, "tenant-b")}
	def := tenantClient(t, srv, "shared")
	srv.RejectEntries(func(e simloki.Entry) bool { return e.Tenant == "tenant-b" }, "line_too_long")
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := baseOptions()
	opts.Ordering.Destination = "shared"
	opts.DeadLetter = f
	deps := job.Deps{Coordinator: jobtest.New(), Sink: def, Bindings: []job.Binding{
		{Org: "a", Source: numbered(map[string]int{"alpha": 4}), Destination: dA},
		{Org: "b", Source: numbered(map[string]int{"beta": 3}), Destination: dB},
	}}
	if rep := job.Run(context.Background(), deps, opts); rep.Outcome != job.OutcomeOK || rep.Dropped["bad_request"] != 3 {
		t.Fatalf("outcome %s (%s), dropped %v", rep.Outcome, rep.Error, rep.Dropped)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for _, l := range lines {
		var dl job.DeadLetter
		if err := json.Unmarshal([]byte(l), &dl); err != nil || dl.Destination != "tenant-b" {
			t.Fatalf("dead letter %s: destination %q (%v)", l, dl.Destination, err)
		}
	}
	// A line from before destinations were recorded, and one of a destination now gone.
	ts := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	legacy := `{"time":"` + ts + `","key":"k","reason":"line_too_long","timestamp":"` + ts + `","labels":"{event_type=\"legacy\", job=\"sf2loki\"}","line":"legacy"}`
	gone := `{"time":"` + ts + `","key":"k","destination":"tenant-gone","reason":"line_too_long","timestamp":"` + ts + `","labels":"{event_type=\"gone\", job=\"sf2loki\"}","line":"gone"}`
	if err := os.WriteFile(path, []byte(strings.Join(append(lines, legacy, gone), "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	srv.ClearFaults()
	before := map[string]int{}
	for _, e := range srv.Entries() {
		before[e.Tenant]++
	}
	known := []string{"shared", "tenant-a", "tenant-b"}
	replay := job.Deps{Coordinator: jobtest.New(), Sink: def, Bindings: []job.Binding{
		{Source: &job.DeadLetterSource{Path: path, Destination: "shared", Default: true, Known: known}},
		{Source: &job.DeadLetterSource{Path: path, Destination: "tenant-a", Known: known}, Destination: dA},
		{Source: &job.DeadLetterSource{Path: path, Destination: "tenant-b", Known: known}, Destination: dB},
	}}
	rep := job.Run(context.Background(), replay, opts)
	if rep.Outcome != job.OutcomeOK || rep.Records != 4 || rep.Events["deadletter.unknown_destination"] != 1 {
		t.Fatalf("replay: %s (%s), %d records, events %v", rep.Outcome, rep.Error, rep.Records, rep.Events)
	}
	got := map[string]int{}
	for _, e := range srv.Entries() {
		got[e.Tenant]++
	}
	if got["tenant-b"]-before["tenant-b"] != 3 || got["shared"]-before["shared"] != 1 || got["tenant-a"] != before["tenant-a"] || got["tenant-gone"] != 0 {
		t.Errorf("replayed entries by tenant: before %v, after %v; want tenant-b +3, shared +1 (the legacy line), nothing else", before, got)
	}
}
