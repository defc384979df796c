package opstest

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
)

// TestBackfillWhileRunOnceRunsEveryMinute: a backfill of the previous 3 days runs while the
// live job's run-once runs again and again (new hourly files keep arriving), both shipping the
// same event types to the strict receiver with Loki's default limits. The backfilled rows are
// days behind what the live job shipped to its streams; they go to streams of their own
// (backfill="true"), so the receiver refuses none of them as too far behind, and every row of
// every file reaches it exactly once.
func TestBackfillWhileRunOnceRunsEveryMinute(t *testing.T) {
	const rows = 3
	types := []string{"Login", "API"}
	o := startOrg(t, simsf.AllPermissions())
	now := time.Now().UTC()
	liveFrom := now.Truncate(time.Hour).Add(-5 * time.Hour) // the live job's first hour
	until := liveFrom.Add(-2 * time.Hour)                   // the backfill window ends here...
	since := until.Add(-72 * time.Hour)                     // ...and starts 3 days before
	o.addFiles(t, types, until, 72, rows)
	o.addFiles(t, types, liveFrom.Add(3*time.Hour), 3, rows) // the live hours already written
	rcv := startLoki(t, simloki.Options{})
	s := setup{org: o, loki: rcv.PushURL(), types: types}
	cfg := s.write(t)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The live job looks back only as far as its own hours.
	b = []byte(strings.Replace(string(b), "lookback: 72h", "lookback: "+now.Sub(liveFrom).Round(time.Minute).String(), 1))
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	firstRun(t, cfg)

	var out, errOut bytes.Buffer
	bf := child(context.Background(), t, &out, &errOut, "--config", cfg, "backfill", "--since", since.Format(time.RFC3339),
		"--until", until.Format(time.RFC3339), "--progress-interval", "1h", "--wait", "30s")
	done := make(chan error, 1)
	go func() { done <- bf.Wait() }()
	live, liveHours := 1, 3
	for next := liveFrom.Add(3 * time.Hour); ; next = next.Add(time.Hour) {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("backfill: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
			}
		default:
			// The next hour's files are written, and the live job runs again.
			if next.Add(70 * time.Minute).Before(time.Now()) {
				o.addFiles(t, types, next.Add(time.Hour), 1, rows)
				liveHours++
			}
			if r := run("--config", cfg, "run-once"); r.code != 0 {
				t.Fatalf("live run %d: %s", live, r)
			}
			live++
			continue
		}
		break
	}
	if r := run("--config", cfg, "run-once"); r.code != 0 { // the hours written last
		t.Fatalf("final live run: %s", r)
	}
	if !strings.Contains(out.String(), `"outcome":"ok"`) || !strings.Contains(out.String(), `"caught_up":true`) {
		t.Fatalf("backfill summary:\n%s\n%s", out.String(), errOut.String())
	}

	if n := rcv.RejectedCount(""); n != 0 {
		t.Fatalf("the receiver refused %d entries, first %+v", n, rcv.Rejected()[0])
	}
	perLine := map[string]int{}
	backfilled, lived := 0, 0
	for _, e := range rcv.Entries() {
		perLine[e.Line]++
		if e.Label("backfill") == "true" {
			backfilled++
			if e.Timestamp.Before(since) || !e.Timestamp.Before(until) || e.MetadataValue("event_time") != "" {
				t.Fatalf("backfilled entry at %s (event_time %q): want its own time, inside the window", e.Timestamp, e.MetadataValue("event_time"))
			}
		} else {
			lived++
			if e.Timestamp.Before(liveFrom) {
				t.Fatalf("a live entry at %s, before the live hours", e.Timestamp)
			}
		}
	}
	for line, n := range perLine {
		if n != 1 {
			t.Fatalf("row delivered %d times: %s", n, line)
		}
	}
	if want := len(types) * 72 * rows; backfilled != want {
		t.Fatalf("%d backfilled rows, want %d", backfilled, want)
	}
	if want := len(types) * liveHours * rows; lived != want {
		t.Fatalf("%d live rows, want %d", lived, want)
	}
	t.Logf("%d backfilled and %d live rows, %d live runs during the backfill, none refused", backfilled, lived, live)
}

// TestDeadLetterReplayAfterTheLimitIsRaised: the receiver's max_line_size is below the lines
// (a limit the configuration does not know), so run-once drops every row under line_too_long
// into the dead-letter file. A replay before the limit is raised ships nothing and reports the
// rows refused again (appended to the file); once the limit is raised, a replay ships every row
// exactly once, and a further replay has nothing left to ship.
func TestDeadLetterReplayAfterTheLimitIsRaised(t *testing.T) {
	_, rcv, cfg, dead := linesTooLong(t)
	r := run("--config", cfg, "run-once")
	if r.code != 0 || !strings.Contains(r.stdout, `"dropped":{"line_too_long":15}`) || rcv.Count() != 0 {
		t.Fatalf("run-once: want 15 rows dropped under line_too_long and none stored (%d): %s", rcv.Count(), r)
	}
	lines := func() int {
		b, err := os.ReadFile(dead)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "\n")
	}
	if n := lines(); n != 15 {
		t.Fatalf("%d dead letters, want 15", n)
	}

	r = run("--config", cfg, "deadletter", "replay", dead)
	if r.code != 0 || !strings.Contains(r.stderr, "0 entries shipped, 15 refused again (line_too_long 15)") || rcv.Count() != 0 {
		t.Fatalf("replay before the limit is raised: %s", r)
	}
	if n := lines(); n != 30 {
		t.Fatalf("%d dead letters after the refused replay, want 30", n)
	}

	refused := rcv.RejectedCount("")
	rcv.SetMaxLineBytes(256 << 10)
	r = run("--config", cfg, "deadletter", "replay", dead)
	if r.code != 0 || !strings.Contains(r.stderr, "15 entries shipped, 0 refused again") {
		t.Fatalf("replay after the limit was raised: %s", r)
	}
	perLine := map[string]int{}
	for _, e := range rcv.Entries() {
		perLine[e.Line]++
	}
	if len(perLine) != 15 || rcv.Count() != 15 || rcv.RejectedCount("") != refused {
		t.Fatalf("receiver holds %d entries (%d distinct), refused %d more: want the 15 rows once", rcv.Count(), len(perLine), rcv.RejectedCount("")-refused)
	}
	if r := run("--config", cfg, "deadletter", "replay", dead); r.code != 0 || !strings.Contains(r.stderr, "0 entries shipped, 0 refused again") || rcv.Count() != 15 {
		t.Fatalf("replaying a replayed file: %s", r)
	}
}

