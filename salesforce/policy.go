package salesforce

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"
)

// This file is the whole retry policy of the package: what each outcome of an
// HTTP attempt leads to. Nothing else in the package decides to retry.

// action is what the client does after one HTTP attempt.
type action int

const (
	// actReturn hands the answer (success or error) to the caller.
	actReturn action = iota
	// actBackoff retries after an exponential, jittered wait, at most
	// Options.MaxAttempts - 1 times and never past the context's deadline.
	actBackoff
	// actReauth invalidates the token used (compare-and-clear), mints a new
	// one and repeats the request exactly once.
	actReauth
	// actWaitLimit retries a concurrent-request limit (ErrConcurrentLimit)
	// after the same backoff for as long as the context allows (see
	// limitWait): such a limit clears when other requests of the org finish.
	actWaitLimit
)

// statusActions maps HTTP statuses to actions; statuses not listed are
// actReturn (5xx is handled by range below). 403 depends on the error code,
// see classify.
var statusActions = map[int]action{
	http.StatusUnauthorized:    actReauth,
	http.StatusRequestTimeout:  actBackoff,
	http.StatusTooManyRequests: actBackoff,
	// 501 Not Implemented will not change on retry.
	http.StatusNotImplemented: actReturn,
}

// reauthCodes are error codes in a 403 body that mean "your session is not
// valid" rather than "you lack a permission".
var reauthCodes = map[string]bool{
	CodeInvalidSession: true,
	CodeBadOAuthToken:  true,
}

// classify decides the action for one attempt: resp is the response (nil on
// transport errors), err the transport error or the error derived from the
// response by the response handler.
func classify(ctx context.Context, resp *http.Response, err error) action {
	// The caller's context ending is final. A transport timeout also
	// matches context.DeadlineExceeded, but while ctx is alive it is just a
	// slow server: transient.
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return actReturn
	}
	if err != nil {
		var apiErr *APIError
		var authErr *AuthError
		switch {
		case errors.Is(err, ErrConcurrentLimit):
			return actWaitLimit
		case errors.As(err, &apiErr):
			return classifyStatus(apiErr.StatusCode, apiErr.ErrorCode)
		case errors.As(err, &authErr):
			if authErr.StatusCode >= 500 {
				return actBackoff
			}
			return actReturn // the grant was refused: retrying cannot help
		case errors.Is(err, ErrBadResponse):
			return actBackoff
		case isPermanentTransportError(err):
			return actReturn
		default:
			// Connection refused or reset, timeouts, a body that broke off.
			return actBackoff
		}
	}
	if resp == nil {
		return actReturn
	}
	// Without a decoded body we only know the status; a 403 is decided once
	// the response handler has read its error code.
	if resp.StatusCode == http.StatusForbidden {
		return actReturn
	}
	return classifyStatus(resp.StatusCode, "")
}

func classifyStatus(status int, code string) action {
	if status == http.StatusForbidden {
		if reauthCodes[code] {
			return actReauth
		}
		return actReturn // REQUEST_LIMIT_EXCEEDED, INSUFFICIENT_ACCESS, …
	}
	if a, ok := statusActions[status]; ok {
		return a
	}
	if status >= 500 || status == 0 {
		return actBackoff
	}
	return actReturn
}

// isPermanentTransportError reports transport failures that a retry cannot
// fix: bad certificates, malformed URLs and schemes.
func isPermanentTransportError(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
	)
	if errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify) {
		return true
	}
	var ue *url.Error
	return errors.As(err, &ue) && ue.Op == "parse"
}

// backoff is the wait before retry number attempt (0-based): exponential from
// min, capped at max, with full jitter over the upper half so that clients
// that failed together do not come back together.
func backoff(lo, hi time.Duration, attempt int, _ *http.Response) time.Duration {
	if hi <= 0 {
		return 0
	}
	d := lo
	for i := 0; i < attempt && d < hi; i++ {
		d *= 2
	}
	if d > hi || d <= 0 {
		d = hi
	}
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// limitWait is the wait before retry number attempt (0-based) of a
// concurrent-request limit, and whether to retry at all: the usual backoff,
// for as long as the context's deadline leaves time for the wait (the run's
// deadline bounds it, not a count); a context without a deadline gets
// MaxAttempts - 1 retries like any transient failure.
func limitWait(ctx context.Context, lo, hi time.Duration, retryMax, attempt int) (time.Duration, bool) {
	d := backoff(lo, hi, attempt, nil)
	if dl, ok := ctx.Deadline(); ok {
		return d, time.Until(dl) > d
	}
	return d, attempt < retryMax
}

// needsReauth reports whether err, returned for an authorized request, means
// the session was rejected: the request is then repeated once with a new token.
func needsReauth(err error) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return classifyStatus(apiErr.StatusCode, apiErr.ErrorCode) == actReauth
	}
	var authErr *AuthError
	return errors.As(err, &authErr) && authErr.StatusCode == http.StatusUnauthorized
}
