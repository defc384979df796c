package eventlogfile

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/source"
)

// shortRun is what one run of TestShortBodyIsConfirmedByASecondDownload must see.
type shortRun struct {
	advance  time.Duration // the clock moves on by this much before the run
	ids      string        // the REQUEST_IDs shipped by the run, in order
	done     bool          // the file is finished after the run
	short    int64         // else: the short body's length the cursor remembers
	counts   map[string]int64
	warnings []string // a warning of the run contains each
}

// TestShortBodyIsConfirmedByASecondDownload: a body shorter than its LogFileLength ships its
// whole rows, those before its last line break, wherever it ends, and the file is not finished:
// the cursor remembers the body's length. The next run downloads the file again and resumes at
// its row. A body that grew goes on as any (and is remembered again while still short); a body
// of the same short length again is not being written any more: it is taken as it is — a last
// record without a line break is shipped as a row — and the file is finished with file_short.
// Every row ships once, in order, and nothing is lost: a body cut right at a line break is not
// taken for the whole file, and a LogFileLength that overstates a complete file holds it back
// for one run only, not until download_max_age. A run that holds the file ends the type
// waiting for a later run (source.ErrWaiting), naming the file: it is not caught up.
func TestShortBodyIsConfirmedByASecondDownload(t *testing.T) {
	const header = `"REQUEST_ID","TIMESTAMP_DERIVED","URI"` + "\n"
	row := func(i int) string { return fmt.Sprintf(`"r%d","2026-06-30T01:00:0%d.000Z","/p%d"`, i, i, i) }
	rows := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			b.WriteString(row(i) + "\n")
		}
		return b.String()
	}
	// half is a body whose first half (what a partial download serves) is exactly cut.
	half := func(cut, rest string) string {
		pad := len(cut) - (len(rest) - len("PAD"))
		if pad < 0 {
			t.Fatalf("body layout: rest is %d bytes too long", -pad)
		}
		return cut + strings.Replace(rest, "PAD", strings.Repeat("x", pad), 1)
	}
	cut := header + rows(1, 3)
	halved := half(cut, `"r4","2026-06-30T01:00:04.000Z","/PAD"`+"\n"+rows(5, 6))
	whole := header + rows(1, 6)
	unterminated := strings.TrimSuffix(whole, "\n")
	fileShort := map[string]int64{"file_short": 1}
	held := map[string]int64{"file_incomplete": 1}
	for _, c := range []struct {
		name string
		spec simsf.EventLogFileSpec
		opts Options
		runs []shortRun
	}{
		{
			name: "listed before it was written, cut right at a line break",
			spec: simsf.EventLogFileSpec{Body: []byte(halved), PartialUntil: epoch.Add(time.Hour)},
			runs: []shortRun{
				{ids: "r1,r2,r3", short: int64(len(cut)), counts: held, warnings: []string{"shorter than its LogFileLength"}},
				{advance: 2 * time.Hour, ids: "r4,r5,r6", done: true},
			},
		},
		{
			name: "LogFileLength overstates a complete body whose last row has no line break",
			spec: simsf.EventLogFileSpec{Body: []byte(unterminated), LengthDelta: 100},
			runs: []shortRun{
				{ids: "r1,r2,r3,r4,r5", short: int64(len(unterminated)), counts: held},
				{advance: 10 * time.Minute, ids: "r6", done: true, counts: fileShort, warnings: []string{"the same length"}},
			},
		},
		{
			name: "LogFileLength overstates a complete body",
			spec: simsf.EventLogFileSpec{Body: []byte(whole), LengthDelta: 100},
			runs: []shortRun{
				{ids: "r1,r2,r3,r4,r5,r6", short: int64(len(whole)), counts: held},
				{advance: 10 * time.Minute, ids: "", done: true, counts: fileShort, warnings: []string{"the same length"}},
			},
		},
		{
			name: "a body that grows and stays short",
			spec: simsf.EventLogFileSpec{Body: []byte(halved), PartialUntil: epoch.Add(time.Hour), LengthDelta: 100},
			runs: []shortRun{
				{ids: "r1,r2,r3", short: int64(len(cut)), counts: held},
				{advance: 2 * time.Hour, ids: "r4,r5,r6", short: int64(len(halved)), counts: held},
				{advance: 10 * time.Minute, ids: "", done: true, counts: fileShort},
			},
		},
		{
			name: "a header only",
			spec: simsf.EventLogFileSpec{Body: []byte(header), LengthDelta: 100},
			runs: []shortRun{
				{ids: "", short: int64(len(header)), counts: held},
				{advance: 10 * time.Minute, ids: "", done: true, counts: fileShort},
			},
		},
		{
			name: "an empty body",
			spec: simsf.EventLogFileSpec{Body: []byte{}, LengthDelta: 100},
			runs: []shortRun{
				{ids: "", short: 0, counts: held},
				{advance: 10 * time.Minute, ids: "", done: true, counts: fileShort},
			},
		},
		{
			name: "older than download_max_age: taken as it is at once",
			spec: simsf.EventLogFileSpec{Body: []byte(unterminated), LengthDelta: 100, CreatedDate: epoch.Add(-30 * time.Hour)},
			opts: Options{Lookback: 48 * time.Hour},
			runs: []shortRun{
				{ids: "r1,r2,r3,r4,r5,r6", done: true, counts: fileShort, warnings: []string{"download_max_age"}},
			},
		},
	} {
		for _, gzip := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/gzip=%v", c.name, gzip), func(t *testing.T) {
				e := newEnv(t, simsf.Options{DisableGzip: !gzip})
				spec := c.spec
				if spec.CreatedDate.IsZero() {
					spec.CreatedDate = epoch.Add(-2 * time.Hour)
				}
				id := e.addFile(spec)
				src := e.source(c.opts)
				cursors := map[string]json.RawMessage{}
				for i, r := range c.runs {
					e.clock.Advance(r.advance)
					before := len(*e.logs.records)
					var ids []string
					res := e.run(src, cursors, 1000, func(_ string, rec source.Record) {
						if !rec.Skip {
							ids = append(ids, requestID(rec.Entry.Line))
						}
					})
					if got := strings.Join(ids, ","); got != r.ids || len(res.errs) > 0 {
						t.Fatalf("run %d shipped %q (errors %v), want %q", i+1, got, res.errs, r.ids)
					}
					for _, ev := range []string{"file_short", "file_incomplete"} {
						if res.counts[ev] != r.counts[ev] {
							t.Errorf("run %d counted %s %d times, want %d (counts %v)", i+1, ev, res.counts[ev], r.counts[ev], res.counts)
						}
					}
					// A held file stops the type with source.ErrWaiting, naming the file and why.
					switch w := res.waiting[Key("Login")]; {
					case r.done && w != nil:
						t.Errorf("run %d: the file is finished, yet the type waits: %v", i+1, w)
					case !r.done && (w == nil || !strings.Contains(w.Error(), id) || !strings.Contains(w.Error(), "shorter than its LogFileLength")):
						t.Errorf("run %d: the file is held; the type waits with %v, want an error naming the file and why", i+1, w)
					}
					cur := decoded(t, cursors, Key("Login"))
					switch {
					case cur.FileID != id:
						t.Fatalf("run %d: cursor %s, want it at the file", i+1, cursors[Key("Login")])
					case r.done && (!cur.Done || cur.ShortBytes != nil):
						t.Fatalf("run %d: cursor %s, want the file finished", i+1, cursors[Key("Login")])
					case !r.done && (cur.Done || cur.ShortBytes == nil || *cur.ShortBytes != r.short):
						t.Fatalf("run %d: cursor %s, want the file open with short_bytes %d", i+1, cursors[Key("Login")], r.short)
					}
					for _, w := range r.warnings {
						found := false
						for _, l := range (*e.logs.records)[before:] {
							found = found || l.level == slog.LevelWarn && strings.Contains(l.msg, w)
						}
						if !found {
							t.Errorf("run %d: no warning saying %q", i+1, w)
						}
					}
				}
			})
		}
	}
}

