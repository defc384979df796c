package loki

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Outcome is what happened to one entry of a push.
type Outcome uint8

const (
	// NotDelivered means the entry may not have been stored: push it again
	// later. It is the zero value, so an entry never reads as accepted by
	// accident.
	NotDelivered Outcome = iota
	// Accepted means the receiver answered 200 or 204 for a request holding
	// the entry.
	Accepted
	// Rejected means the receiver (or the client's own guard) refused the
	// entry permanently; resending it unchanged cannot succeed.
	Rejected
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case Rejected:
		return "rejected"
	default:
		return "not_delivered"
	}
}

// Reason classifies a permanent rejection; values are stable and suitable as
// a metric label.
type Reason string

const (
	// ReasonInvalidLabels: the entry's stream labels failed the label guard
	// (a name outside the allowlist or not a valid name, a value that is not
	// UTF-8); nothing was sent. The guard names the other label problems by
	// Loki's reasons (missing_labels, max_label_names_per_series,
	// label_name_too_long, label_value_too_long).
	ReasonInvalidLabels Reason = "invalid_labels"
	// ReasonInvalidTimestamp: the timestamp is zero or outside the int64
	// Unix-nanosecond range; nothing was sent.
	ReasonInvalidTimestamp Reason = "invalid_timestamp"
	// ReasonBadRequest: the receiver answered 400 for a request holding only
	// this entry, with a body that names none of Loki's reasons (a rule the
	// client does not know); the detail quotes it.
	ReasonBadRequest Reason = "bad_request"
	// ReasonTooLarge: the receiver answered 413 for a request holding only
	// this entry.
	ReasonTooLarge Reason = "too_large"
)

// Rejection describes one permanently rejected entry.
type Rejection struct {
	// Index is the entry's position in the slice given to Push.
	Index int
	// Ref is the entry's Ref.
	Ref uint64
	// Reason classifies the rejection.
	Reason Reason
	// Status is the HTTP status of the rejecting answer, 0 when the client
	// refused the entry itself.
	Status int
	// Detail is the guard's error text, or the receiver's answer: whole (up to
	// 64 KiB) when it names one of Loki's reasons, so that the cutoff it
	// states is kept (OldestAcceptable), else an excerpt.
	Detail string
}

// Result reports a push, entry by entry and in total.
type Result struct {
	// Outcomes holds one outcome per input entry, in input order.
	Outcomes []Outcome
	// Accepted lists the Refs of accepted entries, in input order.
	Accepted []uint64
	// Rejected lists the permanently rejected entries, in input order.
	Rejected []Rejection
	// NotDelivered lists the Refs of entries to push again later, in input
	// order.
	NotDelivered []uint64
	// Err says why entries were not delivered; nil when NotDelivered is empty.
	// It wraps ErrNotIngested, ErrUnavailable, ErrAuth, ErrUnexpectedStatus or
	// the context's error, and a *StatusError when the receiver answered.
	Err error
	// Requests counts HTTP attempts, retries included.
	Requests int
	// Retries counts attempts that repeated an earlier one.
	Retries int
	// Splits counts requests cut in halves after a 413, a 400 or 429s (see Options.SplitAfter429).
	Splits int
	// Resent counts entries sent again after a 400 answered a request holding
	// them. Loki stores the valid entries of such a request, so each may be
	// stored twice at a receiver that does not drop exact duplicates. Only
	// rejections the client could not predict cause them.
	Resent int
	// WireBytes sums the request body bytes over all attempts.
	WireBytes int64
	// EncodedBytes sums the uncompressed encoded size of the requests built.
	EncodedBytes int64
	// Truncated counts lines cut by the line cap; Truncations says which, how many line
	// bytes each was sent with, and whether each carries the truncation marker.
	Truncated   int
	Truncations []Truncation
	// InDoubt counts NotDelivered entries the receiver may have stored: an attempt of their
	// request, or of the request they were split from, was written to the receiver and never
	// answered (a timeout, a lost connection, the push's context ended), or a 400 answered a
	// request holding them with others (Loki stores the valid entries of such a request). Only
	// an acceptance clears the doubt: a later answer that stores nothing (a 5xx or 429 until the
	// last try, a 401, a 2xx that did not ingest, a 413 and then its halves refused) leaves them
	// in doubt, and so does the push ending before a half of such a request was sent. They are
	// pushed again later like every NotDelivered entry.
	InDoubt int
	// InDoubtIndexes lists the positions, in the slice given to Push, of the entries InDoubt
	// counts, in ascending order. The other NotDelivered entries were answered without being
	// stored at every attempt (a 401, a 5xx or 429 after the last try, a 2xx that did not
	// ingest) or never sent.
	InDoubtIndexes []int
	// ServerTime is the receiver's clock as the Date header of the push's last answer that
	// carried a valid one states it (one-second resolution; Loki, VictoriaLogs, net/http servers
	// and most proxies send it with every answer, a refusal included); zero when no answer did.
	ServerTime time.Time
	// ClockOffset is how far the receiver's clock was ahead of this host's (negative: behind)
	// when that answer arrived: ServerTime, taken at the middle of its second, minus this host's
	// clock (Options.Now) read as the answer arrived. Zero when ServerTime is.
	ClockOffset time.Duration
}

// Truncation is one line cut by the line cap.
type Truncation struct {
	// Index is the entry's position in the slice given to Push.
	Index int
	// Bytes is the length of the line as sent.
	Bytes int
	// Marked reports that the entry carries the TruncatedMetadataName marker.
	// It does not when the marker would break the receiver's Limits: the
	// receiver takes no structured metadata, or the entry's own is at its
	// count or byte limit. The line is sent cut all the same.
	Marked bool
}

// OK reports whether every entry was accepted.
func (r *Result) OK() bool { return len(r.Accepted) == len(r.Outcomes) }

var (
	// ErrNotIngested: the receiver answered a 2xx other than 200/204 (Loki's
	// 260 "ingestion blocked"): nothing was stored, try again later.
	ErrNotIngested = errors.New("loki: receiver answered 2xx but did not ingest")
	// ErrUnavailable: transport errors, 5xx or 429 persisted through the
	// retries, or the context deadline left no time for the next one.
	ErrUnavailable = errors.New("loki: receiver unavailable")
	// ErrAuth: the receiver answered 401 or 403 (credentials or tenant).
	ErrAuth = errors.New("loki: authentication or authorization failed")
	// ErrUnexpectedStatus: any other status (404, 3xx, 409, 422, …), most
	// likely a configuration error; the entries are held, never dropped.
	ErrUnexpectedStatus = errors.New("loki: unexpected response status")
)

// StatusError carries the receiver's answer to a failed request.
type StatusError struct {
	StatusCode int
	// Body is an excerpt of the response body.
	Body string
}

// Error implements error.
func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("HTTP %d", e.StatusCode)
	}
	return fmt.Sprintf("HTTP %d: %s", e.StatusCode, e.Body)
}

func sortRejections(rs []Rejection) {
	slices.SortFunc(rs, func(a, b Rejection) int { return cmp.Compare(a.Index, b.Index) })
}
