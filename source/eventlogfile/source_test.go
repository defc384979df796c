package eventlogfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/store"
)

// shipAll runs until a run ships nothing new, returning the REQUEST_IDs delivered per key in
// order and the number of runs.
func shipAll(t *testing.T, e *env, src *Source, cursors map[string]json.RawMessage, budget, maxRuns int) (map[string][]string, int) {
	t.Helper()
	got := map[string][]string{}
	for run := 1; run <= maxRuns; run++ {
		res := e.run(src, cursors, budget, func(key string, rec source.Record) {
			if !rec.Skip {
				got[key] = append(got[key], requestID(rec.Entry.Line))
			}
		})
		for k, err := range res.errs {
			t.Fatalf("run %d: %s: %v", run, k, err)
		}
		if res.entries == 0 {
			return got, run
		}
	}
	t.Fatalf("still shipping after %d runs", maxRuns)
	return nil, 0
}

func TestResumesMidFileAcrossRuns(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	id := e.addFile(simsf.EventLogFileSpec{EventType: "Login", Rows: 2500, CreatedDate: epoch.Add(-2 * time.Hour)})
	want := e.requestIDs(id)
	src := e.source(Options{})
	cursors := map[string]json.RawMessage{}
	var got []string
	for run := 0; run < 4; run++ {
		e.org.ResetCalls()
		res := e.run(src, cursors, 700, func(_ string, rec source.Record) {
			if !rec.Skip {
				got = append(got, requestID(rec.Entry.Line))
			}
		})
		if len(res.errs) > 0 {
			t.Fatalf("run %d: %v", run, res.errs)
		}
		if n := e.org.CallCount(simsf.KindDownload); n != 1 {
			t.Errorf("run %d downloaded %d times, want 1", run, n)
		}
		if n := e.org.CallCount(simsf.KindQuery); n != 1 {
			t.Errorf("run %d made %d listing queries, want 1", run, n)
		}
		c := decoded(t, cursors, Key("Login"))
		wantRow := int64(min(700*(run+1), 2500))
		if c.FileID != id || c.Row != wantRow || c.Done != (wantRow == 2500) {
			t.Fatalf("run %d: cursor %+v, want row %d of %s", run, c, wantRow, id)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("delivered %d rows, want the file's %d rows exactly once in order", len(got), len(want))
	}
	e.org.ResetCalls()
	if res := e.run(src, cursors, 700, nil); res.entries != 0 || e.org.CallCount(simsf.KindDownload) != 0 {
		t.Fatalf("a finished file was shipped again (%d entries, %d downloads)", res.entries, e.org.CallCount(simsf.KindDownload))
	}
}

// TestTwoMillionRowFile is the acceptance test: a 2-million-row file pulled 100 000 rows per
// run is delivered exactly once in 20 runs, each run after the first downloading the file once
// and resuming at the right row. -short scales it down by 10.
func TestTwoMillionRowFile(t *testing.T) {
	rows, budget := 2_000_000, 100_000
	if testing.Short() {
		rows, budget = 200_000, 10_000
	}
	e := newEnv(t, simsf.Options{DisableGzip: true})
	id := e.addFile(simsf.EventLogFileSpec{EventType: "API", Rows: rows, CreatedDate: epoch.Add(-time.Hour)})
	src := e.source(Options{EventTypes: []string{"API"}})
	cursors := map[string]json.RawMessage{}
	// Compare each delivered row with the file's content, streamed alongside.
	want := e.requestIDs(id)
	if len(want) != rows {
		t.Fatalf("the simulated file has %d rows", len(want))
	}
	next := 0
	for run := 1; run <= 20; run++ {
		e.org.ResetCalls()
		first := -1
		res := e.run(src, cursors, budget, func(_ string, rec source.Record) {
			if rec.Skip {
				t.Fatalf("unexpected skip %s", rec.SkipReason)
			}
			if first < 0 {
				first = next
			}
			if got := requestID(rec.Entry.Line); next >= rows || got != want[next] {
				t.Fatalf("run %d: delivered %q as row %d, want %q", run, got, next, want[next])
			}
			next++
		})
		if len(res.errs) > 0 {
			t.Fatalf("run %d: %v", run, res.errs)
		}
		if res.entries != budget || first != (run-1)*budget {
			t.Fatalf("run %d shipped %d rows starting at row %d, want %d from %d", run, res.entries, first, budget, (run-1)*budget)
		}
		if n := e.org.CallCount(simsf.KindDownload); n != 1 {
			t.Fatalf("run %d downloaded the file %d times, want 1", run, n)
		}
	}
	if next != rows {
		t.Fatalf("delivered %d rows, want %d", next, rows)
	}
	if c := decoded(t, cursors, Key("API")); !c.Done || c.Row != int64(rows) {
		t.Fatalf("final cursor %+v", c)
	}
}

func TestGarbageCursorFallsBackToLookback(t *testing.T) {
	garbage := map[string]string{
		"not json":          `garbage`,
		"bare timestamp":    `"2026-06-29T00:00:00Z"`,
		"list":              `[1,2]`,
		"unknown version":   `{"v":99,"created":"2026-06-29T00:00:00.000Z","file_id":"0AT000000000001AAA","row":1}`,
		"junk created":      `{"v":1,"created":"yesterday'--","file_id":"0AT000000000001AAA","row":1}`,
		"injection file_id": `{"v":1,"created":"2026-06-29T00:00:00.000Z","file_id":"x' OR Id != '","row":1}`,
		"negative row":      `{"v":1,"created":"2026-06-29T00:00:00.000Z","file_id":"0AT000000000001AAA","row":-5}`,
		"legacy junk":       `{"ids":[],"last_created":"nope"}`,
	}
	for name, raw := range garbage {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, simsf.Options{})
			e.addFile(simsf.EventLogFileSpec{Rows: 10, CreatedDate: epoch.Add(-30 * time.Hour)}) // before the lookback
			e.addFile(simsf.EventLogFileSpec{Rows: 20, CreatedDate: epoch.Add(-3 * time.Hour)})
			src := e.source(Options{})
			cursors := map[string]json.RawMessage{Key("Login"): json.RawMessage(raw)}
			res := e.run(src, cursors, 1000, nil)
			if res.counts["cursor_reset"] != 1 || e.logs.find(slog.LevelWarn, "unusable") == nil {
				t.Fatalf("want a warning and one cursor_reset, got counts %v", res.counts)
			}
			if len(res.errs) > 0 || res.entries != 20 {
				t.Fatalf("first run: %d entries (want the 20 rows within the lookback), errors %v", res.entries, res.errs)
			}
			e.addFile(simsf.EventLogFileSpec{Rows: 5, CreatedDate: epoch.Add(-time.Hour)})
			res = e.run(src, cursors, 1000, nil)
			if res.counts["cursor_reset"] != 0 || len(res.errs) > 0 || res.entries != 5 {
				t.Fatalf("next run: %d entries, counts %v, errors %v; want the 5 new rows", res.entries, res.counts, res.errs)
			}
		})
	}
}

