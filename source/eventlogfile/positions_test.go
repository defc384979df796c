package eventlogfile

import (
	"fmt"
	"testing"
	"time"
)

// TestPositionsKeepWhatTheyWereHandedOut: a position handed out encodes the cursor of its own
// row and file whatever is handed out after it — across block boundaries, files, and the Daily
// flag — and encodes it as the cursor's fixed JSON form, byte for byte.
func TestPositionsKeepWhatTheyWereHandedOut(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	files := []fileInfo{
		{ID: "0AT000000000001AAA", Created: "2026-03-01T10:00:00.000Z", created: t0},
		{ID: "0AT000000000002AAA", Created: "2026-03-01T11:00:00.000Z", created: t0.Add(time.Hour)},
		// The same file listed again with another CreatedDate (regenerated).
		{ID: "0AT000000000002AAA", Created: "2026-03-02T11:00:00.000Z", created: t0.Add(25 * time.Hour)},
		// Another file created at the same instant.
		{ID: "0AT000000000003AAA", Created: "2026-03-02T11:00:00.000Z", created: t0.Add(25 * time.Hour)},
	}
	// Each step is one file's positions after the last step's: another Daily flag, another
	// CreatedDate of the same file, another file.
	steps := []struct {
		file  int
		daily bool
	}{{0, false}, {0, true}, {1, true}, {2, true}, {3, true}, {3, false}}
	type handed struct {
		p    *rowPos
		want string
	}
	var ps positions
	var all []handed
	for si, st := range steps {
		f := files[st.file]
		fp := &filePos{info: f, daily: st.daily}
		for row := range int64(positionBlock + 7) {
			done := row == positionBlock+6 && si == 2
			p := ps.at(fp, row, done)
			all = append(all, handed{p, string(appendCursor(nil, f.Created, f.ID, row, done, st.daily, nil))})
		}
	}
	for i, h := range all {
		if got := string(h.p.EncodeCursor()); got != h.want {
			t.Fatalf("position %d encodes %s; handed out as %s", i, got, h.want)
		}
	}
	last := all[len(all)-1]
	want := fmt.Sprintf(`{"v":1,"created":"2026-03-02T11:00:00.000Z","file_id":"0AT000000000003AAA","row":%d}`, positionBlock+6)
	if got := string(last.p.EncodeCursor()); got != want {
		t.Fatalf("last position: %s, want %s", got, want)
	}
	if last.p.file.info.created != files[3].created {
		t.Fatalf("last position's file created %v, want %v", last.p.file.info.created, files[3].created)
	}
}
