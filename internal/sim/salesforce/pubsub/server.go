package pubsub

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sf2loki/sf2loki/salesforce/pubsub/pubsubpb"
)

// Defaults of Options.
const (
	DefaultRetention         = 72 * time.Hour
	DefaultKeepaliveInterval = 270 * time.Second
	DefaultZeroCreditTimeout = 60 * time.Second
	DefaultMaxBatch          = 100
	DefaultAuthCheckInterval = time.Second
	// MaxOutstanding is the cap on the credits outstanding on one Subscribe call.
	MaxOutstanding = 100
)

// Error-code trailer values Salesforce sends.
const (
	CodeAuthError          = "sfdc.platform.eventbus.grpc.service.auth.error"
	CodeReplayIDCorrupted  = "sfdc.platform.eventbus.grpc.subscription.fetch.replayid.corrupted"
	CodeReplayIDValidation = "sfdc.platform.eventbus.grpc.subscription.fetch.replayid.validation.failed"
	CodeRequestedEventsBad = "sfdc.platform.eventbus.grpc.subscription.fetch.requested.events.invalid"
	CodeTopicMismatch      = "sfdc.platform.eventbus.grpc.subscription.topic.mismatch"
	CodeTopicNotFound      = "sfdc.platform.eventbus.grpc.topic.not.found"
	CodeTopicPermission    = "sfdc.platform.eventbus.grpc.topic.permission.denied"
	CodeSchemaNotFound     = "sfdc.platform.eventbus.grpc.schema.not.found"
)

// Options configures a Server. The zero value of every field means its default.
type Options struct {
	// Now is the clock of publish times, retention and replay-id age (nil = time.Now). Stream
	// timers (keepalive, zero-credit close, auth re-checks) run on real time.
	Now func() time.Time
	// Authenticate validates a call's metadata (nil: any non-empty access token, and a tenantid
	// equal to OrgID when OrgID is set). It is called when a call starts and, on open streams,
	// before every response and every AuthCheckInterval.
	Authenticate Authenticator
	// OrgID is the org's 18-character id (used by the nil Authenticate).
	OrgID string
	// Retention is how long events and replay ids stay valid (default 72h).
	Retention time.Duration
	// KeepaliveInterval is how long a stream with pending credits stays silent before an empty
	// FetchResponse with latest_replay_id is sent (default 270s, as Salesforce).
	KeepaliveInterval time.Duration
	// ZeroCreditTimeout closes a stream whose credits stayed at zero this long (default 60s).
	ZeroCreditTimeout time.Duration
	// MaxBatch bounds the events of one FetchResponse (default 100).
	MaxBatch int
	// AuthCheckInterval is how often an idle open stream re-checks its session (default 1s).
	AuthCheckInterval time.Duration
	// OnDeliver, when set, is called after each FetchResponse carrying events has been sent,
	// with the topic and the number of events (tests expire sessions mid-stream from it).
	OnDeliver func(topic string, n int)
	// Seed makes replay ids and event ids deterministic.
	Seed int64
	// Logger receives debug logs (nil = slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.KeepaliveInterval <= 0 {
		o.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if o.ZeroCreditTimeout <= 0 {
		o.ZeroCreditTimeout = DefaultZeroCreditTimeout
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.AuthCheckInterval <= 0 {
		o.AuthCheckInterval = DefaultAuthCheckInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Stats counts what the server did.
type Stats struct {
	// Subscribes counts Subscribe calls; GetTopics and GetSchemas the unary calls.
	Subscribes, GetTopics, GetSchemas int
	// Unauthenticated counts calls and streams ended with UNAUTHENTICATED.
	Unauthenticated int
	// ReplayRefused counts CUSTOM starts refused as corrupted or expired.
	ReplayRefused int
	// Delivered counts events sent; Keepalives empty responses sent.
	Delivered, Keepalives int
	// MaxRequestedOutstanding is the largest credits-outstanding sum any client asked for,
	// before the cap of 100 was applied (a well-behaved client never exceeds 100).
	MaxRequestedOutstanding int
	// MaxBeyondCredits is the largest number of events a response carried beyond the credits
	// outstanding (always 0: the server enforces flow control; kept so tests can assert it).
	MaxBeyondCredits int
}

// Server is a simulated Pub/Sub API. All methods are safe for concurrent use.
type Server struct {
	pubsubpb.UnimplementedPubSubServer

	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	topics  map[string]*topic
	schemas map[string]string // id → JSON
	stats   Stats
	idSeq   uint64
}

// New returns a server with no topics.
func New(opts Options) *Server {
	o := opts.withDefaults()
	return &Server{opts: o, log: o.Logger, topics: map[string]*topic{}, schemas: map[string]string{}}
}

func (s *Server) now() time.Time { return s.opts.Now() }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *Server) stat(f func(*Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// Register adds the service to a gRPC server.
func (s *Server) Register(gs *grpc.Server) { pubsubpb.RegisterPubSubServer(gs, s) }

// Listener is a running server (see Start).
type Listener struct {
	// Addr is host:port of the plaintext listener, e.g. 127.0.0.1:41234.
	Addr string
	gs   *grpc.Server
}

// Close stops the server, ending open streams.
func (l *Listener) Close() error {
	l.gs.Stop()
	return nil
}

// Start serves the API over plaintext HTTP/2 on a random loopback port until Close.
func (s *Server) Start() (*Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("simpubsub: listen: %w", err)
	}
	gs := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}))
	s.Register(gs)
	go func() { _ = gs.Serve(ln) }()
	return &Listener{Addr: ln.Addr().String(), gs: gs}, nil
}

