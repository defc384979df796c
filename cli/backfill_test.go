package cli

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/job"
)

// TestBackfillIsNotCompleteWhileAFileIsHeld: a backfill whose window holds an EventLogFile that
// Salesforce has not finished writing (its download is shorter than its LogFileLength) ships
// the file's whole rows and the rest of the window, but does not report the window complete: the
// live job never reads the backfill's keys, so only running the backfill again ships the rest
// of the file. It ends partial (exit 4), not caught up; the summary names the file and says to
// run the same command again once the file is complete. Run again after that, the backfill
// ships the rest of the file and reports the window complete (exit 0, caught up); every row of
// the window reaches the receiver once.
func TestBackfillIsNotCompleteWhileAFileIsHeld(t *testing.T) {
	var ahead atomic.Int64 // how far the org's clock runs ahead of the wall clock
	w := newBackfillWorld(t, func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	now := time.Now().UTC()
	since, until := now.Add(-6*time.Hour).Truncate(time.Hour), now.Add(-2*time.Hour).Truncate(time.Hour)
	logDate := since.Add(time.Hour)
	add := func(typ string, partialUntil time.Time) string {
		t.Helper()
		id, err := w.org.AddEventLogFile(simsf.EventLogFileSpec{EventType: typ, Interval: simsf.IntervalHourly, LogDate: logDate,
			CreatedDate: logDate.Add(70 * time.Minute), Rows: 40, PartialUntil: partialUntil})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	held := add("Login", now.Add(time.Hour)) // only the first half of its bytes until then
	whole := add("API", time.Time{})
	cfg := w.config(t, "", "  eventlogfile:\n    enabled: true\n    interval: Hourly\n    event_types: [Login, API]\n", "")
	backfill := func() (backfillSummary, string, int) { return runWindowBackfill(t, cfg, since, until) }

	sum, human, code := backfill()
	if sum.Outcome != job.OutcomePartial || code != ExitPartial || sum.ExitCode != ExitPartial || sum.CaughtUp || sum.RowsShipped <= 40 || sum.RowsShipped >= 80 {
		t.Fatalf("held file: outcome %s exit %d (summary %d) caught_up %v, %d rows shipped (%s); want partial, exit 4, not caught up, "+
			"API's 40 rows and part of Login's\n%s", sum.Outcome, code, sum.ExitCode, sum.CaughtUp, sum.RowsShipped, sum.Report.Error, human)
	}
	if ws := sum.Report.Waiting; len(ws) != 1 || !strings.HasSuffix(ws[0].Key, "eventlogfile:Login") || !strings.Contains(ws[0].Reason, held) {
		t.Fatalf("waiting %+v; want the Login key, naming file %s", ws, held)
	}
	for _, s := range []string{held, "shorter than its LogFileLength", "not complete", "run the same command again once the file is complete"} {
		if !strings.Contains(human, s) {
			t.Errorf("the summary does not say %q:\n%s", s, human)
		}
	}
	if strings.Contains(human, "  complete\n") {
		t.Errorf("the summary says the window is complete:\n%s", human)
	}

	ahead.Store(int64(2 * time.Hour)) // Salesforce has finished writing the file
	sum, human, code = backfill()
	if sum.Outcome != job.OutcomeOK || code != ExitOK || !sum.CaughtUp || len(sum.Report.Waiting) > 0 || !strings.Contains(human, "  complete\n") {
		t.Fatalf("complete file: outcome %s exit %d caught_up %v waiting %v (%s); want ok, exit 0, caught up, complete\n%s",
			sum.Outcome, code, sum.CaughtUp, sum.Report.Waiting, sum.Report.Error, human)
	}
	assertWindowShippedOnce(t, w, held, whole)
}

// TestBackfillIsNotCompleteWhenTimeRunsOut: a backfill that runs out of --max-duration with
// the window unfinished, in the middle of it or before its listing was even read, ships and
// commits what it pulled, but does not exit 0: the live job never reads the backfill's keys, so
// a script that takes exit 0 as done would leave the rest of the window unshipped. It ends
// partial (exit 4; unavailable, 3, when nothing shipped), not caught up; the summary says the
// window is not complete and to run the same command again. Run again, the backfill resumes and
// reports the window complete (exit 0, caught up); every row of the window reaches the receiver
// once.
func TestBackfillIsNotCompleteWhenTimeRunsOut(t *testing.T) {
	for _, c := range []struct {
		name    string
		fault   simsf.Fault // answers only after the run's intake is over
		outcome job.Outcome
		code    int
		shipped int64 // by the run that runs out of time, of 80
	}{
		// The first file's rows ship (one push per 10 entries), the second download hangs.
		{"mid-window", simsf.Fault{Kind: simsf.KindDownload, After: 1, Delay: time.Hour}, job.OutcomePartial, ExitPartial, 40},
		{"before the listing", simsf.Fault{Kind: simsf.KindQuery, Times: -1, Delay: time.Hour}, job.OutcomeUnavailable, ExitUnavailable, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newBackfillWorld(t, time.Now)
			now := time.Now().UTC()
			since, until := now.Add(-6*time.Hour).Truncate(time.Hour), now.Add(-2*time.Hour).Truncate(time.Hour)
			ids := addLoginAndAPIFiles(t, w, since)
			cfg := w.config(t, "", "  eventlogfile:\n    enabled: true\n    interval: Hourly\n    event_types: [Login, API]\n", "")
			setBatchMaxEntries(t, cfg, 10)
			w.org.AddFault(c.fault)
			// run.push_timeout + commit_timeout + release_timeout are 47s: 3s are left to pull.
			sum, human, code := runWindowBackfill(t, cfg, since, until, "--max-duration", "50s")
			if sum.Outcome != c.outcome || code != c.code || sum.ExitCode != c.code || sum.CaughtUp || sum.RowsShipped != c.shipped {
				t.Fatalf("out of time: outcome %s exit %d (summary %d) caught_up %v, %d rows shipped (%s); want %s, exit %d, not caught up, "+
					"%d rows\n%s", sum.Outcome, code, sum.ExitCode, sum.CaughtUp, sum.RowsShipped, sum.Report.Error, c.outcome, c.code, c.shipped, human)
			}
			for _, s := range []string{"time ran out", "the window is not complete", "run the same command again"} {
				if !strings.Contains(human, s) {
					t.Errorf("the summary does not say %q:\n%s", s, human)
				}
			}
			if strings.Contains(human, "  complete\n") {
				t.Errorf("the summary says the window is complete:\n%s", human)
			}

			w.org.ClearFaults()
			sum, human, code = runWindowBackfill(t, cfg, since, until)
			if sum.Outcome != job.OutcomeOK || code != ExitOK || !sum.CaughtUp || sum.RowsShipped != 80-c.shipped || !strings.Contains(human, "  complete\n") {
				t.Fatalf("run again: outcome %s exit %d caught_up %v, %d rows shipped (%s); want ok, exit 0, caught up, the other %d rows, complete\n%s",
					sum.Outcome, code, sum.CaughtUp, sum.RowsShipped, sum.Report.Error, 80-c.shipped, human)
			}
			assertWindowShippedOnce(t, w, ids...)
		})
	}
}

// TestBackfillPausedByTheEgressBudgetIsNotComplete: a backfill stopped by the daily egress
// budget (egress.on_budget_exhausted: pause) ships and commits what fitted, but the live job never
// reads the window's keys, so the next UTC day continues nothing by itself: only running the
// backfill again ships the rest. It reports budget_paused and exits 4 as any unfinished window
// does (not 0, which a script would take as done); the summary says the window is not complete,
// names the budget and says to run the same command again. Run again with the budget raised, it
// resumes and reports the window complete; every row of the window reaches the receiver once.
func TestBackfillPausedByTheEgressBudgetIsNotComplete(t *testing.T) {
	w := newBackfillWorld(t, time.Now)
	now := time.Now().UTC()
	since, until := now.Add(-6*time.Hour).Truncate(time.Hour), now.Add(-2*time.Hour).Truncate(time.Hour)
	ids := addLoginAndAPIFiles(t, w, since)
	sources := "  eventlogfile:\n    enabled: true\n    interval: Hourly\n    event_types: [Login, API]\n"
	budget := func(bytes int) string {
		cfg := w.config(t, "", sources, fmt.Sprintf("egress:\n  daily_bytes: %d\n", bytes))
		setLokiKey(t, cfg, "line_max_bytes", 2048)
		setBatchMaxEntries(t, cfg, 10)
		return cfg
	}

	sum, human, code := runWindowBackfill(t, budget(8192), since, until)
	if sum.Outcome != job.OutcomeBudgetPaused || code != ExitPartial || sum.ExitCode != ExitPartial || sum.CaughtUp ||
		sum.RowsShipped == 0 || sum.RowsShipped >= 80 {
		t.Fatalf("budget spent: outcome %s exit %d (summary %d) caught_up %v, %d rows shipped (%s); want budget_paused, exit 4, "+
			"not caught up, part of the 80 rows\n%s", sum.Outcome, code, sum.ExitCode, sum.CaughtUp, sum.RowsShipped, sum.Report.Error, human)
	}
	for _, s := range []string{"the window is not complete", "egress.daily_bytes", "run the same command again"} {
		if !strings.Contains(human, s) {
			t.Errorf("the summary does not say %q:\n%s", s, human)
		}
	}
	if strings.Contains(human, "  complete\n") || strings.Contains(human, "the next UTC day continues") {
		t.Errorf("the summary says the window is complete, or continues by itself:\n%s", human)
	}

	shipped := sum.RowsShipped
	sum, human, code = runWindowBackfill(t, budget(1<<20), since, until)
	if sum.Outcome != job.OutcomeOK || code != ExitOK || !sum.CaughtUp || sum.RowsShipped != 80-shipped || !strings.Contains(human, "  complete\n") {
		t.Fatalf("run again: outcome %s exit %d caught_up %v, %d rows shipped (%s); want ok, exit 0, caught up, the other %d rows, complete\n%s",
			sum.Outcome, code, sum.CaughtUp, sum.RowsShipped, sum.Report.Error, 80-shipped, human)
	}
	assertWindowShippedOnce(t, w, ids...)
}

// addLoginAndAPIFiles adds to the org one Hourly file of 40 rows for Login and one for API, of
// the hour after since, and returns their ids.
func addLoginAndAPIFiles(t *testing.T, w *simWorld, since time.Time) []string {
	t.Helper()
	var ids []string
	for _, typ := range []string{"Login", "API"} {
		logDate := since.Add(time.Hour)
		id, err := w.org.AddEventLogFile(simsf.EventLogFileSpec{EventType: typ, Interval: simsf.IntervalHourly, LogDate: logDate,
			CreatedDate: logDate.Add(70 * time.Minute), Rows: 40})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// runWindowBackfill runs `sf2loki backfill` of the Hourly window [since, until) of Login and API
// on cfg, with extra flags, and returns its summary, its stderr (the human summary) and its
// exit code.
func runWindowBackfill(t *testing.T, cfg string, since, until time.Time, extra ...string) (backfillSummary, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := append([]string{"sf2loki", "--config", cfg, "backfill", "--since", since.Format(time.RFC3339), "--until", until.Format(time.RFC3339),
		"--event-types", "Login,API", "--interval", "Hourly", "--progress-interval", "1h"}, extra...)
	code := Main(args, &stdout, &stderr)
	var sum backfillSummary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil || sum.Report == nil {
		t.Fatalf("exit %d, no summary: %v\nstdout: %s\nstderr: %s", code, err, stdout.String(), stderr.String())
	}
	return sum, stderr.String(), code
}

// setBatchMaxEntries sets sink.loki.batch_max_entries in the configuration a simWorld wrote.
func setBatchMaxEntries(t *testing.T, cfg string, n int) {
	t.Helper()
	setLokiKey(t, cfg, "batch_max_entries", n)
}

// setLokiKey sets a key of sink.loki in the configuration a simWorld wrote.
func setLokiKey(t *testing.T, cfg, key string, v any) {
	t.Helper()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(b), "\nsink:\n  loki:\n", fmt.Sprintf("\nsink:\n  loki:\n    %s: %v\n", key, v), 1)
	if out == string(b) {
		t.Fatalf("no sink.loki section in %s", cfg)
	}
	if err := os.WriteFile(cfg, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
}

// assertWindowShippedOnce checks that every row of the files ids, and nothing else, reached the
// receiver exactly once.
func assertWindowShippedOnce(t *testing.T, w *simWorld, ids ...string) {
	t.Helper()
	got := map[string]int{}
	for _, e := range w.receiver.Entries() {
		got[backfillRequestID(e.Line)]++
	}
	want := 0
	for _, id := range ids {
		var body bytes.Buffer
		if err := w.org.EventLogFileContent(id, &body); err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(&body).ReadAll()
		if err != nil || len(rows) < 2 {
			t.Fatalf("file %s: %d records, %v", id, len(rows), err)
		}
		col := slices.Index(rows[0], "REQUEST_ID")
		for _, row := range rows[1:] {
			want++
			rid := row[col]
			if got[rid] != 1 {
				t.Fatalf("row %s of %s reached the receiver %d times, want once", rid, id, got[rid])
			}
		}
	}
	if len(got) != want {
		t.Fatalf("the receiver holds %d distinct rows, want the window's %d", len(got), want)
	}
}

// newBackfillWorld is a simWorld whose org keeps the clock now (a JWT assertion, stamped by the
// wall clock, is accepted however far now runs ahead of it).
func newBackfillWorld(t *testing.T, now func() time.Time) *simWorld {
	t.Helper()
	return startSimWorld(t, simsf.Options{Seed: 31, Now: now, JWTClockSkew: 24 * time.Hour})
}

// backfillRequestID is the REQUEST_ID of an entry's JSON line.
func backfillRequestID(line string) string {
	var v struct {
		ID string `json:"REQUEST_ID"`
	}
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		return fmt.Sprintf("(not JSON: %q)", line)
	}
	return v.ID
}

// TestBackfillRefusesAMaxDurationWithNoTimeToPull: a --max-duration no longer than the push,
// commit and release reserves leaves no time to pull, so every run would end unfinished and the
// same command run again would never finish the window. The backfill refuses it (exit 2) before
// taking its lease, naming the flag and the reserves.
func TestBackfillRefusesAMaxDurationWithNoTimeToPull(t *testing.T) {
	w := newBackfillWorld(t, time.Now)
	now := time.Now().UTC()
	since, until := now.Add(-6*time.Hour).Truncate(time.Hour), now.Add(-2*time.Hour).Truncate(time.Hour)
	cfg := w.config(t, "", "  eventlogfile:\n    enabled: true\n    interval: Hourly\n    event_types: [Login, API]\n", "")
	var stdout, stderr bytes.Buffer
	code := Main([]string{"sf2loki", "--config", cfg, "backfill", "--since", since.Format(time.RFC3339), "--until", until.Format(time.RFC3339),
		"--max-duration", "47s"}, &stdout, &stderr)
	if code != ExitConfig || !strings.Contains(stderr.String(), "--max-duration 47s leaves no time to pull") ||
		!strings.Contains(stderr.String(), "run.push_timeout + commit_timeout + release_timeout = 47s") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming --max-duration and the reserves", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(w.dir, "state-backfill.json")); !os.IsNotExist(err) {
		t.Fatalf("the backfill document exists (%v): want nothing written", err)
	}
}
