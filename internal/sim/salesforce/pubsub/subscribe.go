package pubsub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sf2loki/sf2loki/salesforce/pubsub/pubsubpb"
)

// Subscribe implements eventbus.v1.PubSub/Subscribe: a pull subscription with flow control.
func (s *Server) Subscribe(call pubsubpb.PubSub_SubscribeServer) error {
	ctx := s.newRPC(call.Context())
	s.stat(func(st *Stats) { st.Subscribes++ })
	p, err := s.authenticate(ctx)
	if err != nil {
		return err
	}
	creds := credentialsOf(ctx)
	first, err := call.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	t := s.topic(first.GetTopicName())
	switch {
	case first.GetTopicName() == "":
		return fail(ctx, codes.InvalidArgument, CodeTopicNotFound, "the first FetchRequest must name a topic")
	case t == nil:
		return fail(ctx, codes.NotFound, CodeTopicNotFound, fmt.Sprintf("topic %q not found", first.GetTopicName()))
	case !p.canSubscribe(t.name):
		return fail(ctx, codes.PermissionDenied, CodeTopicPermission, fmt.Sprintf("no subscribe permission on %s", t.name))
	case first.GetNumRequested() <= 0:
		return fail(ctx, codes.InvalidArgument, CodeRequestedEventsBad, "num_requested must be greater than 0")
	}
	pos, err := s.startPosition(ctx, t, first)
	if err != nil {
		return err
	}
	sub := &subscriber{s: s, ctx: ctx, call: call, t: t, creds: creds, pos: pos}
	sub.grant(int(first.GetNumRequested()))
	return sub.run()
}

// startPosition resolves the first request's preset to the sequence to deliver after.
func (s *Server) startPosition(ctx context.Context, t *topic, first *pubsubpb.FetchRequest) (uint64, error) {
	switch first.GetReplayPreset() {
	case pubsubpb.ReplayPreset_EARLIEST:
		return 0, nil
	case pubsubpb.ReplayPreset_CUSTOM:
		id := first.GetReplayId()
		if len(id) == 0 {
			return 0, fail(ctx, codes.InvalidArgument, CodeReplayIDValidation, "a CUSTOM replay preset needs a replay_id")
		}
		t.mu.Lock()
		seq, at, ok := t.parseReplayID(id)
		t.mu.Unlock()
		if !ok || at.Before(s.now().Add(-s.opts.Retention)) {
			s.stat(func(st *Stats) { st.ReplayRefused++ })
			return 0, fail(ctx, codes.InvalidArgument, CodeReplayIDCorrupted,
				fmt.Sprintf("The Replay ID validation failed. Ensure that the Replay ID is valid and within the retention window. rpcId: %s", rpcID(ctx)))
		}
		return seq, nil
	default: // LATEST
		return t.tip(), nil
	}
}

// subscriber is one open Subscribe call.
type subscriber struct {
	s     *Server
	ctx   context.Context
	call  pubsubpb.PubSub_SubscribeServer
	t     *topic
	creds Credentials

	pos     uint64 // last sequence delivered (or the start position)
	credits int    // events owed to the client
}

// grant adds credits from a FetchRequest, capped at MaxOutstanding outstanding.
func (sub *subscriber) grant(n int) {
	asked := sub.credits + n
	sub.s.stat(func(st *Stats) { st.MaxRequestedOutstanding = max(st.MaxRequestedOutstanding, asked) })
	sub.credits = min(asked, MaxOutstanding)
}

type fetch struct {
	req *pubsubpb.FetchRequest
	err error
}

