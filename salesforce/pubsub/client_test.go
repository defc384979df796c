package pubsub_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sf2loki/sf2loki/internal/sftest"
	simpubsub "github.com/sf2loki/sf2loki/internal/sim/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/salesforce/pubsub/pubsubpb"
)

const (
	orgID = "00D000000000001EAA"
	topic = "/event/LoginEventStream"
)

// auth is a session source whose tokens the simulated server accepts until expired.
type auth struct {
	mu          sync.Mutex
	seq         int
	cur         string
	valid       map[string]bool
	invalidated []string
	topics      []string
	refuseAll   bool
}

func newAuth() *auth { return &auth{cur: "tok0", valid: map[string]bool{"tok0": true}} }

func (a *auth) Session(context.Context) (salesforce.Session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return salesforce.Session{AccessToken: a.cur, InstanceURL: "https://acme.my.salesforce.com", OrgID: orgID}, nil
}

func (a *auth) InvalidateSession(tok string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.invalidated = append(a.invalidated, tok)
	if tok != a.cur {
		return false
	}
	a.seq++
	a.cur = fmt.Sprintf("tok%d", a.seq)
	a.valid[a.cur] = true
	return true
}

func (a *auth) OrgID(context.Context) (string, error) { return orgID, nil }

// expireAll makes every token issued so far invalid on the server.
func (a *auth) expireAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.valid {
		a.valid[k] = false
	}
}

func (a *auth) check(_ context.Context, c simpubsub.Credentials) (simpubsub.Principal, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return simpubsub.Principal{OrgID: orgID, Topics: a.topics}, !a.refuseAll && a.valid[c.AccessToken] && c.TenantID == orgID
}

type fixture struct {
	srv    *simpubsub.Server
	client *pubsub.Client
	auth   *auth
	clock  *sftest.Clock
}

func newFixture(t *testing.T, opts simpubsub.Options) *fixture {
	t.Helper()
	return newFixtureWith(t, newAuth(), opts)
}

