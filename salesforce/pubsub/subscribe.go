package pubsub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sf2loki/sf2loki/salesforce/pubsub/pubsubpb"
)

// MaxOutstanding is the most credits one Subscribe call may have outstanding: Salesforce caps
// the sum of requested-but-undelivered events at 100 and treats more as 100.
const MaxOutstanding = 100

// Preset is where a subscription starts.
type Preset int

// Start positions of a subscription.
const (
	// Latest starts after the newest event.
	Latest Preset = iota
	// Earliest starts at the oldest retained event (about 72 hours back).
	Earliest
	// Custom starts strictly after SubscribeRequest.ReplayID.
	Custom
)

func (p Preset) String() string {
	switch p {
	case Latest:
		return "LATEST"
	case Earliest:
		return "EARLIEST"
	case Custom:
		return "CUSTOM"
	}
	return fmt.Sprintf("Preset(%d)", int(p))
}

func (p Preset) proto() pubsubpb.ReplayPreset {
	switch p {
	case Earliest:
		return pubsubpb.ReplayPreset_EARLIEST
	case Custom:
		return pubsubpb.ReplayPreset_CUSTOM
	}
	return pubsubpb.ReplayPreset_LATEST
}

// SubscribeRequest is one bounded pull from a topic.
type SubscribeRequest struct {
	// Topic is the topic name, e.g. /event/LoginEventStream or /data/AccountChangeEvent.
	Topic string
	// Preset and ReplayID are the start position (ReplayID only with Custom).
	Preset   Preset
	ReplayID []byte
	// Max is N: the subscription delivers at most Max events and then stops. Required (> 0).
	Max int
	// NumRequested is the most credits outstanding at once, 1..MaxOutstanding (default
	// MaxOutstanding); more are requested when half are used. Credits never exceed the events
	// still wanted either, so the server cannot deliver more than Max.
	NumRequested int
	// Idle ends the pull when no response arrived for this long while credits were outstanding
	// (default 5s). Salesforce sends keepalives only every ~270s, so on a quiet topic the idle
	// rule is what ends the pull.
	Idle time.Duration
	// Deadline ends the pull (zero = only the context's deadline).
	Deadline time.Time
	// WaitForKeepalive ignores the idle rule until a keepalive arrives: the pull then ends
	// after that keepalive (or on Max or the deadline, whichever comes first). Used to refresh a
	// quiet topic's stored replay id.
	WaitForKeepalive bool
}

// DefaultIdle is SubscribeRequest.Idle's default.
const DefaultIdle = 5 * time.Second

// StopReason says why a subscription ended.
type StopReason string

// Reasons a subscription ends.
const (
	// StopMax: Max events were delivered.
	StopMax StopReason = "max_events"
	// StopIdle: nothing arrived for Idle while credits were outstanding.
	StopIdle StopReason = "idle"
	// StopDeadline: the deadline passed.
	StopDeadline StopReason = "deadline"
	// StopKeepalive: the keepalive WaitForKeepalive waited for arrived.
	StopKeepalive StopReason = "keepalive"
	// StopServer: the server ended the stream without an error.
	StopServer StopReason = "server_closed"
)

// Event is one delivered event.
type Event struct {
	// ID is the event's id (ProducerEvent.id).
	ID string
	// SchemaID is the fingerprint of the writer schema (see Client.Schema).
	SchemaID string
	// Payload is the Avro binary payload.
	Payload []byte
	// ReplayID is the event's opaque position.
	ReplayID []byte
}

// Item is what Subscription.Next yields: an event, or a keepalive carrying a newer resume
// position.
type Item struct {
	// Event is the delivered event; nil for a keepalive.
	Event *Event
	// ReplayID is the resume position after this item: the event's replay id, or the
	// keepalive's latest_replay_id.
	ReplayID []byte
}

// Keepalive reports whether the item is a keepalive (no event).
func (it Item) Keepalive() bool { return it.Event == nil }

