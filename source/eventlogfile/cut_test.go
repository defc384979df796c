package eventlogfile

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/source"
)

// TestCutRecordIsNeverTakenAsWhole: a body served before it was completely written (the first
// half of its bytes) ends inside a record, without a line break, wherever that is: right after
// the comma before a row's last field (the cut row has as many fields as the header, its last
// one empty), inside the header, or inside a row over MaxRowBytes. Whatever follows the last line
// break is cut: it is neither shipped, nor taken as the header, nor skipped as too large, and
// the file is not finished. The next run, with the body complete, resumes at the cut record:
// every row once, in order, whole (the one over the cap skipped as row_too_large). When the
// body is never completed, the next run's download of the same length takes it as it is: the
// cut record is a record like any (a row with its last field empty, the header, a row over the
// cap), and the file is finished with file_short.
func TestCutRecordIsNeverTakenAsWhole(t *testing.T) {
	const header = `"REQUEST_ID","TIMESTAMP_DERIVED","URI"` + "\n"
	row := func(i int, uri string) string {
		return fmt.Sprintf(`"r%d","2026-06-30T01:00:0%d.000Z","%s"`+"\n", i, i, uri)
	}
	long := strings.Repeat("L", 300)
	for _, c := range []struct {
		name string
		// The body is cut + rest, rest's "PAD" replaced by as many x as make cut its first half.
		cut, rest   string
		maxRowBytes int
		want        string // the REQUEST_IDs shipped across both runs
		wantURI     string // the URI of r3, when it ships
		tooLarge    int    // rows skipped as row_too_large once the body is complete
		// The same when the body is never completed: the second run takes the cut as it is.
		wantCut, wantCutURI string
		tooLargeCut         int
	}{
		{
			name:       "after a comma",
			cut:        header + row(1, "/a") + row(2, "/b") + `"r3","2026-06-30T01:00:03.000Z",`,
			rest:       `"/c"` + "\n" + row(4, "/d") + row(5, "PAD"),
			want:       "r1,r2,r3,r4,r5",
			wantURI:    "/c",
			wantCut:    "r1,r2,r3",
			wantCutURI: "",
		},
		{
			name:    "inside the header",
			cut:     `"REQUEST_ID","TIMESTAMP_DERIVED","ORGANIZATION_ID","USER_ID","SESSION_KEY","LOGIN_KEY","CLIENT_IP",`,
			rest:    `"URI"` + "\n" + `"r1","2026-06-30T01:00:01.000Z","","","","","","PAD"` + "\n",
			want:    "r1",
			wantCut: "",
		},
		{
			name:        "inside a row over the cap",
			cut:         header + row(1, "/a") + row(2, "/b") + `"r3","2026-06-30T01:00:03.000Z","` + long,
			rest:        long + `"` + "\n" + row(4, "/d") + row(5, "PAD"),
			maxRowBytes: 256,
			want:        "r1,r2,r4,r5",
			tooLarge:    1,
			wantCut:     "r1,r2",
			tooLargeCut: 1,
		},
	} {
		for _, completed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/completed=%v", c.name, completed), func(t *testing.T) {
				pad := len(c.cut) - (len(c.rest) - len("PAD"))
				if pad < 0 {
					t.Fatalf("body layout: rest is %d bytes too long", -pad)
				}
				body := c.cut + strings.Replace(c.rest, "PAD", strings.Repeat("x", pad), 1)
				spec := simsf.EventLogFileSpec{Body: []byte(body), CreatedDate: epoch.Add(-2 * time.Hour), PartialUntil: epoch.Add(time.Hour)}
				want, wantURI, tooLarge, short := c.want, c.wantURI, c.tooLarge, int64(0)
				if !completed { // only the cut is ever served; LogFileLength is the whole body's
					spec = simsf.EventLogFileSpec{Body: []byte(c.cut), CreatedDate: spec.CreatedDate, LengthDelta: int64(len(body) - len(c.cut))}
					want, wantURI, tooLarge, short = c.wantCut, c.wantCutURI, c.tooLargeCut, 1
				}
				e := newEnv(t, simsf.Options{DisableGzip: true})
				e.addFile(spec)
				src := e.source(Options{MaxRowBytes: c.maxRowBytes})
				cursors := map[string]json.RawMessage{}
				var ids, lines []string
				collect := func(_ string, rec source.Record) {
					if !rec.Skip {
						ids = append(ids, requestID(rec.Entry.Line))
						lines = append(lines, rec.Entry.Line)
					}
				}
				res := e.run(src, cursors, 1000, collect)
				if res.counts["file_incomplete"] != 1 || res.skips[SkipRowTooLarge] != 0 || len(res.errs) > 0 {
					t.Fatalf("first run (the body cut): skips %v, counts %v, errors %v; want file_incomplete, nothing skipped",
						res.skips, res.counts, res.errs)
				}
				if cur := decoded(t, cursors, Key("Login")); cur.Done || cur.ShortBytes == nil || *cur.ShortBytes != int64(len(c.cut)) {
					t.Fatalf("the cut file was finished, or its length not remembered: cursor %s", cursors[Key("Login")])
				}
				e.clock.Advance(2 * time.Hour) // the body is complete, or still the cut
				res = e.run(src, cursors, 1000, collect)
				if got := strings.Join(ids, ","); got != want || len(res.errs) > 0 {
					t.Fatalf("shipped %s across the two runs (errors %v), want %s once each, in order; lines %q", got, res.errs, want, lines)
				}
				if res.skips[SkipRowTooLarge] != tooLarge || res.counts["file_short"] != short {
					t.Errorf("second run skipped %d rows as too large and counted file_short %d times, want %d and %d",
						res.skips[SkipRowTooLarge], res.counts["file_short"], tooLarge, short)
				}
				if cur := decoded(t, cursors, Key("Login")); !cur.Done {
					t.Errorf("the file is not finished once its body is complete: %+v", cur)
				}
				for _, l := range lines {
					if requestID(l) == "r3" && !strings.Contains(l, `"URI":"`+wantURI+`"`) {
						t.Errorf("r3 shipped without its whole URI %q: %s", wantURI, l)
					}
				}
			})
		}
	}
}