func (f *fixture) publish(t *testing.T, from, n int) [][]byte {
	t.Helper()
	evs := make([]map[string]any, n)
	for i := range n {
		evs[i] = simpubsub.LoginEvent(from+i, f.clock.Now())
	}
	ids, err := f.srv.Publish(topic, evs...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// subscribe opens a pull with req, closed when the test ends.
func (f *fixture) subscribe(t *testing.T, req pubsub.SubscribeRequest) *pubsub.Subscription {
	t.Helper()
	s, err := f.client.Subscribe(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// drain reads a subscription to its end.
func drain(t *testing.T, s *pubsub.Subscription) (events []*pubsub.Event, keepalives [][]byte, err error) {
	t.Helper()
	for {
		it, err := s.Next(ctx(t))
		if errors.Is(err, io.EOF) {
			return events, keepalives, nil
		}
		if err != nil {
			return events, keepalives, err
		}
		if it.Keepalive() {
			keepalives = append(keepalives, it.ReplayID)
		} else {
			events = append(events, it.Event)
		}
	}
}

func TestBoundedPullStopsAtMaxWithinTheCreditCap(t *testing.T) {
	f := newFixture(t, simpubsub.Options{})
	ids := f.publish(t, 0, 250)
	s := f.subscribe(t, pubsub.SubscribeRequest{Topic: topic, Preset: pubsub.Earliest, Max: 120, Idle: 5 * time.Second})
	evs, _, err := drain(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 120 || s.Stopped() != pubsub.StopMax {
		t.Fatalf("got %d events, stop %q; want 120 and %q", len(evs), s.Stopped(), pubsub.StopMax)
	}
	for i, ev := range evs {
		if !bytes.Equal(ev.ReplayID, ids[i]) {
			t.Fatalf("event %d has replay id %x, want %x (replay order)", i, ev.ReplayID, ids[i])
		}
	}
	st := f.srv.Stats()
	if st.MaxRequestedOutstanding > pubsub.MaxOutstanding {
		t.Fatalf("the client asked for %d outstanding events, more than %d", st.MaxRequestedOutstanding, pubsub.MaxOutstanding)
	}
	if st.Delivered != 120 {
		t.Fatalf("the server delivered %d events, want 120: credits must never exceed what the pull still wants", st.Delivered)
	}
}

func TestSmallRequestSizeTopsUp(t *testing.T) {
	f := newFixture(t, simpubsub.Options{})
	f.publish(t, 0, 60)
	s := f.subscribe(t, pubsub.SubscribeRequest{Topic: topic, Preset: pubsub.Earliest, Max: 1000, NumRequested: 7, Idle: time.Second})
	evs, _, err := drain(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 60 || s.Stopped() != pubsub.StopIdle {
		t.Fatalf("got %d events, stop %q; want 60 and idle", len(evs), s.Stopped())
	}
	if got := f.srv.Stats().MaxRequestedOutstanding; got > 7 {
		t.Fatalf("max requested outstanding %d, want at most the request size 7", got)
	}
}

func TestIdleTopicEndsOnTheIdleRule(t *testing.T) {
	f := newFixture(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	s := f.subscribe(t, pubsub.SubscribeRequest{Topic: topic, Preset: pubsub.Latest, Max: 10, Idle: 100 * time.Millisecond})
	evs, kas, err := drain(t, s)
	if err != nil || len(evs)+len(kas) != 0 || s.Stopped() != pubsub.StopIdle {
		t.Fatalf("got %d events, %d keepalives, err %v, stop %q; want nothing and idle", len(evs), len(kas), err, s.Stopped())
	}
}

func TestWaitForKeepaliveOutlastsTheIdlePeriod(t *testing.T) {
	f := newFixture(t, simpubsub.Options{KeepaliveInterval: 300 * time.Millisecond})
	ids := f.publish(t, 0, 1)
	f.clock.Advance(time.Minute)
	s := f.subscribe(t, pubsub.SubscribeRequest{Topic: topic, Preset: pubsub.Custom, ReplayID: ids[0], Max: 10,
		Idle: 20 * time.Millisecond, WaitForKeepalive: true})
	evs, kas, err := drain(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 || len(kas) != 1 || bytes.Equal(kas[0], ids[0]) || s.Stopped() != pubsub.StopKeepalive {
		t.Fatalf("got %d events, %d keepalives, stop %q; want one keepalive with a new id", len(evs), len(kas), s.Stopped())
	}
}

// TestKeepaliveAtTheStartPositionYieldsNothing: a quiet topic resumed from its stored replay id
// gets a keepalive carrying that same id. The position did not move, so no item is yielded (an
// Item is a keepalive carrying a newer position): handed out, it would be stored as freshly
// advanced while the id keeps aging toward the retention horizon. A refresh still ends on it.
func TestKeepaliveAtTheStartPositionYieldsNothing(t *testing.T) {
	f := newFixture(t, simpubsub.Options{KeepaliveInterval: 200 * time.Millisecond})
	ids := f.publish(t, 0, 1) // the clock does not move: the topic's newest id stays ids[0]
	s := f.subscribe(t, pubsub.SubscribeRequest{Topic: topic, Preset: pubsub.Custom, ReplayID: ids[0], Max: 10,
		Idle: 20 * time.Millisecond, WaitForKeepalive: true})
	evs, kas, err := drain(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if f.srv.Stats().Keepalives == 0 {
		t.Fatalf("the server sent no keepalive (stop %q)", s.Stopped())
	}
	if len(evs) != 0 || len(kas) != 0 || s.Stopped() != pubsub.StopKeepalive {
		t.Fatalf("got %d events, keepalives at %x, stop %q; want no item (the keepalive carried the start position %x) and %q",
			len(evs), kas, s.Stopped(), ids[0], pubsub.StopKeepalive)
	}
}

func TestDeadlineEndsTheWait(t *testing.T) {
	f := newFixture(t, simpubsub.Options{KeepaliveInterval: time.Hour})
	s := f.subscribe(t, pubsub.SubscribeRequest{Topic: topic, Max: 10, WaitForKeepalive: true, Deadline: time.Now().Add(150 * time.Millisecond)})
	if _, _, err := drain(t, s); err != nil || s.Stopped() != pubsub.StopDeadline {
		t.Fatalf("err %v, stop %q; want the deadline rule", err, s.Stopped())
	}
}

// TestStreamEndedAtTheDeadlineIsTheDeadlineStop: the Subscribe call carries the caller's context,
// whose deadline is the subscription's own, so at that deadline gRPC or the server may end the
// stream with DEADLINE_EXCEEDED before the subscription consults its deadline timer (here: the
// caller comes back after the deadline, and the stream's end is waiting). That is the pull
// ending on its deadline, as the timer would have said, not a broken stream: the events already
// yielded stay the position and the caller sees no failure.
func TestStreamEndedAtTheDeadlineIsTheDeadlineStop(t *testing.T) {
	// Keepalives come every idle/2: the pull runs to its deadline.
	f := newFixture(t, simpubsub.Options{KeepaliveInterval: 100 * time.Millisecond})
	f.publish(t, 0, 1)
	deadline := time.Now().Add(400 * time.Millisecond)
	sctx, cancel := context.WithDeadline(ctx(t), deadline)
	defer cancel()
	s, err := f.client.Subscribe(sctx, pubsub.SubscribeRequest{Topic: topic, Preset: pubsub.Earliest, Max: 10, Idle: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if it, err := s.Next(ctx(t)); err != nil || it.Keepalive() {
		t.Fatalf("first item %+v, err %v; want the event", it, err)
	}
	time.Sleep(time.Until(deadline) + 300*time.Millisecond)
	for {
		_, err := s.Next(ctx(t))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("err %v after the deadline; want the deadline stop", err)
		}
	}
	if s.Stopped() != pubsub.StopDeadline || s.Delivered() != 1 {
		t.Fatalf("stop %q, %d delivered; want %q and the 1 event", s.Stopped(), s.Delivered(), pubsub.StopDeadline)
	}
}

// TestOtherStreamEndsNearTheDeadlineFail: only the subscription's own deadline is a clean stop. A
// DEADLINE_EXCEEDED long before it (a server or proxy timing out) and any other error, even one
// read after the deadline, are a broken stream, reported.
func TestOtherStreamEndsNearTheDeadlineFail(t *testing.T) {
	cases := []struct {
		name     string
		code     codes.Code
		deadline time.Duration // the subscription's, from now
		late     time.Duration // how long after Subscribe the caller reads the stream's end
	}{
		{"deadline exceeded long before the deadline", codes.DeadlineExceeded, 20 * time.Second, 0},
		{"unavailable read after the deadline", codes.Unavailable, 100 * time.Millisecond, 400 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gs := grpc.NewServer()
			pubsubpb.RegisterPubSubServer(gs, failing{code: tc.code})
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = gs.Serve(l) }()
			t.Cleanup(gs.Stop)
			c, err := pubsub.New(newAuth(), pubsub.Options{Endpoint: l.Addr().String(), Plaintext: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			s, err := c.Subscribe(ctx(t), pubsub.SubscribeRequest{Topic: topic, Preset: pubsub.Earliest, Max: 10, Deadline: time.Now().Add(tc.deadline)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			time.Sleep(tc.late)
			if _, err := s.Next(ctx(t)); !errors.Is(err, pubsub.ErrUnavailable) || s.Stopped() != "" {
				t.Fatalf("err %v, stop %q; want ErrUnavailable", err, s.Stopped())
			}
		})
	}
}

// failing is a Pub/Sub server whose Subscribe fails with code at once.
type failing struct {
	pubsubpb.UnimplementedPubSubServer
	code codes.Code
}

func (f failing) Subscribe(call pubsubpb.PubSub_SubscribeServer) error {
	if _, err := call.Recv(); err != nil {
		return err
	}
	return status.Error(f.code, "upstream failure")
}

func TestSessionExpiringMidStreamIsRenewedOnce(t *testing.T) {
	a := newAuth()
	var once sync.Once
	var delivered int
	var mu sync.Mutex
	f2 := newFixtureWith(t, a, simpubsub.Options{OnDeliver: func(_ string, n int) {
		mu.Lock()
		delivered += n
		d := delivered
		mu.Unlock()
		if d >= 150 {
			once.Do(a.expireAll)
		}
	}})
	ids := f2.publish(t, 0, 400)
	s := f2.subscribe(t, pubsub.SubscribeRequest{Topic: topic, Preset: pubsub.Earliest, Max: 400, Idle: 2 * time.Second})
	evs, _, err := drain(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 400 || s.Stopped() != pubsub.StopMax {
		t.Fatalf("got %d events, stop %q; want all 400", len(evs), s.Stopped())
	}
	for i, ev := range evs {
		if !bytes.Equal(ev.ReplayID, ids[i]) {
			t.Fatalf("event %d out of order or duplicated after the renewal", i)
		}
	}
	if s.Reauths() != 1 || f2.client.Stats().Reauths != 1 {
		t.Fatalf("renewals = %d (client %d), want 1", s.Reauths(), f2.client.Stats().Reauths)
	}
	if len(a.invalidated) != 1 || a.invalidated[0] != "tok0" {
		t.Fatalf("invalidated %v, want exactly the stream's own token tok0", a.invalidated)
	}
}

func newFixtureWith(t *testing.T, a *auth, opts simpubsub.Options) *fixture {
	t.Helper()
	f := &fixture{auth: a, clock: sftest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))}
	opts.Now = f.clock.Now
	opts.Authenticate = a.check
	f.srv = simpubsub.New(opts)
	if _, err := f.srv.AddTopic(topic, simpubsub.LoginEventStreamSchema); err != nil {
		t.Fatal(err)
	}
	l, err := f.srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	f.client, err = pubsub.New(a, pubsub.Options{Endpoint: l.Addr, Plaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.client.Close() })
	return f
}

func TestSessionRefusedAgainAfterRenewalFails(t *testing.T) {
	f := newFixture(t, simpubsub.Options{})
	f.auth.mu.Lock()
	f.auth.refuseAll = true // even a renewed session is refused
	f.auth.mu.Unlock()
	s := f.subscribe(t, pubsub.SubscribeRequest{Topic: topic, Preset: pubsub.Earliest, Max: 5})
	_, _, err := drain(t, s)
	if !errors.Is(err, pubsub.ErrUnauthenticated) || !errors.Is(err, salesforce.ErrAuth) {
		t.Fatalf("err = %v, want ErrUnauthenticated", err)
	}
	if s.Reauths() != 1 {
		t.Fatalf("renewals = %d, want exactly 1", s.Reauths())
	}
}

func TestReplayIDPastRetentionIsReplayLost(t *testing.T) {
	f := newFixture(t, simpubsub.Options{})
	ids := f.publish(t, 0, 3)
	f.clock.Advance(73 * time.Hour)
	s := f.subscribe(t, pubsub.SubscribeRequest{Topic: topic, Preset: pubsub.Custom, ReplayID: ids[1], Max: 5})
	_, err := s.Next(ctx(t))
	var se *pubsub.StatusError
	if !errors.Is(err, pubsub.ErrReplayLost) || !errors.As(err, &se) || se.ErrorCode != pubsub.CodeReplayIDCorrupted {
		t.Fatalf("err = %v, want ErrReplayLost with the replayid.corrupted trailer", err)
	}
	if _, err2 := s.Next(ctx(t)); !errors.Is(err2, pubsub.ErrReplayLost) {
		t.Fatalf("a failed subscription must keep failing, got %v", err2)
	}
}

func TestGetTopicAndSchemaCache(t *testing.T) {
	f := newFixture(t, simpubsub.Options{})
	tp, err := f.client.GetTopic(ctx(t), topic)
	if err != nil || tp.SchemaID == "" {
		t.Fatalf("GetTopic = %+v, %v", tp, err)
	}
	if _, err := f.client.GetTopic(ctx(t), "/event/Nope__e"); !errors.Is(err, pubsub.ErrTopic) {
		t.Fatalf("unknown topic: %v, want ErrTopic", err)
	}
	f.auth.mu.Lock()
	f.auth.topics = []string{"/event/Other__e"}
	f.auth.mu.Unlock()
	if _, err := f.client.GetTopic(ctx(t), topic); !errors.Is(err, pubsub.ErrTopic) {
		t.Fatalf("can_subscribe false: %v, want ErrTopic", err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.client.Schema(ctx(t), tp.SchemaID); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := f.srv.Stats().GetSchemas; n != 1 {
		t.Fatalf("GetSchema called %d times for one id, want 1", n)
	}
	if _, err := f.client.Schema(ctx(t), "nope"); !errors.Is(err, pubsub.ErrSchema) {
		t.Fatalf("unknown schema: %v, want ErrSchema", err)
	}
}

func TestPlaintextOnlyToLoopback(t *testing.T) {
	_, err := pubsub.New(newAuth(), pubsub.Options{Endpoint: "api.pubsub.salesforce.com:7443", Plaintext: true})
	if !errors.Is(err, salesforce.ErrConfig) {
		t.Fatalf("err = %v, want a config error", err)
	}
}