// Subscription is one open bounded pull. Next and Close are called by one goroutine.
type Subscription struct {
	c   *Client
	req SubscribeRequest

	// position and accounting
	resume      []byte // replay id of the last item yielded (nil: none yet)
	delivered   int    // events yielded
	outstanding int    // credits granted on the current stream and not yet received

	reauthed bool // renewed the session since the last item
	reauths  int

	st       *stream
	pending  []Item
	stopped  StopReason
	failed   error
	deadline time.Time
	idle     time.Duration
	last     time.Time // last response received or credit request sent (monotonic)
}

// stream is one Subscribe call and the goroutine reading it.
type stream struct {
	cancel context.CancelFunc
	call   pubsubpb.PubSub_SubscribeClient
	token  string
	recv   chan recvResult
}

type recvResult struct {
	resp *pubsubpb.FetchResponse
	err  error
}

// Subscribe opens a bounded pull. Errors of the first request (a refused replay id, an unknown
// topic) surface from the first Next.
func (c *Client) Subscribe(ctx context.Context, req SubscribeRequest) (*Subscription, error) {
	if req.Topic == "" {
		return nil, errors.New("pubsub: Subscribe needs a topic")
	}
	if req.Max <= 0 {
		return nil, fmt.Errorf("pubsub: Subscribe %s: Max must be positive, got %d", req.Topic, req.Max)
	}
	if req.Preset == Custom && len(req.ReplayID) == 0 {
		return nil, fmt.Errorf("pubsub: Subscribe %s: CUSTOM needs a replay id", req.Topic)
	}
	if req.NumRequested <= 0 || req.NumRequested > MaxOutstanding {
		req.NumRequested = MaxOutstanding
	}
	s := &Subscription{c: c, req: req, idle: req.Idle, deadline: req.Deadline}
	if s.idle <= 0 {
		s.idle = DefaultIdle
	}
	if d, ok := ctx.Deadline(); ok && (s.deadline.IsZero() || d.Before(s.deadline)) {
		s.deadline = d
	}
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Delivered returns the number of events yielded so far.
func (s *Subscription) Delivered() int { return s.delivered }

// Stopped returns why the subscription ended ("" while it runs).
func (s *Subscription) Stopped() StopReason { return s.stopped }

// Reauths returns how often the session was renewed on this subscription.
func (s *Subscription) Reauths() int { return s.reauths }

// open starts a Subscribe call from the current position and grants the first credits.
func (s *Subscription) open(ctx context.Context) error {
	actx, token, err := s.c.authContext(ctx)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(actx)
	s.c.count(KindSubscribe)
	call, err := s.c.api.Subscribe(sctx)
	if err != nil {
		cancel()
		return statusError("Subscribe", s.req.Topic, err, nil, s.resuming())
	}
	first := &pubsubpb.FetchRequest{TopicName: s.req.Topic, ReplayPreset: s.req.Preset.proto(), NumRequested: int32(s.credit(0))}
	if pos := s.position(); pos != nil {
		first.ReplayPreset, first.ReplayId = pubsubpb.ReplayPreset_CUSTOM, pos
	}
	st := &stream{cancel: cancel, call: call, token: token, recv: make(chan recvResult, MaxOutstanding+1)}
	if err := call.Send(first); err != nil {
		// The real error arrives from Recv.
		s.c.log.Debug("pubsub: first FetchRequest not sent", "topic", s.req.Topic, "err", err)
	}
	s.outstanding = int(first.NumRequested)
	s.st = st
	s.last = time.Now()
	go st.read()
	return nil
}

// read forwards every response to recv, and closes it after the call's final error.
func (st *stream) read() {
	defer close(st.recv)
	for {
		resp, err := st.call.Recv()
		st.recv <- recvResult{resp: resp, err: err}
		if err != nil {
			return
		}
	}
}

// close ends the call and waits for its reader (so the call's resources are released).
func (st *stream) close() {
	_ = st.call.CloseSend()
	st.cancel()
	for range st.recv {
	}
}

// position is where the pull stands: the replay id of the last item yielded, else the start
// position's replay id (Custom), else nil (Earliest or Latest with nothing yielded yet).
func (s *Subscription) position() []byte {
	if s.resume == nil && s.req.Preset == Custom {
		return s.req.ReplayID
	}
	return s.resume
}

// resuming reports whether the current open resumes from a stored replay id.
func (s *Subscription) resuming() bool {
	return s.position() != nil
}

// credit returns how many credits to request now, given outstanding ones: never more than the
// events still wanted nor more than NumRequested (at most MaxOutstanding) in total.
func (s *Subscription) credit(outstanding int) int {
	want := s.req.Max - s.delivered - s.pendingEvents() - outstanding
	room := s.req.NumRequested - outstanding
	return max(0, min(want, room))
}

// pendingEvents counts the received events not yet yielded.
func (s *Subscription) pendingEvents() int {
	n := 0
	for _, it := range s.pending {
		if it.Event != nil {
			n++
		}
	}
	return n
}

// topUp grants more credits when half of the request size has been used.
func (s *Subscription) topUp() {
	if s.st == nil || s.outstanding > s.req.NumRequested/2 {
		return
	}
	n := s.credit(s.outstanding)
	if n <= 0 {
		return
	}
	if err := s.st.call.Send(&pubsubpb.FetchRequest{TopicName: s.req.Topic, NumRequested: int32(n)}); err != nil {
		// A half-closed stream: its end (and error, if any) arrives from Recv.
		return
	}
	s.outstanding += n
	s.last = time.Now()
}

// Next returns the next event or keepalive. It returns io.EOF once the pull has stopped (see
// Stopped) and an error when the stream failed: ErrReplayLost for a refused start position,
// ErrUnauthenticated when a renewed session is refused too, ErrTopic, ErrUnavailable.
func (s *Subscription) Next(ctx context.Context) (Item, error) {
	for {
		if len(s.pending) > 0 {
			it := s.pending[0]
			s.pending = s.pending[1:]
			return s.yield(it), nil
		}
		if s.failed != nil {
			return Item{}, s.failed
		}
		if s.stopped != "" {
			return Item{}, io.EOF
		}
		if s.delivered >= s.req.Max {
			s.stop(StopMax)
			continue
		}
		s.topUp()
		if err := s.wait(ctx); err != nil {
			s.stop("")
			s.failed = err
			return Item{}, err
		}
	}
}

func (s *Subscription) yield(it Item) Item {
	s.reauthed = false
	s.resume = it.ReplayID
	if it.Event != nil {
		s.delivered++
		if s.delivered >= s.req.Max {
			s.stop(StopMax)
		}
	}
	if s.req.WaitForKeepalive {
		if it.Event == nil {
			s.stop(StopKeepalive)
		} else {
			// The position moved with an event: nothing left to refresh, the idle rule applies.
			s.req.WaitForKeepalive = false
		}
	}
	return it
}

// wait blocks for the next response and turns it into pending items; it sets s.stopped when
// the pull ends without an error.
func (s *Subscription) wait(ctx context.Context) error {
	// A response already received wins over the timers: the idle clock runs from the last
	// response read, and one waiting in the channel was not read yet.
	select {
	case r := <-s.st.recv:
		return s.received(ctx, r)
	default:
	}
	var idle <-chan time.Time
	if !s.req.WaitForKeepalive {
		rest := s.idle - time.Since(s.last)
		if rest <= 0 {
			s.stop(StopIdle)
			return nil
		}
		t := time.NewTimer(rest)
		defer t.Stop()
		idle = t.C
	}
	var dl <-chan time.Time
	if !s.deadline.IsZero() {
		rest := time.Until(s.deadline)
		if rest <= 0 {
			s.stop(StopDeadline)
			return nil
		}
		t := time.NewTimer(rest)
		defer t.Stop()
		dl = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-idle:
		s.stop(StopIdle)
		return nil
	case <-dl:
		s.stop(StopDeadline)
		return nil
	case r := <-s.st.recv:
		return s.received(ctx, r)
	}
}

func (s *Subscription) received(ctx context.Context, r recvResult) error {
	s.last = time.Now()
	if r.err != nil {
		return s.streamEnded(ctx, r.err)
	}
	s.accept(r.resp)
	return nil
}

// accept turns one FetchResponse into pending items.
func (s *Subscription) accept(resp *pubsubpb.FetchResponse) {
	evs := resp.GetEvents()
	s.outstanding = max(0, s.outstanding-len(evs))
	if p := int(resp.GetPendingNumRequested()); p < s.outstanding {
		// The server owes fewer than we think (it clamped a request): trust it.
		s.outstanding = p
	}
	for _, ce := range evs {
		if s.delivered+len(s.pending) >= s.req.Max {
			break // never hand out more than Max, whatever the server sent
		}
		pe := ce.GetEvent()
		s.pending = append(s.pending, Item{
			Event:    &Event{ID: pe.GetId(), SchemaID: pe.GetSchemaId(), Payload: pe.GetPayload(), ReplayID: ce.GetReplayId()},
			ReplayID: ce.GetReplayId(),
		})
	}
	if len(evs) == 0 {
		// Compared with the start position too: on a quiet topic resumed from a stored id, the
		// keepalive carries that same id, which is no new position to hand out (and store as
		// freshly advanced) while it keeps aging toward the retention horizon.
		latest := resp.GetLatestReplayId()
		if len(latest) > 0 && !bytes.Equal(latest, s.position()) {
			s.pending = append(s.pending, Item{ReplayID: latest})
		} else if s.req.WaitForKeepalive {
			s.stop(StopKeepalive) // the keepalive came, but the position did not move
		}
	}
}

// streamEnded handles the end of the current Subscribe call: a clean end stops the pull;
// UNAUTHENTICATED renews the session once (per progress) and reopens from the last position.
func (s *Subscription) streamEnded(ctx context.Context, recvErr error) error {
	old := s.st
	trailer := old.call.Trailer()
	old.close()
	s.st = nil
	if errors.Is(recvErr, io.EOF) {
		s.stop(StopServer)
		return nil
	}
	if status.Code(recvErr) == codes.DeadlineExceeded && s.pastDeadline() {
		// The call carries the caller's context, whose deadline is the subscription's own: at
		// that deadline gRPC or the server may end the stream before the deadline timer is
		// consulted. It is the same clean stop, not a broken stream.
		s.stop(StopDeadline)
		return nil
	}
	err := statusError("Subscribe", s.req.Topic, recvErr, trailer, s.resuming())
	var se *StatusError
	if errors.As(err, &se) && se.Code == codes.Unauthenticated && !s.reauthed {
		s.reauthed = true
		s.reauths++
		s.c.countReauth()
		s.c.auth.InvalidateSession(old.token)
		s.c.log.Info("pubsub: session expired mid-stream; renewing it and resuming", "topic", s.req.Topic, "delivered", s.delivered)
		return s.open(ctx)
	}
	return err
}

// pastDeadline reports whether the subscription's deadline has passed.
func (s *Subscription) pastDeadline() bool {
	return !s.deadline.IsZero() && !time.Now().Before(s.deadline)
}

// stop ends the pull; reason "" records an error end.
func (s *Subscription) stop(reason StopReason) {
	if s.stopped == "" && reason != "" {
		s.stopped = reason
	}
	if s.st != nil {
		s.st.close()
		s.st = nil
	}
}

// Close ends the subscription (canceling the call). It is safe to call more than once.
func (s *Subscription) Close() error {
	if s.stopped == "" && s.failed == nil {
		s.failed = errClosed
	}
	s.stop("")
	return nil
}

var errClosed = errors.New("pubsub: subscription closed")