// fail returns a status error after attaching Salesforce's error-code trailer.
func fail(ctx context.Context, code codes.Code, errorCode, msg string) error {
	md := metadata.Pairs("rpc-id", rpcID(ctx))
	if errorCode != "" {
		md.Append("error-code", errorCode)
	}
	_ = grpc.SetTrailer(ctx, md)
	return status.Error(code, msg)
}

func rpcID(ctx context.Context) string {
	if v, ok := ctx.Value(rpcIDKey{}).(string); ok {
		return v
	}
	return ""
}

type rpcIDKey struct{}

func (s *Server) newRPC(ctx context.Context) context.Context {
	s.mu.Lock()
	s.idSeq++
	id := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(s.opts.Seed), s.idSeq>>48&0xffff, s.idSeq>>36&0xfff, s.idSeq>>24&0xfff, s.idSeq&0xffffffffffff)
	s.mu.Unlock()
	return context.WithValue(ctx, rpcIDKey{}, id)
}

// GetTopic implements eventbus.v1.PubSub/GetTopic.
func (s *Server) GetTopic(ctx context.Context, req *pubsubpb.TopicRequest) (*pubsubpb.TopicInfo, error) {
	ctx = s.newRPC(ctx)
	s.stat(func(st *Stats) { st.GetTopics++ })
	p, err := s.authenticate(ctx)
	if err != nil {
		return nil, err
	}
	t := s.topic(req.GetTopicName())
	if t == nil {
		return nil, fail(ctx, codes.NotFound, CodeTopicNotFound, fmt.Sprintf("topic %q not found", req.GetTopicName()))
	}
	return &pubsubpb.TopicInfo{
		TopicName: t.name, TenantGuid: p.OrgID, CanSubscribe: p.canSubscribe(t.name), CanPublish: p.canSubscribe(t.name),
		SchemaId: t.currentSchema(), RpcId: rpcID(ctx),
	}, nil
}

// GetSchema implements eventbus.v1.PubSub/GetSchema.
func (s *Server) GetSchema(ctx context.Context, req *pubsubpb.SchemaRequest) (*pubsubpb.SchemaInfo, error) {
	ctx = s.newRPC(ctx)
	s.stat(func(st *Stats) { st.GetSchemas++ })
	if _, err := s.authenticate(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	js, ok := s.schemas[req.GetSchemaId()]
	s.mu.Unlock()
	if !ok {
		return nil, fail(ctx, codes.NotFound, CodeSchemaNotFound, fmt.Sprintf("schema %q not found", req.GetSchemaId()))
	}
	return &pubsubpb.SchemaInfo{SchemaJson: js, SchemaId: req.GetSchemaId(), RpcId: rpcID(ctx)}, nil
}