func TestLegacyCursorIsMigrated(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	at := epoch.Add(-5 * time.Hour)
	done := e.addFile(simsf.EventLogFileSpec{Rows: 10, CreatedDate: at})
	e.addFile(simsf.EventLogFileSpec{Rows: 7, CreatedDate: at})
	e.addFile(simsf.EventLogFileSpec{Rows: 3, CreatedDate: at.Add(time.Minute)})
	legacy := fmt.Sprintf(`{"ids":[["%s","%s"]],"last_created":"%s"}`, done, at.Format("2006-01-02T15:04:05.000+0000"), at.Format("2006-01-02T15:04:05.000+0000"))
	cursors := map[string]json.RawMessage{Key("Login"): json.RawMessage(legacy)}
	res := e.run(e.source(Options{}), cursors, 1000, nil)
	if res.entries != 10 || res.skips[SkipLegacyDone] != 1 || res.counts["cursor_reset"] != 0 {
		t.Fatalf("entries %d, skips %v, counts %v; want the two files the legacy cursor had not shipped", res.entries, res.skips, res.counts)
	}
	if c := decoded(t, cursors, Key("Login")); !c.Done {
		t.Fatalf("cursor after migration: %+v", c)
	}
}

// TestLegacyCursorShipsARegeneratedFile: a Python cursor names Daily file F done at its
// last_created. F is then regenerated in place (same Id, a newer CreatedDate, more rows), and
// another file G shares that newer CreatedDate with an Id below F's, so G is shipped just before
// F. The legacy ids are done at last_created only: F at its new CreatedDate is shipped again
// whole, however far the cursor has moved, never skipped as legacy_done.
func TestLegacyCursorShipsARegeneratedFile(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	lastCreated := epoch.Add(-10 * time.Hour)
	regenerated := epoch.Add(-time.Hour)
	g := e.addFile(simsf.EventLogFileSpec{ID: "0AT5g00000PyA0a", Interval: simsf.IntervalDaily, Rows: 4,
		LogDate: epoch.Add(-48 * time.Hour).Truncate(24 * time.Hour), CreatedDate: regenerated})
	f := e.addFile(simsf.EventLogFileSpec{ID: "0AT5g00000PyA1b", Interval: simsf.IntervalDaily, Rows: 10,
		LogDate: epoch.Add(-24 * time.Hour).Truncate(24 * time.Hour), CreatedDate: lastCreated})
	const sfTime = "2006-01-02T15:04:05.000+0000"
	legacy := fmt.Sprintf(`{"ids":[["%s","%s"]],"last_created":"%s"}`, f, lastCreated.Format(sfTime), lastCreated.Format(sfTime))
	if err := e.org.RegenerateEventLogFile(f, regenerated, 15); err != nil {
		t.Fatal(err)
	}
	want := append(e.requestIDs(g), e.requestIDs(f)...)
	cursors := map[string]json.RawMessage{Key("Login"): json.RawMessage(legacy)}
	var got []string
	res := e.run(e.source(Options{Interval: IntervalDaily}), cursors, 1000, func(_ string, rec source.Record) {
		if !rec.Skip {
			got = append(got, requestID(rec.Entry.Line))
		}
	})
	if res.skips[SkipLegacyDone] != 0 || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("shipped %d rows, skips %v; want G's 4 and the regenerated F's 15, in order", len(got), res.skips)
	}
	if c := decoded(t, cursors, Key("Login")); !c.Done || c.FileID != f {
		t.Fatalf("cursor %+v, want F done", c)
	}
}

