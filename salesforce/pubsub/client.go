package pubsub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/salesforce/pubsub/pubsubpb"
)

// DefaultEndpoint is Salesforce's global Pub/Sub API endpoint.
const DefaultEndpoint = "api.pubsub.salesforce.com:7443"

// Metadata keys of every call.
const (
	MetadataAccessToken = "accesstoken"
	MetadataInstanceURL = "instanceurl"
	MetadataTenantID    = "tenantid"
)

// Authenticator supplies the session a call authenticates with. *salesforce.Client implements
// it: its token cache is shared with the REST calls, and InvalidateSession is compare-and-clear.
type Authenticator interface {
	Session(ctx context.Context) (salesforce.Session, error)
	InvalidateSession(accessToken string) bool
	OrgID(ctx context.Context) (string, error)
}

// Options configures a Client. The zero value of every field means its default.
type Options struct {
	// Endpoint is host:port of the Pub/Sub API (DefaultEndpoint when empty).
	Endpoint string
	// Plaintext disables TLS. Accepted only for a loopback endpoint (the simulated org).
	Plaintext bool
	// TLSCAFile is a PEM bundle of extra root certificates to trust.
	TLSCAFile string
	// TLSServerName overrides the name checked in the server certificate.
	TLSServerName string
	// TLSInsecureSkipVerify disables certificate verification (tests only).
	TLSInsecureSkipVerify bool
	// DialOptions are appended to the client's own (tests inject a bufconn dialer here).
	DialOptions []grpc.DialOption
	// Logger receives re-authentications and stream ends at debug/warn level (nil =
	// slog.Default()). Tokens are never logged.
	Logger *slog.Logger
	// Now is the wall clock (nil = time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Validate checks the options without any network call; errors are *salesforce.ConfigError
// naming the field.
func (o Options) Validate() error {
	o = o.withDefaults()
	host, port, err := net.SplitHostPort(o.Endpoint)
	if err != nil || host == "" || port == "" {
		return &salesforce.ConfigError{Field: "Endpoint", Msg: fmt.Sprintf("%q is not host:port (e.g. %s)", o.Endpoint, DefaultEndpoint)}
	}
	if o.Plaintext && !isLoopback(host) {
		return &salesforce.ConfigError{Field: "Plaintext", Msg: fmt.Sprintf("plaintext gRPC is only allowed to a loopback endpoint, not %s", host)}
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Call kinds counted by Stats.
const (
	KindSubscribe = "pubsub_subscribe"
	KindGetTopic  = "pubsub_get_topic"
	KindGetSchema = "pubsub_get_schema"
)

// Stats is what a Client has done so far.
type Stats struct {
	// Calls counts RPCs started per kind (KindSubscribe, ...), retries included.
	Calls map[string]int64
	// Reauths counts calls repeated with a new session after UNAUTHENTICATED.
	Reauths int64
}

// Client is a Pub/Sub API client for one org. It is safe for concurrent use. Build one per
// invocation: its schema cache lives as long as it does.
type Client struct {
	auth Authenticator
	opts Options
	log  *slog.Logger
	conn *grpc.ClientConn
	api  pubsubpb.PubSubClient

	schemaMu sync.Mutex
	schemas  map[string]*schemaEntry

	statMu  sync.Mutex
	calls   map[string]int64
	reauths int64
}

type schemaEntry struct {
	done   chan struct{}
	schema avro.Schema
	err    error
}

// New returns a Client (the connection is made lazily, on the first call).
func New(auth Authenticator, opts Options) (*Client, error) {
	if auth == nil {
		return nil, errors.New("pubsub: New needs an Authenticator")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	creds, err := o.transportCredentials()
	if err != nil {
		return nil, err
	}
	dial := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// HTTP/2 pings find a half-open connection.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
	}
	dial = append(dial, o.DialOptions...)
	conn, err := grpc.NewClient(o.Endpoint, dial...)
	if err != nil {
		return nil, fmt.Errorf("pubsub: %w", err)
	}
	return &Client{
		auth: auth, opts: o, log: o.Logger, conn: conn, api: pubsubpb.NewPubSubClient(conn),
		schemas: map[string]*schemaEntry{}, calls: map[string]int64{},
	}, nil
}

func (o Options) transportCredentials() (credentials.TransportCredentials, error) {
	if o.Plaintext {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.TLSServerName, InsecureSkipVerify: o.TLSInsecureSkipVerify} //nolint:gosec // opt-in for tests
	if o.TLSCAFile != "" {
		pem, err := os.ReadFile(o.TLSCAFile)
		if err != nil {
			return nil, &salesforce.ConfigError{Field: "TLSCAFile", Msg: err.Error()}
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &salesforce.ConfigError{Field: "TLSCAFile", Msg: "no PEM certificate found in " + o.TLSCAFile}
		}
		cfg.RootCAs = pool
	}
	return credentials.NewTLS(cfg), nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Stats returns a snapshot of the calls made so far.
func (c *Client) Stats() Stats {
	c.statMu.Lock()
	defer c.statMu.Unlock()
	return Stats{Calls: maps.Clone(c.calls), Reauths: c.reauths}
}

func (c *Client) count(kind string) {
	c.statMu.Lock()
	c.calls[kind]++
	c.statMu.Unlock()
}

func (c *Client) countReauth() {
	c.statMu.Lock()
	c.reauths++
	c.statMu.Unlock()
}

// authContext returns ctx carrying the session's metadata, and the access token used.
func (c *Client) authContext(ctx context.Context) (context.Context, string, error) {
	s, err := c.auth.Session(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("pubsub: %w", err)
	}
	org := s.OrgID
	if org == "" {
		if org, err = c.auth.OrgID(ctx); err != nil {
			return nil, "", fmt.Errorf("pubsub: %w", err)
		}
	}
	md := metadata.Pairs(MetadataAccessToken, s.AccessToken, MetadataInstanceURL, s.InstanceURL, MetadataTenantID, org)
	return metadata.NewOutgoingContext(ctx, md), s.AccessToken, nil
}

// unary runs one unary call, renewing the session once on UNAUTHENTICATED.
func (c *Client) unary(ctx context.Context, kind, op, subject string, call func(ctx context.Context, opts ...grpc.CallOption) error) error {
	for attempt := 0; ; attempt++ {
		actx, token, err := c.authContext(ctx)
		if err != nil {
			return err
		}
		c.count(kind)
		var trailer metadata.MD
		err = statusError(op, subject, call(actx, grpc.Trailer(&trailer)), trailer, false)
		var se *StatusError
		if attempt == 0 && errors.As(err, &se) && se.Code == codes.Unauthenticated {
			c.auth.InvalidateSession(token)
			c.countReauth()
			c.log.Debug("pubsub: session refused; renewing it once", "op", op)
			continue
		}
		return err
	}
}

// Topic describes a topic (GetTopic).
type Topic struct {
	Name         string
	SchemaID     string
	CanSubscribe bool
	CanPublish   bool
	RPCID        string
}

// GetTopic returns the topic's description. A topic that does not exist or may not be
// subscribed to by this user is ErrTopic.
func (c *Client) GetTopic(ctx context.Context, name string) (Topic, error) {
	var info *pubsubpb.TopicInfo
	err := c.unary(ctx, KindGetTopic, "GetTopic", name, func(ctx context.Context, opts ...grpc.CallOption) error {
		var err error
		info, err = c.api.GetTopic(ctx, &pubsubpb.TopicRequest{TopicName: name}, opts...)
		return err
	})
	if err != nil {
		return Topic{}, err
	}
	t := Topic{Name: info.GetTopicName(), SchemaID: info.GetSchemaId(), CanSubscribe: info.GetCanSubscribe(), CanPublish: info.GetCanPublish(), RPCID: info.GetRpcId()}
	if !t.CanSubscribe {
		return t, fmt.Errorf("pubsub: topic %s: the integration user may not subscribe to it (can_subscribe is false): %w", name, ErrTopic)
	}
	return t, nil
}

// Schema returns the parsed Avro schema of a fingerprint. Schemas are immutable, so each id is
// fetched at most once per Client (concurrent callers of one id share the call; a failure is
// not cached).
func (c *Client) Schema(ctx context.Context, id string) (avro.Schema, error) {
	c.schemaMu.Lock()
	e, ok := c.schemas[id]
	if !ok {
		e = &schemaEntry{done: make(chan struct{})}
		c.schemas[id] = e
	}
	c.schemaMu.Unlock()
	if ok {
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err == nil {
			return e.schema, nil
		}
		return c.Schema(ctx, id) // the failed entry was removed; try again
	}
	e.schema, e.err = c.fetchSchema(ctx, id)
	if e.err != nil {
		c.schemaMu.Lock()
		delete(c.schemas, id)
		c.schemaMu.Unlock()
	}
	close(e.done)
	return e.schema, e.err
}

func (c *Client) fetchSchema(ctx context.Context, id string) (avro.Schema, error) {
	var info *pubsubpb.SchemaInfo
	err := c.unary(ctx, KindGetSchema, "GetSchema", id, func(ctx context.Context, opts ...grpc.CallOption) error {
		var err error
		info, err = c.api.GetSchema(ctx, &pubsubpb.SchemaRequest{SchemaId: id}, opts...)
		return err
	})
	if err != nil {
		return nil, errors.Join(ErrSchema, err)
	}
	// A private cache: Salesforce reuses record names across schema versions, and hamba's
	// default cache would resolve a name to the first version it saw.
	s, err := avro.ParseWithCache(info.GetSchemaJson(), "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("%w: schema %s: %w", ErrSchema, id, err)
	}
	return s, nil
}
