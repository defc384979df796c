package opstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/loki"
)

// holdingReceiver forwards pushes to the strict receiver; the push numbered holdAt is stored
// by the receiver and then its answer is held until the client goes away: the sender was
// killed after the receiver took the push and before it could commit.
type holdingReceiver struct {
	URL     string
	rcv     *simloki.Running
	holdAt  atomic.Int64 // 0 = never hold
	pushes  atomic.Int64
	held    chan map[string]bool // keys of the entries of the held push
	heldOne sync.Once
}

func newHoldingReceiver(t *testing.T, rcv *simloki.Running) *holdingReceiver {
	t.Helper()
	h := &holdingReceiver{rcv: rcv, held: make(chan map[string]bool, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			rcv.ServeHTTP(w, r)
			return
		}
		n := h.pushes.Add(1)
		if at := h.holdAt.Load(); at == 0 || n != at {
			rcv.ServeHTTP(w, r)
			return
		}
		before := entryKeys(rcv.Entries())
		rec := httptest.NewRecorder()
		rcv.ServeHTTP(rec, r)
		added := map[string]bool{}
		for k := range entryKeys(rcv.Entries()) {
			if !before[k] {
				added[k] = true
			}
		}
		h.heldOne.Do(func() { h.held <- added })
		<-r.Context().Done() // never answered
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL + simloki.PushPath
	return h
}

// entryKey identifies an entry as the receiver's duplicate detection does.
func entryKey(e simloki.Entry) string {
	return fmt.Sprintf("%s|%d|%s", e.Label("event_type"), e.Timestamp.UnixNano(), e.Line)
}

func entryKeys(es []simloki.Entry) map[string]bool {
	m := make(map[string]bool, len(es))
	for _, e := range es {
		m[entryKey(e)] = true
	}
	return m
}

type backfillOut struct {
	Outcome           string           `json:"outcome"`
	CaughtUp          bool             `json:"caught_up"`
	Document          string           `json:"document"`
	Lease             string           `json:"lease"`
	Files             int64            `json:"files"`
	Rows              int64            `json:"rows"`
	RowsShipped       int64            `json:"rows_shipped"`
	RowsOutsideWindow int64            `json:"rows_outside_window"`
	Bytes             int64            `json:"bytes"`
	APICalls          map[string]int64 `json:"api_calls"`
	Commits           int              `json:"commits"`
}

// TestBackfillKilledAndRestarted: a backfill of 3 days × 3 event types is SIGKILLed after the
// receiver took a push it could not commit, then run again: every row arrives at least once,
// the only duplicates are that push's entries, and the live document is untouched.
func TestBackfillKilledAndRestarted(t *testing.T) {
	const rowsPerFile, hours = 4, 72
	types := []string{"API", "Login", "Report"}
	o := startOrg(t, simsf.AllPermissions())
	end := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	since := end.Add(-hours * time.Hour)
	o.addFiles(t, types, end, hours, rowsPerFile)
	o.addFiles(t, []string{"Logout"}, end, 1, rowsPerFile) // the live job's only type
	rcv := startLoki(t, simloki.Options{})
	hold := newHoldingReceiver(t, rcv)
	s := setup{org: o, loki: hold.URL, types: []string{"Logout"},
		lease: "type: store\n  name: sf2loki\n  duration: 3s\n  renew_interval: 1s\n  max_clock_skew: 1s"}
	cfg := s.write(t)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "    max_retries: 1\n    min_backoff", "    max_retries: 1\n    batch_max_entries: 40\n    min_backoff", 1))
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}

	// The live job runs first: its document must not change during the backfill.
	firstRun(t, cfg)
	_, live := readDoc(t, s.statePath)
	liveShipped := rcv.Count()

	args := []string{"--config", cfg, "--log-level", "info", "backfill", "--since", since.Format(time.RFC3339), "--until", end.Format(time.RFC3339),
		"--event-types", strings.Join(types, ","), "--progress-interval", "20ms", "--wait", "20s"}
	hold.holdAt.Store(6)
	var out1, err1 bytes.Buffer
	cmd := child(context.Background(), t, &out1, &err1, args...)
	var held map[string]bool
	select {
	case held = <-hold.held:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the backfill never reached its 6th push:\n%s", err1.String())
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no release, no last commit
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(held) == 0 {
		t.Fatal("the held push carried no entries")
	}
	mid := rcv.Count() - liveShipped

	hold.holdAt.Store(0)
	res := runChild(t, args...)
	if res.code != 0 {
		t.Fatalf("the restarted backfill: %s", res)
	}
	var sum backfillOut
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.stdout)), &sum); err != nil {
		t.Fatalf("summary: %v\n%s", err, res)
	}
	if sum.Outcome != "ok" || !sum.CaughtUp || !strings.Contains(sum.Document, "state-backfill.json") || sum.Lease != "store/sf2loki-backfill" {
		t.Fatalf("summary %+v", sum)
	}
	if sum.Files == 0 || sum.Rows == 0 || sum.Bytes == 0 || len(sum.APICalls) == 0 || sum.Commits == 0 {
		t.Fatalf("the summary lacks files, rows, bytes, API calls or commits: %+v", sum)
	}
	if !strings.Contains(res.stderr, "backfill progress") {
		t.Errorf("no progress lines on a non-terminal stderr:\n%s", res.stderr)
	}

	// Every row at least once; duplicates only from the push in flight at the kill.
	want := len(types) * hours * rowsPerFile
	seen := map[string]bool{}
	repeats := map[string]bool{} // a refused entry may be counted once per attempt of the client
	for _, e := range rcv.Entries() {
		if e.Label("source") != "eventlogfile" || e.Label("event_type") == "Logout" {
			continue
		}
		if et := e.MetadataValue(loki.EventTimeMetadata); et != "" {
			// Pushed again at another time after the receiver refused it as too far behind the
			// held push's newest entry: a repeat of that push, its own time kept.
			own, err := time.Parse(time.RFC3339Nano, et)
			if err != nil {
				t.Fatal(err)
			}
			e.Timestamp = own
			if !held[entryKey(e)] {
				t.Fatalf("a re-stamped entry that was not in the push in flight at the kill: %s", entryKey(e))
			}
			repeats[entryKey(e)] = true
		}
		seen[entryKey(e)] = true
	}
	if len(seen) != want {
		t.Fatalf("%d distinct rows reached the receiver, want %d (first run %d entries, then %d)", len(seen), want, mid, sum.RowsShipped)
	}
	// The receiver stores an exact duplicate once and counts it, as Loki does; a repeat older
	// than its stream's out-of-order window is refused as too_far_behind, and then pushed again
	// re-stamped (the client cannot know the refused entry had been stored). Either way, only
	// entries of the push in flight at the kill may come twice.
	for _, e := range rcv.Duplicates() {
		if e.Label("event_type") == "Logout" {
			continue
		}
		repeats[entryKey(e)] = true
		if !held[entryKey(e)] {
			t.Fatalf("a duplicate that was not in the push in flight at the kill: %s", entryKey(e))
		}
	}
	for _, rej := range rcv.Rejected() {
		repeats[entryKey(rej.Entry)] = true
		if !held[entryKey(rej.Entry)] {
			t.Fatalf("a rejected entry (%s) that was not a repeat of the push in flight at the kill: %s", rej.Reason, entryKey(rej.Entry))
		}
	}
	if len(repeats) != len(held) {
		t.Fatalf("%d distinct entries came again, want the %d of the push that was never committed", len(repeats), len(held))
	}
	t.Logf("%d rows; the killed push held %d, repeated as %d duplicates and %d too-far-behind refusals (then re-stamped); restart shipped %d",
		want, len(held), len(rcv.Duplicates()), len(rcv.Rejected()), sum.RowsShipped)

	// The live document did not change, and the live job is not fenced by the backfill.
	if _, after := readDoc(t, s.statePath); !bytes.Equal(live, after) {
		t.Fatal("the backfill changed the live document")
	}
	if r := run("--config", cfg, "run-once", "--strict-exit-codes"); r.code != 0 {
		t.Fatalf("the live job after the backfill: %s", r)
	}
	// The backfill's cursors live in its own document under the window's namespace.
	show := run("--config", cfg, "state", "show", "--backfill", "--json")
	if show.code != 0 || !strings.Contains(show.stdout, "backfill:Hourly:"+since.Format(time.RFC3339)+".."+end.Format(time.RFC3339)+":eventlogfile:Login") {
		t.Fatalf("state show --backfill: %s", show)
	}
	// A third run of the same window has nothing left to do.
	again := run(args...)
	if again.code != 0 || !strings.Contains(again.stdout, `"rows_shipped":0`) {
		t.Fatalf("re-running a finished window: %s", again)
	}
}

