package pubsub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sf2loki/sf2loki/internal/sftest"
	simpubsub "github.com/sf2loki/sf2loki/internal/sim/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/salesforce/pubsub/pubsubpb"
)

const (
	orgID = "00D000000000001EAA"
	topic = "/event/LoginEventStream"
)

type fixture struct {
	srv   *simpubsub.Server
	api   pubsubpb.PubSubClient
	clock *sftest.Clock
	valid map[string]bool
	mu    sync.Mutex
}

func newFixture(t *testing.T, opts simpubsub.Options) *fixture {
	t.Helper()
	f := &fixture{clock: sftest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), valid: map[string]bool{"tok": true}}
	opts.Now = f.clock.Now
	opts.Authenticate = func(_ context.Context, c simpubsub.Credentials) (simpubsub.Principal, bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return simpubsub.Principal{OrgID: orgID}, f.valid[c.AccessToken] && c.TenantID == orgID
	}
	f.srv = simpubsub.New(opts)
	if _, err := f.srv.AddTopic(topic, simpubsub.LoginEventStreamSchema); err != nil {
		t.Fatal(err)
	}
	l, err := f.srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	conn, err := grpc.NewClient(l.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	f.api = pubsubpb.NewPubSubClient(conn)
	return f
}

func (f *fixture) expire(tok string) {
	f.mu.Lock()
	f.valid[tok] = false
	f.mu.Unlock()
}

func authCtx(t *testing.T, tok string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "accesstoken", tok, "instanceurl", "http://127.0.0.1", "tenantid", orgID)
}

func (f *fixture) publish(t *testing.T, n int) [][]byte {
	t.Helper()
	var ids [][]byte
	for i := range n {
		id, err := f.srv.Publish(topic, simpubsub.LoginEvent(i, f.clock.Now()))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id...)
	}
	return ids
}

// errorCode returns the error-code trailer of a failed stream.
func errorCode(md metadata.MD) string {
	if v := md.Get("error-code"); len(v) > 0 {
		return v[0]
	}
	return ""
}

func TestFlowControlNeverDeliversBeyondCredits(t *testing.T) {
	f := newFixture(t, simpubsub.Options{})
	f.publish(t, 250)
	st, err := f.api.Subscribe(authCtx(t, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&pubsubpb.FetchRequest{TopicName: topic, ReplayPreset: pubsubpb.ReplayPreset_EARLIEST, NumRequested: 30}); err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 30 {
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got += len(resp.Events)
		if int(resp.PendingNumRequested) != 30-got {
			t.Fatalf("pending_num_requested = %d after %d of 30 events", resp.PendingNumRequested, got)
		}
	}
	// Ask for 150 more: the server treats it as 100 outstanding.
	if err := st.Send(&pubsubpb.FetchRequest{NumRequested: 150}); err != nil {
		t.Fatal(err)
	}
	for got < 130 {
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got += len(resp.Events)
	}
	if got != 130 {
		t.Fatalf("delivered %d events, want exactly 130 (30 + 100 capped)", got)
	}
	_ = st.CloseSend()
	if s := f.srv.Stats(); s.MaxRequestedOutstanding != 150 || s.MaxBeyondCredits > 0 {
		t.Fatalf("stats = %+v, want MaxRequestedOutstanding 150 and nothing beyond credits", s)
	}
}

func TestSubscribeRefusals(t *testing.T) {
	cases := []struct {
		name     string
		token    string
		req      *pubsubpb.FetchRequest
		age      time.Duration // clock advance after publishing
		code     codes.Code
		trailer  string
		customID bool // use the first published id
	}{
		{name: "bad token", token: "nope", req: &pubsubpb.FetchRequest{TopicName: topic, NumRequested: 1}, code: codes.Unauthenticated, trailer: simpubsub.CodeAuthError},
		{name: "zero credits", token: "tok", req: &pubsubpb.FetchRequest{TopicName: topic, NumRequested: 0}, code: codes.InvalidArgument, trailer: simpubsub.CodeRequestedEventsBad},
		{name: "unknown topic", token: "tok", req: &pubsubpb.FetchRequest{TopicName: "/event/Nope__e", NumRequested: 1}, code: codes.NotFound, trailer: simpubsub.CodeTopicNotFound},
		{name: "custom without id", token: "tok", req: &pubsubpb.FetchRequest{TopicName: topic, ReplayPreset: pubsubpb.ReplayPreset_CUSTOM, NumRequested: 1}, code: codes.InvalidArgument, trailer: simpubsub.CodeReplayIDValidation},
		{name: "foreign id", token: "tok", req: &pubsubpb.FetchRequest{TopicName: topic, ReplayPreset: pubsubpb.ReplayPreset_CUSTOM, ReplayId: []byte("garbage"), NumRequested: 1}, code: codes.InvalidArgument, trailer: simpubsub.CodeReplayIDCorrupted},
		{name: "expired id", token: "tok", req: &pubsubpb.FetchRequest{TopicName: topic, ReplayPreset: pubsubpb.ReplayPreset_CUSTOM, NumRequested: 1}, customID: true, age: 73 * time.Hour, code: codes.InvalidArgument, trailer: simpubsub.CodeReplayIDCorrupted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, simpubsub.Options{})
			ids := f.publish(t, 3)
			f.clock.Advance(tc.age)
			if tc.customID {
				tc.req.ReplayId = ids[0]
			}
			st, err := f.api.Subscribe(authCtx(t, tc.token))
			if err != nil {
				t.Fatal(err)
			}
			_ = st.Send(tc.req)
			_, err = st.Recv()
			if status.Code(err) != tc.code {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
			if got := errorCode(st.Trailer()); got != tc.trailer {
				t.Fatalf("error-code trailer = %q, want %q", got, tc.trailer)
			}
		})
	}
}

