package loki

import (
	"context"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
)

// TestAnEntryLokiRefusedInAnEarlierStreamIsNotAccepted: Loki's ingester answers a request for
// its last stream only, so an entry it refused (too_far_behind) in an earlier stream of the same
// request is answered 204 when the last stream was stored whole. An entry the client reports
// Accepted must be one the receiver stored: the refused entry has to come back Rejected (or
// NotDelivered), never Accepted.
func TestAnEntryLokiRefusedInAnEarlierStreamIsNotAccepted(t *testing.T) {
	srv := simloki.New(simloki.Options{})
	c := newClient(t, srv, nil)
	now := time.Now()
	a, b := lbl("job", "sf2loki", "source", "a"), lbl("job", "sf2loki", "source", "b")
	// The receiver already holds a newer entry of stream a (an earlier push, another writer).
	if res := c.Push(context.Background(), []Entry{{Timestamp: now, Labels: a, Line: "head a"}}); !res.OK() {
		t.Fatal(res.Err)
	}
	es := []Entry{
		{Timestamp: now.Add(-2 * time.Hour), Labels: a, Line: "late a", Ref: 1}, // beyond the 1h window behind "head a"
		{Timestamp: now, Labels: b, Line: "b", Ref: 2},
	}
	res := c.Push(context.Background(), es)
	held := map[string]bool{}
	for _, e := range srv.Entries() {
		held[e.Stream+"\x00"+e.Line] = true
	}
	for i, o := range res.Outcomes {
		if o == Accepted && !held[es[i].Labels.String()+"\x00"+es[i].Line] {
			t.Fatalf("entry %d (%q) reported accepted, but the receiver refused it (%+v): it is lost", i, es[i].Line, srv.Rejected())
		}
	}
	if res.Outcomes[1] != Accepted {
		t.Fatalf("outcomes %v: the valid entry of stream b is not accepted", res.Outcomes)
	}
}