// TestDoctorMeasuresTheOrderingWindow: doctor measures the receiver's out-of-order window with
// probe entries. Against a 2 h window it passes and says the configuration could use it;
// against a 10 min window it warns, prints the measured window and what it means for what this
// configuration ships.
func TestDoctorMeasuresTheOrderingWindow(t *testing.T) {
	for _, tc := range []struct {
		window time.Duration
		status string
		want   []string
	}{
		{2 * time.Hour, "PASS", []string{"out-of-order window: 2h0m0s behind a stream's newest entry", "max age: 168h0m0s", "structured metadata: stored",
			"sink.loki.out_of_order_window: 2h0m0s would re-stamp fewer entries"}},
		{10 * time.Minute, "WARN", []string{"out-of-order window: 10m0s behind a stream's newest entry", "set sink.loki.out_of_order_window: 10m0s",
			"consequence for this configuration", "eventlogfile (Hourly): a file spans an hour", "every row of a late Sequence file more than 10m0s behind"}},
	} {
		t.Run(tc.window.String(), func(t *testing.T) {
			o := startOrg(t, simsf.AllPermissions())
			o.addFiles(t, []string{"Login"}, time.Now().Add(-2*time.Hour), 1, 2)
			rcv := startLoki(t, simloki.Options{OutOfOrderWindow: tc.window})
			s := setup{org: o, loki: rcv.PushURL(), types: []string{"Login"}}
			r := run("--config", s.write(t), "doctor", "--timeout", "20s")
			line := ""
			for _, l := range strings.Split(r.stdout, "\n") {
				if strings.Contains(l, "loki.ordering") {
					line = l
				}
			}
			if !strings.Contains(line, tc.status) {
				t.Fatalf("loki.ordering is not %s:\n%s", tc.status, r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("doctor does not say %q:\n%s", w, r.stdout)
				}
			}
			t.Logf("doctor against a %s window:\n%s", tc.window, r.stdout)
			if n := rcv.RejectedCount("too_far_behind"); n == 0 || n > 15 {
				t.Errorf("%d probes refused as too far behind; want a bounded search", n)
			}
		})
	}
}

// TestBackfillRejectedRowsGoToTheDeadLetter: rows a backfill's receiver refuses for good are
// written to sink.loki.dead_letter_path like run-once's (they used to be counted and dropped),
// and a replay ships them once the cause is fixed.
func TestBackfillRejectedRowsGoToTheDeadLetter(t *testing.T) {
	end, rcv, cfg, dead := linesTooLong(t)
	r := run("--config", cfg, "backfill", "--since", end.Add(-3*time.Hour).Format(time.RFC3339), "--until", end.Format(time.RFC3339))
	if r.code != 0 || !strings.Contains(r.stdout, `"line_too_long":15`) || rcv.Count() != 0 {
		t.Fatalf("backfill: want 15 rows dropped under line_too_long and none stored (%d): %s", rcv.Count(), r)
	}
	data, err := os.ReadFile(dead)
	if err != nil {
		t.Fatalf("the backfill wrote no dead letter: %v", err)
	}
	if n := strings.Count(string(data), "\n"); n != 15 || !strings.Contains(string(data), `backfill=\"true\"`) {
		t.Fatalf("%d dead letters, want the 15 backfilled rows:\n%s", n, data)
	}
	rcv.SetMaxLineBytes(256 << 10)
	r = run("--config", cfg, "deadletter", "replay", dead)
	if r.code != 0 || !strings.Contains(r.stderr, "15 entries shipped, 0 refused again") || rcv.Count() != 15 {
		t.Fatalf("replay after the limit was raised (%d stored): %s", rcv.Count(), r)
	}
}

// withDeadLetter sets sink.loki.dead_letter_path of the configuration at cfg to a new file,
// and returns both paths.
func withDeadLetter(t *testing.T, cfg string) (string, string) {
	t.Helper()
	dead := t.TempDir() + "/dead.jsonl"
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "    max_retries: 1\n    min_backoff", "    max_retries: 1\n    dead_letter_path: "+dead+"\n    min_backoff", 1))
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, dead
}

// linesTooLong starts an org with three hourly Login files of 5 rows ending at end, and a
// receiver whose line limit (100 bytes, which the configuration does not know) every row
// exceeds; cfg ships there, with the dead-letter file dead.
func linesTooLong(t *testing.T) (end time.Time, rcv *simloki.Running, cfg, dead string) {
	t.Helper()
	o := startOrg(t, simsf.AllPermissions())
	end = time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	o.addFiles(t, []string{"Login"}, end, 3, 5)
	rcv = startLoki(t, simloki.Options{MaxLineBytes: 100})
	s := setup{org: o, loki: rcv.PushURL(), types: []string{"Login"}}
	cfg, dead = withDeadLetter(t, s.write(t))
	return end, rcv, cfg, dead
}