func TestCustomResumesStrictlyAfterTheID(t *testing.T) {
	f := newFixture(t, simpubsub.Options{})
	ids := f.publish(t, 10)
	st, err := f.api.Subscribe(authCtx(t, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&pubsubpb.FetchRequest{TopicName: topic, ReplayPreset: pubsubpb.ReplayPreset_CUSTOM, ReplayId: ids[3], NumRequested: 100})
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Events) != 6 || !bytes.Equal(resp.Events[0].ReplayId, ids[4]) {
		t.Fatalf("got %d events starting at %x, want 6 starting at %x", len(resp.Events), resp.Events[0].GetReplayId(), ids[4])
	}
	for _, ev := range resp.Events {
		if len(ev.ReplayId) != 8 {
			t.Fatalf("replay id %x is %d bytes; Salesforce's are 8", ev.ReplayId, len(ev.ReplayId))
		}
	}
	schema, err := f.api.GetSchema(authCtx(t, "tok"), &pubsubpb.SchemaRequest{SchemaId: resp.Events[0].Event.SchemaId})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := avro.Parse(schema.SchemaJson)
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := avro.Unmarshal(parsed, resp.Events[0].Event.Payload, &ev); err != nil {
		t.Fatal(err)
	}
	if ev["EventIdentifier"] != "ev-00000004" {
		t.Fatalf("first event after id 3 = %v, want ev-00000004", ev["EventIdentifier"])
	}
	// The schema is served as Salesforce serves platform-event schemas: CreatedDate a plain long
	// documented as a DateTime, and a top-level uuid.
	var raw struct {
		UUID   string `json:"uuid"`
		Fields []struct {
			Name string `json:"name"`
			Type any    `json:"type"`
			Doc  string `json:"doc"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(schema.SchemaJson), &raw); err != nil || raw.UUID == "" {
		t.Fatalf("schema without a uuid (%v)", err)
	}
	for _, f := range raw.Fields {
		if f.Name == "CreatedDate" && (f.Type != "long" || f.Doc != "CreatedDate:DateTime") {
			t.Fatalf("CreatedDate declared %v (doc %q)", f.Type, f.Doc)
		}
	}
	if _, ok := ev["CreatedDate"].(int64); !ok {
		t.Fatalf("CreatedDate decoded as %T, want a long", ev["CreatedDate"])
	}
}

func TestKeepaliveCarriesAFreshResumePoint(t *testing.T) {
	f := newFixture(t, simpubsub.Options{KeepaliveInterval: 50 * time.Millisecond})
	ids := f.publish(t, 2)
	st, err := f.api.Subscribe(authCtx(t, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&pubsubpb.FetchRequest{TopicName: topic, ReplayPreset: pubsubpb.ReplayPreset_CUSTOM, ReplayId: ids[1], NumRequested: 10})
	f.clock.Advance(time.Hour)
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Events) != 0 || len(resp.LatestReplayId) == 0 || bytes.Equal(resp.LatestReplayId, ids[1]) {
		t.Fatalf("keepalive = %d events, latest %x; want an empty response with a new id", len(resp.Events), resp.LatestReplayId)
	}
	_ = st.CloseSend()
	// 71 hours later the original id is expired, the keepalive's is not.
	f.clock.Advance(71*time.Hour + time.Minute)
	for _, tc := range []struct {
		id   []byte
		code codes.Code
	}{{ids[1], codes.InvalidArgument}, {resp.LatestReplayId, codes.OK}} {
		st, err := f.api.Subscribe(authCtx(t, "tok"))
		if err != nil {
			t.Fatal(err)
		}
		_ = st.Send(&pubsubpb.FetchRequest{TopicName: topic, ReplayPreset: pubsubpb.ReplayPreset_CUSTOM, ReplayId: tc.id, NumRequested: 1})
		_, err = st.Recv() // a keepalive (OK) or the refusal
		if status.Code(err) != tc.code {
			t.Fatalf("resume from %x: %v, want %s", tc.id, err, tc.code)
		}
		_ = st.CloseSend()
	}
}

func TestSessionExpiryEndsAnOpenStream(t *testing.T) {
	f := newFixture(t, simpubsub.Options{AuthCheckInterval: 10 * time.Millisecond})
	f.publish(t, 5)
	st, err := f.api.Subscribe(authCtx(t, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&pubsubpb.FetchRequest{TopicName: topic, ReplayPreset: pubsubpb.ReplayPreset_EARLIEST, NumRequested: 100})
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	f.expire("tok")
	for {
		_, err := st.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.Unauthenticated || errorCode(st.Trailer()) != simpubsub.CodeAuthError {
			t.Fatalf("stream ended with %v (trailer %v), want UNAUTHENTICATED with the auth error code", err, st.Trailer())
		}
		break
	}
}

func TestTopicMismatchAndHalfClose(t *testing.T) {
	f := newFixture(t, simpubsub.Options{})
	st, err := f.api.Subscribe(authCtx(t, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&pubsubpb.FetchRequest{TopicName: topic, NumRequested: 1})
	_ = st.Send(&pubsubpb.FetchRequest{TopicName: "/event/Other__e", NumRequested: 1})
	if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("mismatched topic: %v, want INVALID_ARGUMENT", err)
	}

	st, err = f.api.Subscribe(authCtx(t, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&pubsubpb.FetchRequest{TopicName: topic, NumRequested: 1})
	_ = st.CloseSend()
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the client half-closed: %v, want a clean end", err)
	}
}

func TestResetStreamInvalidatesOldIDs(t *testing.T) {
	f := newFixture(t, simpubsub.Options{})
	ids := f.publish(t, 2)
	if err := f.srv.ResetStream(topic); err != nil {
		t.Fatal(err)
	}
	st, err := f.api.Subscribe(authCtx(t, "tok"))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&pubsubpb.FetchRequest{TopicName: topic, ReplayPreset: pubsubpb.ReplayPreset_CUSTOM, ReplayId: ids[0], NumRequested: 1})
	if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument || errorCode(st.Trailer()) != simpubsub.CodeReplayIDCorrupted {
		t.Fatalf("resume after a reset: %v, want INVALID_ARGUMENT replayid.corrupted", err)
	}
}

func TestGetTopic(t *testing.T) {
	f := newFixture(t, simpubsub.Options{})
	info, err := f.api.GetTopic(authCtx(t, "tok"), &pubsubpb.TopicRequest{TopicName: topic})
	if err != nil {
		t.Fatal(err)
	}
	if !info.CanSubscribe || info.SchemaId == "" || info.TenantGuid != orgID {
		t.Fatalf("topic info = %+v", info)
	}
	if _, err := f.api.GetTopic(authCtx(t, "tok"), &pubsubpb.TopicRequest{TopicName: "/event/Nope__e"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown topic: %v, want NOT_FOUND", err)
	}
}