// TestPythonStateDocumentContinues feeds the exact bytes the Python sf2loki's file store writes
// (json.dump of its flat map of strings, each EventLogFile value itself the json.dumps of
// {"ids", "last_created"} with sorted keys): through the store's legacy reading, the source's
// own cursor decoder continues where Python stopped instead of restarting from the lookback.
func TestPythonStateDocumentContinues(t *testing.T) {
	docs := map[string]string{
		// ids as [id, CreatedDate] pairs (the Python releases since in-place regeneration).
		"pairs": `{"pubsub:/event/LoginEventStream": "AAAAAAAAKmM=", "eventlogfile:Login": "{\"ids\": [[\"0AT5g00000PyA1bGAF\", \"2026-06-30T07:00:00.000+0000\"]], \"last_created\": \"2026-06-30T07:00:00.000+0000\"}"}`,
		// ids as bare strings (the releases before).
		"bare ids": `{"eventlogfile:Login": "{\"ids\": [\"0AT5g00000PyA0aGAF\", \"0AT5g00000PyA1bGAF\"], \"last_created\": \"2026-06-30T07:00:00.000+0000\"}"}`,
	}
	for name, raw := range docs {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, simsf.Options{})
			at := time.Date(2026, 6, 30, 7, 0, 0, 0, time.UTC)
			e.addFile(simsf.EventLogFileSpec{ID: "0AT5g00000PyA0a", Rows: 4, CreatedDate: at.Add(-time.Hour)})
			if id := e.addFile(simsf.EventLogFileSpec{ID: "0AT5g00000PyA1b", Rows: 10, CreatedDate: at}); id != "0AT5g00000PyA1bGAF" {
				t.Fatalf("file id %s", id)
			}
			e.addFile(simsf.EventLogFileSpec{ID: "0AT5g00000PyA2c", Rows: 7, CreatedDate: at})
			e.addFile(simsf.EventLogFileSpec{ID: "0AT5g00000PyA3d", Rows: 3, CreatedDate: at.Add(time.Minute)})
			doc, legacy, err := store.Decode("sf2loki-state.json", []byte(raw))
			if err != nil || !legacy {
				t.Fatalf("store.Decode: legacy %v, %v", legacy, err)
			}
			cursors := map[string]json.RawMessage{Key("Login"): doc.Checkpoints[Key("Login")].Value}
			res := e.run(e.source(Options{}), cursors, 1000, nil)
			if res.counts["cursor_reset"] != 0 || len(res.errs) > 0 {
				t.Fatalf("counts %v, errors %v: the Python cursor was not read", res.counts, res.errs)
			}
			if res.entries != 10 || res.skips[SkipLegacyDone] != 1 {
				t.Fatalf("entries %d, skips %v; want the 7 + 3 rows of the two files Python had not shipped", res.entries, res.skips)
			}
			if c := decoded(t, cursors, Key("Login")); !c.Done || c.FileID != "0AT5g00000PyA3dGAF" {
				t.Fatalf("cursor after migration: %+v", c)
			}
		})
	}
}