// TestBackfillWindowBeyondMaxAge: a window older than sink.loki.max_age needs a choice; with
// --ingest-time entries are stamped now and carry their event time in structured metadata;
// rows outside the window are skipped; sampling does not apply.
func TestBackfillWindowBeyondMaxAge(t *testing.T) {
	o := startOrg(t, simsf.AllPermissions())
	end := time.Now().UTC().Truncate(time.Hour).Add(-9 * 24 * time.Hour)
	o.addFiles(t, []string{"Login"}, end.Add(time.Hour), 3, 5) // the last hour is outside the window
	rcv := startLoki(t, simloki.Options{})
	s := setup{org: o, loki: rcv.PushURL(), types: []string{"Login"},
		extra: "shape:\n  types:\n    - type: Login\n      sample_rate: 0.01\n"}
	cfg := s.write(t)
	args := []string{"--config", cfg, "backfill", "--since", end.Add(-2 * time.Hour).Format(time.RFC3339), "--until", end.Format(time.RFC3339)}

	if r := run(args...); r.code != 2 || !strings.Contains(r.stderr, "max_age") || !strings.Contains(r.stderr, "--ingest-time") {
		t.Fatalf("a window beyond max_age without a choice: %s", r)
	}
	r := run(append(args, "--ingest-time")...)
	if r.code != 0 {
		t.Fatalf("--ingest-time: %s", r)
	}
	var sum backfillOut
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &sum); err != nil {
		t.Fatal(err, r)
	}
	if sum.RowsShipped != 10 || sum.RowsOutsideWindow != 5 {
		t.Fatalf("want 10 rows shipped (no sampling) and 5 outside the window: %+v", sum)
	}
	for _, e := range rcv.Entries() {
		et, err := time.Parse(time.RFC3339Nano, e.MetadataValue(loki.EventTimeMetadata))
		if err != nil {
			t.Fatalf("entry without its event time: %+v", e)
		}
		if et.Before(end.Add(-2*time.Hour)) || !et.Before(end) || time.Since(e.Timestamp) > time.Hour {
			t.Fatalf("event time %s, timestamp %s", et, e.Timestamp)
		}
	}
}
