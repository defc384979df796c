package loki

import (
	"net/http"
	"time"
)

// faults are the runtime knobs; guarded by Server.mu.
type faults struct {
	forced        []forced
	forcedLoop    *forced // answer every request with this until cleared
	maxBody       int
	rateBytes     int
	burstBytes    int
	reject        func(Entry) bool
	rejectReason  string
	latency       time.Duration
	holdAnswer    time.Duration
	drops         int
	successStatus int
	maxLine       int
}

type forced struct {
	status     int
	retryAfter string
	body       string
}

// FailNext answers the next n requests with status (nothing is stored),
// adding a Retry-After header when retryAfter is not empty (delta-seconds or
// an HTTP date). n < 0 answers every request so until ClearFaults. Calls
// queue up: FailNext(2, 429, "1") then FailNext(1, 503, "") gives 429, 429,
// 503. Typical statuses: 429, 500, 502, 503, 260 (Loki's ingestion blocked),
// 401.
func (s *Server) FailNext(n int, status int, retryAfter string) {
	f := forced{status: status, retryAfter: retryAfter, body: forcedBody(status)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 0 {
		s.faults.forcedLoop = &f
		return
	}
	for range n {
		s.faults.forced = append(s.faults.forced, f)
	}
}

func forcedBody(status int) string {
	switch status {
	case http.StatusNoContent, http.StatusNotModified:
		return ""
	case 260:
		return "ingestion blocked for user fake until '2099-01-01 00:00:00 +0000 UTC' with status code '260'"
	case http.StatusTooManyRequests:
		return "Ingestion rate limit exceeded (injected)"
	default:
		return http.StatusText(status) + " (injected)"
	}
}

func (s *Server) nextForced() (forced, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults.forced) > 0 {
		f := s.faults.forced[0]
		s.faults.forced = s.faults.forced[1:]
		return f, true
	}
	if s.faults.forcedLoop != nil {
		return *s.faults.forcedLoop, true
	}
	return forced{}, false
}

// SetMaxBodyBytes answers 413 to request bodies larger than n bytes as
// received (compressed); n <= 0 restores Options.MaxRecvBytes.
func (s *Server) SetMaxBodyBytes(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.maxBody = n
}

func (s *Server) maxBodyBytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults.maxBody > 0 {
		return s.faults.maxBody
	}
	return s.opts.MaxRecvBytes
}

// SetIngestionLimit sets the tenant rate limit (bytes/s of line + metadata,
// burst in bytes); a request whose bytes exceed the burst gets 429 every time,
// with nothing stored. Zeros restore the Options values.
func (s *Server) SetIngestionLimit(rateBytes, burstBytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.rateBytes, s.faults.burstBytes = rateBytes, burstBytes
	s.tokensAt = time.Time{}
}

// RejectEntries refuses every entry for which pred returns true with a 400
// carrying reason, while the other entries of the same request are stored
// (Loki's partial acceptance). A nil pred stops rejecting.
func (s *Server) RejectEntries(pred func(Entry) bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if reason == "" {
		reason = "injected"
	}
	s.faults.reject, s.faults.rejectReason = pred, reason
}

// SetAllowStructuredMetadata switches Loki's allow_structured_metadata; when
// false, every entry carrying metadata is refused (400
// disallowed_structured_metadata).
func (s *Server) SetAllowStructuredMetadata(allow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allowSMeta = allow
}

// SetLatency delays every answer by d before the request is processed; a
// client that gives up meanwhile has stored nothing.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.latency = d
}

func (s *Server) latency() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.latency
}

// HoldAnswers makes every request wait d after it was processed and stored, before the answer
// is sent (or until the client gives up): a push cut meanwhile has landed although its client
// never hears so.
func (s *Server) HoldAnswers(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.holdAnswer = d
}

func (s *Server) holdAnswer() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.holdAnswer
}

// DropResponses makes the next n requests lose their answer: they are
// processed and stored, then the connection is closed without a response (the
// in-process transport returns an error instead).
func (s *Server) DropResponses(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.drops += n
}

func (s *Server) takeDrop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults.drops > 0 {
		s.faults.drops--
		return true
	}
	return false
}

// ClearFaults removes every injected fault and restores the Options
// (structured metadata allowance included).
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = faults{}
	s.allowSMeta = !s.opts.DisallowStructuredMetadata
	s.tokensAt = time.Time{}
}

// SetSuccessStatus sets the status of a fully successful push: 204 (Loki,
// the default when 0) or 200 (some proxies and older receivers).
func (s *Server) SetSuccessStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.successStatus = status
}

// SetMaxLineBytes changes max_line_size while the receiver serves (an operator raising or
// lowering the limit); n <= 0 restores Options.MaxLineBytes.
func (s *Server) SetMaxLineBytes(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.maxLine = n
}