func TestDailyFileRegeneratedInPlaceIsShippedAgainFromRowZero(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	id := e.addFile(simsf.EventLogFileSpec{Interval: simsf.IntervalDaily, Rows: 1000, CreatedDate: epoch.Add(-2 * time.Hour)})
	before := e.requestIDs(id)
	src := e.source(Options{Interval: IntervalDaily})
	cursors := map[string]json.RawMessage{}
	var got []string
	collect := func(_ string, rec source.Record) {
		if !rec.Skip {
			got = append(got, requestID(rec.Entry.Line))
		}
	}
	if res := e.run(src, cursors, 400, collect); res.entries != 400 {
		t.Fatalf("first run shipped %d", res.entries)
	}
	if err := e.org.RegenerateEventLogFile(id, epoch.Add(-time.Hour), 1500); err != nil {
		t.Fatal(err)
	}
	after := e.requestIDs(id)
	if len(after) != 1500 || strings.Join(after[:1000], ",") != strings.Join(before, ",") {
		t.Fatalf("the simulator's regenerated file is not a superset (%d rows)", len(after))
	}
	got = nil
	e.org.ResetCalls()
	var counts map[string]int64
	for run := 0; run < 5; run++ {
		res := e.run(src, cursors, 400, collect)
		if run == 0 {
			counts = res.counts
		}
		if len(res.errs) > 0 {
			t.Fatal(res.errs)
		}
	}
	if counts["file_regenerated"] != 1 {
		t.Fatalf("counts %v, want file_regenerated 1", counts)
	}
	if strings.Join(got, ",") != strings.Join(after, ",") {
		t.Fatalf("after the regeneration delivered %d rows, want all 1500 from row 0 in order", len(got))
	}
	if c := decoded(t, cursors, Key("Login")); !c.Done || c.Row != 1500 {
		t.Fatalf("cursor %+v", c)
	}
}

func TestDiscovery(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	at := epoch.Add(-3 * time.Hour)
	for _, typ := range []string{"Login", "API", "Report", "LoginAs"} {
		e.addFile(simsf.EventLogFileSpec{EventType: typ, Rows: 5, CreatedDate: at})
	}
	e.addFile(simsf.EventLogFileSpec{EventType: "URI", Rows: 5, CreatedDate: at, Interval: simsf.IntervalHourly})
	sh, err := shape.New(shape.Options{})
	if err != nil {
		t.Fatal(err)
	}
	owned := shape.Owned([]shape.Claim{{Source: "soql", Name: "LoginEvent"}, {Source: "eventlogfile", Name: "*"}}, Name, nil)
	src := e.source(Options{EventTypes: []string{"*"}, Exclude: []string{"report"}, OwnedCategories: owned, Shaper: sh})
	keys := func() []string {
		streams, err := src.Open(t.Context(), source.OpenRequest{Cursors: map[string]json.RawMessage{}, Log: slog.New(slog.DiscardHandler), Count: func(string, int64) {}})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range streams {
			out = append(out, s.Key())
		}
		return out
	}
	if got := strings.Join(keys(), ","); got != "eventlogfile:API,eventlogfile:LoginAs" {
		t.Fatalf("streams %s; want API and LoginAs (Login's category belongs to soql, Report excluded, URI is Hourly)", got)
	}
	e.addFile(simsf.EventLogFileSpec{EventType: "Logout", Rows: 5, CreatedDate: at.Add(time.Hour)})
	if got := strings.Join(keys(), ","); got != "eventlogfile:API,eventlogfile:LoginAs,eventlogfile:Logout" {
		t.Fatalf("after a new type appeared: %s", got)
	}
	// An explicit name wins over the owned category.
	src = e.source(Options{EventTypes: []string{"*", "Login"}, OwnedCategories: owned})
	if got := strings.Join(keys(), ","); !strings.Contains(got, "eventlogfile:Login,") {
		t.Fatalf("explicit Login dropped: %s", got)
	}
}

func TestSettleWindowHoldsBackYoungFiles(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	e.addFile(simsf.EventLogFileSpec{Rows: 4, CreatedDate: epoch.Add(-10 * time.Minute)})
	e.addFile(simsf.EventLogFileSpec{Rows: 6, CreatedDate: epoch.Add(-2 * time.Minute)})
	src := e.source(Options{SettleWindow: 5 * time.Minute})
	cursors := map[string]json.RawMessage{}
	if res := e.run(src, cursors, 100, nil); res.entries != 4 {
		t.Fatalf("shipped %d rows; the file younger than the settle window must wait", res.entries)
	}
	e.clock.Advance(4 * time.Minute)
	if res := e.run(src, cursors, 100, nil); res.entries != 6 {
		t.Fatalf("after settling shipped %d rows, want 6", res.entries)
	}
}