// TestCursorWithoutShortBytesResumesAsBefore: a cursor written before short_bytes existed, in a
// file whose body is now short, resumes at its row, ships the whole rows after it and remembers
// the body's length; the next download of the same length finishes the file. The field is
// written only while a short body holds its file open, and a negative length is not a cursor.
func TestCursorWithoutShortBytesResumesAsBefore(t *testing.T) {
	e := newEnv(t, simsf.Options{})
	created := epoch.Add(-2 * time.Hour)
	id := e.addFile(simsf.EventLogFileSpec{Rows: 10, CreatedDate: created, LengthDelta: 50})
	want := e.requestIDs(id)
	old := fmt.Sprintf(`{"v":1,"created":%q,"file_id":%q,"row":4}`, created.Format("2006-01-02T15:04:05.000Z"), id)
	cursors := map[string]json.RawMessage{Key("Login"): json.RawMessage(old)}
	var got []string
	collect := func(_ string, rec source.Record) {
		if !rec.Skip {
			got = append(got, requestID(rec.Entry.Line))
		}
	}
	src := e.source(Options{})
	e.run(src, cursors, 1000, collect)
	if c := decoded(t, cursors, Key("Login")); c.Done || c.Row != 10 || c.ShortBytes == nil {
		t.Fatalf("after the old cursor: %s, want the file open at row 10 with short_bytes", cursors[Key("Login")])
	}
	e.run(src, cursors, 1000, collect)
	if strings.Join(got, ",") != strings.Join(want[4:], ",") {
		t.Fatalf("shipped %v, want the rows after row 4 once: %v", got, want[4:])
	}
	if c := decoded(t, cursors, Key("Login")); !c.Done || strings.Contains(string(cursors[Key("Login")]), "short_bytes") {
		t.Fatalf("cursor %s, want the file done, without short_bytes", cursors[Key("Login")])
	}
	bad := strings.Replace(old, `"row":4`, `"row":4,"short_bytes":-1`, 1)
	if _, _, _, err := decodeCursor(json.RawMessage(bad)); err == nil {
		t.Fatalf("%s decoded", bad)
	}
}