func (sub *subscriber) run() error {
	o := sub.s.opts
	reqs := make(chan fetch)
	go func() {
		for {
			r, err := sub.call.Recv()
			select {
			case reqs <- fetch{req: r, err: err}:
			case <-sub.ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	keepalive := time.NewTimer(o.KeepaliveInterval)
	defer keepalive.Stop()
	authTick := time.NewTicker(o.AuthCheckInterval)
	defer authTick.Stop()
	var zeroSince time.Time
	for {
		if sub.credits > 0 {
			zeroSince = time.Time{}
			sent, err := sub.deliver()
			if err != nil {
				return err
			}
			if sent {
				keepalive.Reset(o.KeepaliveInterval)
				continue
			}
		} else if zeroSince.IsZero() {
			zeroSince = time.Now()
		}
		avail, changed := sub.t.after(sub.pos, 1, sub.horizon())
		if len(avail) > 0 && sub.credits > 0 {
			continue // published between deliver and now
		}
		var zero <-chan time.Time
		var zt *time.Timer
		if !zeroSince.IsZero() {
			zt = time.NewTimer(max(0, o.ZeroCreditTimeout-time.Since(zeroSince)))
			zero = zt.C
		}
		err := sub.wait(reqs, changed, keepalive, authTick, zero)
		if zt != nil {
			zt.Stop()
		}
		if errors.Is(err, errZeroCredits) {
			sub.s.log.Debug("simpubsub: closing a stream whose credits stayed at zero", "topic", sub.t.name)
			return nil
		}
		if errors.Is(err, errHalfClosed) {
			return nil // the client closed its side: end the call cleanly
		}
		if err != nil {
			return err
		}
	}
}

var (
	errZeroCredits = errors.New("credits stayed at zero")
	errHalfClosed  = errors.New("the client half-closed the stream")
)

// wait blocks for one thing to happen: a FetchRequest, a publish, a keepalive or auth check
// due, or the zero-credit timeout.
func (sub *subscriber) wait(reqs <-chan fetch, changed <-chan struct{}, keepalive *time.Timer, authTick *time.Ticker, zero <-chan time.Time) error {
	o := sub.s.opts
	select {
	case <-sub.ctx.Done():
		return sub.ctx.Err()
	case f := <-reqs:
		if f.err != nil {
			if errors.Is(f.err, io.EOF) {
				return errHalfClosed
			}
			return f.err
		}
		if name := f.req.GetTopicName(); name != "" && name != sub.t.name {
			return fail(sub.ctx, codes.InvalidArgument, CodeTopicMismatch, fmt.Sprintf("topic %q does not match the subscription's topic %q", name, sub.t.name))
		}
		if f.req.GetNumRequested() <= 0 {
			return fail(sub.ctx, codes.InvalidArgument, CodeRequestedEventsBad, "num_requested must be greater than 0")
		}
		sub.grant(int(f.req.GetNumRequested()))
	case <-changed:
	case <-keepalive.C:
		if sub.credits > 0 {
			if err := sub.keepalive(); err != nil {
				return err
			}
		}
		keepalive.Reset(o.KeepaliveInterval)
	case <-authTick.C:
		if err := sub.checkSession(); err != nil {
			return err
		}
	case <-zero:
		return errZeroCredits
	}
	return nil
}

func (sub *subscriber) horizon() time.Time { return sub.s.now().Add(-sub.s.opts.Retention) }

// checkSession ends the stream with UNAUTHENTICATED when its session is no longer valid.
func (sub *subscriber) checkSession() error {
	if _, ok := sub.s.check(sub.ctx, sub.creds); !ok {
		sub.s.stat(func(st *Stats) { st.Unauthenticated++ })
		return fail(sub.ctx, codes.Unauthenticated, CodeAuthError, "Unauthenticated: the session has expired")
	}
	return nil
}

// deliver sends the next batch of available events within the credits; sent is false when
// none is available.
func (sub *subscriber) deliver() (sent bool, err error) {
	batch, _ := sub.t.after(sub.pos, min(sub.credits, sub.s.opts.MaxBatch), sub.horizon())
	if len(batch) == 0 {
		return false, nil
	}
	if err := sub.checkSession(); err != nil {
		return false, err
	}
	resp := &pubsubpb.FetchResponse{RpcId: rpcID(sub.ctx)}
	for _, e := range batch {
		sub.t.mu.Lock()
		rid := sub.t.replayID(e.seq, e.at)
		sub.t.mu.Unlock()
		resp.Events = append(resp.Events, &pubsubpb.ConsumerEvent{
			Event:    &pubsubpb.ProducerEvent{Id: e.id, SchemaId: e.schemaID, Payload: e.payload},
			ReplayId: rid,
		})
	}
	resp.LatestReplayId = resp.Events[len(resp.Events)-1].ReplayId
	beyond := len(batch) - sub.credits
	sub.credits -= len(batch)
	sub.pos = batch[len(batch)-1].seq
	resp.PendingNumRequested = int32(sub.credits)
	if err := sub.call.Send(resp); err != nil {
		return false, err
	}
	sub.s.stat(func(st *Stats) {
		st.Delivered += len(batch)
		st.MaxBeyondCredits = max(st.MaxBeyondCredits, beyond)
	})
	if f := sub.s.opts.OnDeliver; f != nil {
		f(sub.t.name, len(batch))
	}
	return true, nil
}

// keepalive sends an empty response with a fresh latest_replay_id.
func (sub *subscriber) keepalive() error {
	if err := sub.checkSession(); err != nil {
		return err
	}
	// Only when caught up: a keepalive's id must not skip undelivered events.
	if pending, _ := sub.t.after(sub.pos, 1, sub.horizon()); len(pending) > 0 {
		return nil
	}
	latest := sub.t.mark(sub.s.now())
	if err := sub.call.Send(&pubsubpb.FetchResponse{LatestReplayId: latest, RpcId: rpcID(sub.ctx), PendingNumRequested: int32(sub.credits)}); err != nil {
		return err
	}
	sub.s.stat(func(st *Stats) { st.Keepalives++ })
	return nil
}

func credentialsOf(ctx context.Context) Credentials {
	md := incoming(ctx)
	return Credentials{AccessToken: md("accesstoken"), InstanceURL: md("instanceurl"), TenantID: md("tenantid")}
}