func TestFailingDownload(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	never := epoch.Add(1000 * time.Hour)
	young := e.addFile(simsf.EventLogFileSpec{Rows: 5, CreatedDate: epoch.Add(-2 * time.Hour), ReadyAt: never})
	e.addFile(simsf.EventLogFileSpec{Rows: 3, CreatedDate: epoch.Add(-time.Hour)})
	src := e.source(Options{Lookback: 48 * time.Hour, DownloadMaxAge: 24 * time.Hour})
	cursors := map[string]json.RawMessage{}
	res := e.run(src, cursors, 100, nil)
	if res.errs[Key("Login")] == nil || res.entries != 0 || cursors[Key("Login")] != nil {
		t.Fatalf("a young failing file must stop the type without advancing: entries %d, errs %v, cursor %s", res.entries, res.errs, cursors[Key("Login")])
	}
	if !strings.Contains(res.errs[Key("Login")].Error(), young) {
		t.Fatalf("the error does not name the file: %v", res.errs[Key("Login")])
	}
	e.clock.Advance(23 * time.Hour) // the file is now 25h old
	res = e.run(src, cursors, 100, nil)
	if res.counts["file_abandoned"] != 1 || res.skips[SkipAbandoned] != 1 || res.entries != 3 || len(res.errs) != 0 {
		t.Fatalf("past download_max_age: counts %v, skips %v, entries %d, errs %v", res.counts, res.skips, res.entries, res.errs)
	}
	if r := e.logs.find(slog.LevelError, "abandoning"); r == nil || r.attrs["file_id"] != young {
		t.Fatal("no error log naming the abandoned file")
	}
}

func TestManyFilesShareOneCreatedDate(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	at := epoch.Add(-3 * time.Hour)
	const n = 1500
	for range n {
		e.addFile(simsf.EventLogFileSpec{Rows: 1, CreatedDate: at})
	}
	src := e.source(Options{PageSize: 1000})
	cursors := map[string]json.RawMessage{}
	seen := map[string]int{}
	runs := 0
	for runs = 1; runs < 10; runs++ {
		res := e.run(src, cursors, 700, func(_ string, rec source.Record) {
			if !rec.Skip {
				seen[requestID(rec.Entry.Line)]++
			}
		})
		if len(res.errs) > 0 {
			t.Fatal(res.errs)
		}
		if res.entries == 0 {
			break
		}
	}
	if len(seen) != n {
		t.Fatalf("delivered %d distinct rows of %d files", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("row %s delivered %d times", id, c)
		}
	}
	if runs != 4 {
		t.Fatalf("took %d runs, want 3 shipping runs and one empty", runs)
	}
}

func TestSamplingIsDeterministicAndAdvancesTheCursor(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	e.addFile(simsf.EventLogFileSpec{Rows: 4000, CreatedDate: epoch.Add(-2 * time.Hour)})
	sh, err := shape.New(shape.Options{Types: []shape.TypeRule{{Type: "Login", SampleRate: 0.25}}})
	if err != nil {
		t.Fatal(err)
	}
	kept := func() ([]string, map[string]json.RawMessage) {
		cursors := map[string]json.RawMessage{}
		got, _ := shipAll(t, e, e.source(Options{Shaper: sh}), cursors, 300, 20)
		return got[Key("Login")], cursors
	}
	a, ca := kept()
	b, _ := kept()
	if len(a) < 800 || len(a) > 1200 {
		t.Fatalf("kept %d of 4000 at 0.25", len(a))
	}
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatal("a re-run kept different rows")
	}
	if c := decoded(t, ca, Key("Login")); !c.Done || c.Row != 4000 {
		t.Fatalf("the cursor did not advance over sampled-out rows: %+v", c)
	}
}

// TestPartialBodyIsResumedWhenComplete: a body served before it was completely written ends
// cleanly inside a row, before its LogFileLength. The whole rows ship, the cut row does not, and
// the next run resumes at it once the body is complete: every row once, in order.
func TestPartialBodyIsResumedWhenComplete(t *testing.T) {
	for _, gzip := range []bool{true, false} {
		t.Run(fmt.Sprintf("gzip=%v", gzip), func(t *testing.T) {
			e := newEnv(t, simsf.Options{DisableGzip: !gzip})
			id := e.addFile(simsf.EventLogFileSpec{Rows: 100, CreatedDate: epoch.Add(-2 * time.Hour), PartialUntil: epoch.Add(time.Hour)})
			later := e.addFile(simsf.EventLogFileSpec{Rows: 10, CreatedDate: epoch.Add(-time.Hour)})
			want := append(e.requestIDs(id), e.requestIDs(later)...)
			src := e.source(Options{})
			cursors := map[string]json.RawMessage{}
			var got []string
			collect := func(_ string, rec source.Record) {
				if !rec.Skip {
					got = append(got, requestID(rec.Entry.Line))
				}
			}
			res := e.run(src, cursors, 1000, collect)
			if res.entries == 0 || res.entries >= 100 || res.counts["file_incomplete"] != 1 || len(res.errs) > 0 {
				t.Fatalf("partial body: %d entries, counts %v, errors %v; want the whole rows served and file_incomplete", res.entries, res.counts, res.errs)
			}
			if c := decoded(t, cursors, Key("Login")); c.FileID != id || c.Done || c.Row != int64(res.entries) {
				t.Fatalf("cursor %+v, want mid-file at row %d", c, res.entries)
			}
			e.clock.Advance(2 * time.Hour)
			e.run(src, cursors, 1000, collect)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("delivered %d rows across the two runs, want all %d once in order", len(got), len(want))
			}
		})
	}
}

