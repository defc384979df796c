package pubsub

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sf2loki/sf2loki/salesforce"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrReplayLost marks a stored replay id the server refuses: expired (older than the
	// retention window, about 72 hours), purged, from before an org migration, or otherwise
	// invalid. Resuming from it is impossible; the caller's replay_lost policy decides.
	ErrReplayLost = errors.New("pubsub: replay id invalid or outside the retention window")

	// ErrUnauthenticated marks a call the server refused as UNAUTHENTICATED even with a freshly
	// minted session (the session was renewed once and refused again). It also matches
	// salesforce.ErrAuth.
	ErrUnauthenticated = errors.New("pubsub: unauthenticated")

	// ErrTopic marks a topic that does not exist or that the integration user may not subscribe
	// to (NOT_FOUND, PERMISSION_DENIED, or GetTopic's can_subscribe false). Retrying cannot help.
	ErrTopic = errors.New("pubsub: topic unavailable to this user")

	// ErrSchema marks an event schema that could not be fetched or parsed. Events are never
	// skipped for it: the subscription ends and the next run replays from the last commit.
	ErrSchema = errors.New("pubsub: event schema unavailable")

	// ErrDecode marks one event payload that does not decode with its schema. The caller skips
	// that event (counted) and keeps going.
	ErrDecode = errors.New("pubsub: undecodable event payload")
)

// ErrUnavailable is salesforce.ErrUnavailable: the service is down or the stream broke
// (UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, INTERNAL, a transport error).
var ErrUnavailable = salesforce.ErrUnavailable

// Values of the error-code trailer Salesforce attaches to failed calls.
const (
	CodeAuthError             = "sfdc.platform.eventbus.grpc.service.auth.error"
	CodeReplayIDCorrupted     = "sfdc.platform.eventbus.grpc.subscription.fetch.replayid.corrupted"
	CodeReplayIDValidation    = "sfdc.platform.eventbus.grpc.subscription.fetch.replayid.validation.failed"
	CodeRequestedEventsBad    = "sfdc.platform.eventbus.grpc.subscription.fetch.requested.events.invalid"
	CodeServiceUnavailable    = "sfdc.platform.eventbus.grpc.service.unavailable"
	CodeConcurrentClientLimit = "sfdc.platform.eventbus.grpc.concurrent.client.limit.exceeded"
	CodeTopicMismatch         = "sfdc.platform.eventbus.grpc.subscription.topic.mismatch"
	CodeTopicNotFound         = "sfdc.platform.eventbus.grpc.topic.not.found"
	CodeTopicPermission       = "sfdc.platform.eventbus.grpc.topic.permission.denied"
	CodeSchemaNotFound        = "sfdc.platform.eventbus.grpc.schema.not.found"
)

// TrailerErrorCode and TrailerRPCID are the trailer keys of a failed call.
const (
	TrailerErrorCode = "error-code"
	TrailerRPCID     = "rpc-id"
)

// StatusError is a failed Pub/Sub call: the gRPC status and Salesforce's error-code trailer.
type StatusError struct {
	// Op is the call (Subscribe, GetTopic, GetSchema).
	Op string
	// Topic is the topic the call was about, if any.
	Topic string
	// Code is the gRPC status code and Message its description.
	Code    codes.Code
	Message string
	// ErrorCode is the error-code trailer (empty when the server sent none) and RPCID the
	// rpc-id trailer, for Salesforce support.
	ErrorCode string
	RPCID     string
	// HadTrailers reports whether the failed call carried any trailer at all.
	HadTrailers bool
	// Resuming reports that the call was a Subscribe resuming from a stored replay id (CUSTOM).
	Resuming bool
}

func (e *StatusError) Error() string {
	var b strings.Builder
	b.WriteString("pubsub: ")
	b.WriteString(e.Op)
	if e.Topic != "" {
		b.WriteString(" ")
		b.WriteString(e.Topic)
	}
	fmt.Fprintf(&b, ": %s: %s", e.Code, e.Message)
	if e.ErrorCode != "" {
		fmt.Fprintf(&b, " (error-code %s)", e.ErrorCode)
	}
	if e.RPCID != "" {
		fmt.Fprintf(&b, " (rpc-id %s)", e.RPCID)
	}
	return b.String()
}

// Is maps the status onto the package's sentinels (the retry and replay policy lives here).
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrReplayLost:
		return e.replayLost()
	case ErrUnauthenticated, salesforce.ErrAuth:
		return e.Code == codes.Unauthenticated
	case ErrTopic:
		return e.Code == codes.NotFound && e.Op != "GetSchema" || e.Code == codes.PermissionDenied
	case ErrSchema:
		return e.Op == "GetSchema"
	case ErrUnavailable:
		switch e.Code {
		case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Internal, codes.Aborted, codes.Unknown:
			return true
		}
	}
	return false
}

// replayLost applies the replay policy: INVALID_ARGUMENT while resuming
// from a stored id is a lost replay position when the error-code trailer says the replay id is
// corrupted, or when the server sent no trailer at all (older servers); INVALID_ARGUMENT with
// another error code keeps the position (it is a different problem, reported as is).
func (e *StatusError) replayLost() bool {
	if e.Code != codes.InvalidArgument || !e.Resuming {
		return false
	}
	if strings.Contains(e.ErrorCode, "replayid.corrupted") {
		return true
	}
	return !e.HadTrailers
}

// statusError converts a gRPC error and the call's trailers into a *StatusError (a context
// error is returned as is).
func statusError(op, topic string, err error, trailer metadata.MD, resuming bool) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("pubsub: %s %s: %w", op, topic, errors.Join(ErrUnavailable, err))
	}
	if st.Code() == codes.Canceled {
		return fmt.Errorf("pubsub: %s %s: %w", op, topic, err)
	}
	se := &StatusError{Op: op, Topic: topic, Code: st.Code(), Message: st.Message(), HadTrailers: len(trailer) > 0, Resuming: resuming}
	if v := trailer.Get(TrailerErrorCode); len(v) > 0 {
		se.ErrorCode = v[0]
	}
	if v := trailer.Get(TrailerRPCID); len(v) > 0 {
		se.RPCID = v[0]
	}
	return se
}
