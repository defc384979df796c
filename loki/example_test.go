package loki_test

import (
	"context"
	"fmt"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/loki"
)

func ExampleClient_Push() {
	// A strict simulated Loki, in-process (use simloki.Start or simloki.Listen
	// for a real listener).
	srv := simloki.New(simloki.Options{})
	srv.RejectEntries(func(e simloki.Entry) bool { return e.Line == "bad" }, "example")

	c, err := loki.New(loki.Options{
		URL:       "http://loki.example/loki/api/v1/push",
		TenantID:  "team-a",
		Transport: srv.Transport(),
	})
	if err != nil {
		panic(err)
	}
	// Build each stream's label set once and reuse it.
	login := loki.NewLabels(loki.Label{Name: "job", Value: "sf2loki"}, loki.Label{Name: "event_type", Value: "Login"})
	now := time.Now()
	entries := []loki.Entry{
		{Timestamp: now, Labels: login, Line: "second", Ref: 2},
		{Timestamp: now.Add(-time.Second), Labels: login, Line: "first", Ref: 1},
		{Timestamp: now, Labels: login, Line: "bad", Ref: 3},
		{Timestamp: now, Labels: login.With(loki.Label{Name: "user_id", Value: "005"}), Line: "x", Ref: 4},
	}
	res := c.Push(context.Background(), entries)
	fmt.Println("accepted:", res.Accepted)
	for _, r := range res.Rejected {
		fmt.Println("rejected:", r.Ref, r.Reason, r.Status)
	}
	fmt.Println("not delivered:", res.NotDelivered, res.Err)
	for _, e := range srv.Stream(login.String()) {
		fmt.Println("stored:", e.Line)
	}
	// Output:
	// accepted: [2 1]
	// rejected: 3 bad_request 400
	// rejected: 4 invalid_labels 0
	// not delivered: [] <nil>
	// stored: first
	// stored: second
}