// TestLengthIsEvidenceNotAGate: a file whose LogFileLength is 100 bytes more than its clean CSV
// ships whole in one run and is held open once (file_incomplete); the next run's download of the
// same length finishes it with a warning and file_short, shipping nothing again — not held until
// download_max_age. A transfer of the same file cut by a broken connection is a failed download,
// not a short body: the file stays open without a length remembered, and the next runs resume at
// the next row.
func TestLengthIsEvidenceNotAGate(t *testing.T) {
	for _, gzip := range []bool{true, false} {
		t.Run(fmt.Sprintf("gzip=%v", gzip), func(t *testing.T) {
			e := newEnv(t, simsf.Options{DisableGzip: !gzip})
			id := e.addFile(simsf.EventLogFileSpec{Rows: 3000, CreatedDate: epoch.Add(-2 * time.Hour), LengthDelta: 100})
			want := e.requestIDs(id)
			cursors := map[string]json.RawMessage{}
			src := e.source(Options{})
			res := e.run(src, cursors, 10000, nil)
			if res.entries != 3000 || res.counts["file_incomplete"] != 1 || len(res.errs) > 0 {
				t.Fatalf("clean short body: %d entries, counts %v, errors %v", res.entries, res.counts, res.errs)
			}
			if c := decoded(t, cursors, Key("Login")); c.Done || c.Row != 3000 || c.ShortBytes == nil {
				t.Fatalf("cursor %+v, want the file held at its end", c)
			}
			res = e.run(src, cursors, 10000, nil)
			if res.entries != 0 || res.counts["file_short"] != 1 || len(res.errs) > 0 {
				t.Fatalf("the same short body again: %d entries, counts %v, errors %v", res.entries, res.counts, res.errs)
			}
			if c := decoded(t, cursors, Key("Login")); !c.Done || c.Row != 3000 {
				t.Fatalf("cursor %+v, want the file done", c)
			}
			if e.logs.find(slog.LevelWarn, "shorter than its LogFileLength taken as it is") == nil {
				t.Fatal("no warning for the body shorter than LogFileLength")
			}

			// The same file again, its first transfer cut after 100 KiB on the wire.
			e2 := newEnv(t, simsf.Options{DisableGzip: !gzip})
			e2.addFile(simsf.EventLogFileSpec{Rows: 3000, CreatedDate: epoch.Add(-2 * time.Hour), LengthDelta: 100})
			e2.org.ResetDownloadsAfter(100<<10, 1)
			src = e2.source(Options{})
			cursors = map[string]json.RawMessage{}
			var got []string
			collect := func(_ string, rec source.Record) {
				if !rec.Skip {
					got = append(got, requestID(rec.Entry.Line))
				}
			}
			res = e2.run(src, cursors, 10000, collect)
			if res.errs[Key("Login")] == nil || res.entries == 0 || res.entries >= 3000 {
				t.Fatalf("cut transfer: %d entries, errors %v; want the file left open", res.entries, res.errs)
			}
			if c := decoded(t, cursors, Key("Login")); c.Done || c.Row != int64(res.entries) || c.ShortBytes != nil {
				t.Fatalf("cursor after the cut %s, want mid-file at row %d, no length remembered", cursors[Key("Login")], res.entries)
			}
			for range 2 {
				res = e2.run(src, cursors, 10000, collect)
				if len(res.errs) > 0 {
					t.Fatalf("resumed run: errors %v, counts %v", res.errs, res.counts)
				}
			}
			if res.counts["file_short"] != 1 {
				t.Fatalf("last run: counts %v, want file_short", res.counts)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("delivered %d rows across the cut, want all %d once in order", len(got), len(want))
			}
		})
	}
}

func TestRaggedQuotedCSV(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	body := "\xef\xbb\xbf\"EVENT_TYPE\",\"TIMESTAMP_DERIVED\",\"QUERY\",\"ROWS\"\r\n" +
		"\"API\",\"2026-06-30T01:00:00.123Z\",\"SELECT a,\r\nb FROM \"\"X\"\"\",\"12\"\r\n" +
		"\"API\",\"2026-06-30T01:00:01.000Z\",\"short\"\r\n" +
		"\"API\",\"20260630010002.000\",\"q\",\"3\",\"extra1\",\"extra2\"\r\n"
	e.addFile(simsf.EventLogFileSpec{EventType: "API", Body: []byte(body), CreatedDate: epoch.Add(-time.Hour)})
	var lines []string
	var times []time.Time
	res := e.run(e.source(Options{EventTypes: []string{"API"}}), map[string]json.RawMessage{}, 100, func(_ string, rec source.Record) {
		lines = append(lines, rec.Entry.Line)
		times = append(times, rec.Entry.Timestamp)
	})
	if res.entries != 3 {
		t.Fatalf("entries %d", res.entries)
	}
	want := []string{
		`{"EVENT_TYPE":"API","TIMESTAMP_DERIVED":"2026-06-30T01:00:00.123Z","QUERY":"SELECT a,\r\nb FROM \"X\"","ROWS":"12"}`,
		`{"EVENT_TYPE":"API","TIMESTAMP_DERIVED":"2026-06-30T01:00:01.000Z","QUERY":"short","ROWS":""}`,
		`{"EVENT_TYPE":"API","TIMESTAMP_DERIVED":"20260630010002.000","QUERY":"q","ROWS":"3","_extra":"extra1,extra2"}`,
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
	wantTimes := []time.Time{
		time.Date(2026, 6, 30, 1, 0, 0, 123e6, time.UTC), time.Date(2026, 6, 30, 1, 0, 1, 0, time.UTC), time.Date(2026, 6, 30, 1, 0, 2, 0, time.UTC),
	}
	for i := range wantTimes {
		if !times[i].Equal(wantTimes[i]) {
			t.Errorf("timestamp %d = %v, want %v", i, times[i], wantTimes[i])
		}
	}
}

func TestCounterAttributesCalls(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	e.addFile(simsf.EventLogFileSpec{Rows: 30, CreatedDate: epoch.Add(-2 * time.Hour)})
	e.addFile(simsf.EventLogFileSpec{Rows: 30, CreatedDate: epoch.Add(-time.Hour)})
	var c salesforce.Counter
	res := e.run(e.source(Options{Counter: &c, EventTypes: []string{"*"}}), map[string]json.RawMessage{}, 1000, nil)
	if res.entries != 60 {
		t.Fatalf("entries %d", res.entries)
	}
	calls := c.Calls()
	// One discovery query, one listing, two downloads.
	if calls[salesforce.KindQuery] != 2 || calls[salesforce.KindEventLogFile] != 2 {
		t.Fatalf("counted calls %v", calls)
	}
	src := e.source(Options{})
	e.run(src, map[string]json.RawMessage{}, 1000, nil)
	if got := src.Calls(); got[string(salesforce.KindQuery)] != 1 || got[string(salesforce.KindEventLogFile)] != 2 {
		t.Fatalf("Calls() = %v, want one listing and two downloads", got)
	}
}

func TestBrokenDownloadResumesAtTheNextRow(t *testing.T) {
	e := newEnv(t, simsf.Options{DisableGzip: true})
	id := e.addFile(simsf.EventLogFileSpec{Rows: 3000, CreatedDate: epoch.Add(-2 * time.Hour)})
	want := e.requestIDs(id)
	e.org.ResetDownloadsAfter(200<<10, 1) // the first download breaks off after 200 KiB
	src := e.source(Options{})
	cursors := map[string]json.RawMessage{}
	var got []string
	collect := func(_ string, rec source.Record) {
		if !rec.Skip {
			got = append(got, requestID(rec.Entry.Line))
		}
	}
	res := e.run(src, cursors, 10000, collect)
	if res.errs[Key("Login")] == nil || res.entries == 0 || res.entries >= 3000 {
		t.Fatalf("broken download: %d entries, errors %v", res.entries, res.errs)
	}
	if c := decoded(t, cursors, Key("Login")); c.Done || c.Row != int64(res.entries) {
		t.Fatalf("cursor after the break %+v, want mid-file at row %d", c, res.entries)
	}
	res = e.run(src, cursors, 10000, collect)
	if len(res.errs) > 0 {
		t.Fatal(res.errs)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("delivered %d rows across the break, want all %d once in order", len(got), len(want))
	}
}

func TestOversizedRowIsSkippedAndCounted(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	e.addFile(simsf.EventLogFileSpec{EventType: "API", Rows: 101, OversizedField: 300 << 10, CreatedDate: epoch.Add(-time.Hour)})
	cursors := map[string]json.RawMessage{}
	res := e.run(e.source(Options{EventTypes: []string{"API"}, MaxRowBytes: 64 << 10}), cursors, 1000, nil)
	if res.entries != 100 || res.skips[SkipRowTooLarge] != 1 || res.counts["row_too_large"] != 1 || len(res.errs) > 0 {
		t.Fatalf("entries %d, skips %v, counts %v, errs %v", res.entries, res.skips, res.counts, res.errs)
	}
	if c := decoded(t, cursors, Key("API")); !c.Done || c.Row != 101 {
		t.Fatalf("cursor %+v", c)
	}
	// With a cap above the row it is shipped, line breaks and quotes intact.
	res = e.run(e.source(Options{EventTypes: []string{"API"}}), map[string]json.RawMessage{}, 1000, nil)
	if res.entries != 101 {
		t.Fatalf("entries %d with the default cap", res.entries)
	}
}

// TestHashedFieldNeverLeaves: hashed columns are hashed in the line, in structured metadata and
// in a promoted label; their original values appear nowhere in what is shipped.
func TestHashedFieldNeverLeaves(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	id := e.addFile(simsf.EventLogFileSpec{Rows: 50, CreatedDate: epoch.Add(-time.Hour)})
	var content strings.Builder
	if err := e.org.EventLogFileContent(id, &content); err != nil {
		t.Fatal(err)
	}
	secret := map[string]bool{}
	c := newCSVReader(strings.NewReader(content.String()), 1<<20)
	_ = c.Read()
	cols := map[string]int{}
	for i := range c.NumFields() {
		cols[string(c.Field(i))] = i
	}
	for c.Read() == nil {
		secret[string(c.Field(cols["USER_NAME"]))] = true
		secret[string(c.Field(cols["USER_ID"]))] = true
	}
	sh, err := shape.New(shape.Options{
		Salt:       []byte("a-deployment-salt-0123"),
		Transforms: []shape.Transform{{Op: shape.OpHash, Fields: []string{"USER_NAME", "USER_ID"}}},
		Metadata:   []string{"USER_ID"},
		Types:      []shape.TypeRule{{Type: "Login", Labels: []string{"USER_NAME"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	e.run(e.source(Options{Shaper: sh}), map[string]json.RawMessage{}, 1000, func(_ string, rec source.Record) {
		n++
		all := rec.Entry.Line + rec.Entry.Labels.String() + fmt.Sprint(rec.Entry.Metadata)
		for v := range secret {
			if strings.Contains(all, v) {
				t.Fatalf("%s leaks in %s", v, all)
			}
		}
		name, _ := rec.Entry.Labels.Get("user_name")
		uid := rec.Entry.Metadata[0].Value
		if len(name) != 64 || len(uid) != 64 || !strings.Contains(rec.Entry.Line, `"USER_NAME":"`+name+`"`) || !strings.Contains(rec.Entry.Line, `"USER_ID":"`+uid+`"`) {
			t.Fatalf("hashes not consistent across line, metadata and label: %s %v %s", rec.Entry.Line, rec.Entry.Metadata, rec.Entry.Labels)
		}
	})
	if n != 50 || len(secret) < 2 {
		t.Fatalf("%d records, %d secret values", n, len(secret))
	}
}

// TestThrottleNeverAbandons: a download refused by the daily limit, or by a concurrent limit
// that outlasts the retries, stops the type without abandoning the file, however old it is.
func TestThrottleNeverAbandons(t *testing.T) {
	for _, tc := range []struct {
		limit simsf.RequestLimit
		want  error
	}{
		{simsf.LimitTotalRequests, salesforce.ErrRequestLimit},
		{simsf.LimitConcurrentRequests, salesforce.ErrConcurrentLimit},
	} {
		t.Run(string(tc.limit), func(t *testing.T) {
			e := newEnv(t, simsf.Options{})
			e.addFile(simsf.EventLogFileSpec{Rows: 5, CreatedDate: epoch.Add(-40 * time.Hour)}) // older than download_max_age
			src := e.source(Options{Lookback: 48 * time.Hour})
			cursors := map[string]json.RawMessage{}
			e.run(src, cursors, 100, nil) // mint the token and list once before the org runs dry
			cursors = map[string]json.RawMessage{}
			e.org.RequestLimitNext(simsf.KindDownload, -1, tc.limit)
			res := e.run(src, cursors, 100, nil)
			err := res.errs[Key("Login")]
			if !errors.Is(err, tc.want) || res.counts["file_abandoned"] != 0 || cursors[Key("Login")] != nil {
				t.Fatalf("throttled download: err %v, counts %v, cursor %s", err, res.counts, cursors[Key("Login")])
			}
		})
	}
}

// TestSettleWindowUsesSalesforceClock: with the local clock two minutes behind Salesforce, the
// settle window is measured on Salesforce's clock (from the Date header).
func TestSettleWindowUsesSalesforceClock(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	behind := func() time.Time { return e.clock.Now().Add(-2 * time.Minute) }
	c := e.org.Client(t, func(o *salesforce.Options) { o.Now = behind })
	e.addFile(simsf.EventLogFileSpec{Rows: 3, CreatedDate: epoch.Add(-6 * time.Minute)})
	src, err := New(Options{Client: c, Shaper: e.shaper, Interval: IntervalDaily, EventTypes: []string{"Login"}, SettleWindow: 5 * time.Minute, Now: behind})
	if err != nil {
		t.Fatal(err)
	}
	if res := e.run(src, map[string]json.RawMessage{}, 100, nil); res.entries != 3 {
		t.Fatalf("shipped %d rows; 6 minutes old on Salesforce's clock is past the 5-minute settle window", res.entries)
	}
}
