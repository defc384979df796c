package salesforce

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrConfig marks an invalid Options value; the error is a *ConfigError
	// naming the field.
	ErrConfig = errors.New("salesforce: invalid configuration")

	// ErrAuth marks a rejected authentication: the token endpoint refused the
	// grant (see *AuthError), or the API rejected a freshly minted session.
	ErrAuth = errors.New("salesforce: authentication failed")

	// ErrRequestLimit marks 403 REQUEST_LIMIT_EXCEEDED for the org's rolling
	// 24-hour API allocation ("TotalRequests Limit exceeded."), and for any
	// REQUEST_LIMIT_EXCEEDED whose message names no concurrent limit. It is
	// never retried; the job stops calling the org for the run.
	ErrRequestLimit = errors.New("salesforce: org API request limit exceeded")

	// ErrConcurrentLimit marks 403 REQUEST_LIMIT_EXCEEDED for a concurrent
	// limit ("ConcurrentRequests (Concurrent API Requests) Limit exceeded.",
	// "ConcurrentPerOrgLongTxn Limit exceeded."): too many long-running
	// requests in the org at this moment, which clears in seconds. It is
	// retried with backoff for as long as the context allows; when that runs
	// out the error is also ErrUnavailable. It is never ErrRequestLimit.
	ErrConcurrentLimit = errors.New("salesforce: org concurrent request limit exceeded")

	// ErrUnavailable marks a transient failure that outlasted the retries:
	// 5xx answers, transport errors, unparseable 2xx bodies, a response body
	// that stalled or broke off mid-stream.
	ErrUnavailable = errors.New("salesforce: unavailable")

	// ErrBadResponse marks a 2xx answer whose body is not what the endpoint
	// returns (HTML from a proxy, empty, truncated or non-object JSON). The
	// error is a *BadResponseError; after the retries it is also ErrUnavailable.
	ErrBadResponse = errors.New("salesforce: unexpected response body")

	// ErrURITooLong marks HTTP 414/431: the request URL (usually the SOQL
	// text) exceeds Salesforce's ~16 KB limit. Retrying cannot help.
	ErrURITooLong = errors.New("salesforce: request URI too long")

	// ErrBodyTooLarge is returned by a capped download when the body is larger
	// than the cap.
	ErrBodyTooLarge = errors.New("salesforce: body larger than the configured cap")
)

// Error codes Salesforce puts in REST error bodies that this package acts on.
const (
	CodeInvalidSession       = "INVALID_SESSION_ID"
	CodeRequestLimitExceeded = "REQUEST_LIMIT_EXCEEDED"
	CodeBadOAuthToken        = "Bad_OAuth_Token"
	CodeMalformedQuery       = "MALFORMED_QUERY"
	CodeInvalidField         = "INVALID_FIELD"
	CodeInvalidType          = "INVALID_TYPE"
	CodeInsufficientAccess   = "INSUFFICIENT_ACCESS"
	CodeInvalidQueryLocator  = "INVALID_QUERY_LOCATOR"
	CodeBigObjectUnsupported = "BIG_OBJECT_UNSUPPORTED_OPERATION"
	CodeNotFound             = "NOT_FOUND"
)

// ConfigError reports an invalid Options field. Field is the Go field name of
// Options (for example "LoginURL"); the config layer maps it to its key.
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("salesforce: option %s: %s", e.Field, e.Msg)
}

// Is reports whether target is ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// APIError is a non-2xx REST answer. ErrorCode and Message come from the
// first element of Salesforce's error array ([{"message","errorCode"}]);
// for bodies that are not such an array (HTML, empty) ErrorCode is empty and
// Message holds an excerpt of the body, or only its size for a token answer,
// which is never quoted (see Kind.mayCarrySecrets).
type APIError struct {
	StatusCode int
	ErrorCode  string
	Message    string
	// Fields lists the fields named by the error, when Salesforce names any.
	Fields []string
	// Method and Path identify the request (the path carries no query string,
	// so no SOQL text and never a token).
	Method string
	Path   string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "salesforce: %s %s: HTTP %d", e.Method, e.Path, e.StatusCode)
	if e.ErrorCode != "" {
		b.WriteString(" ")
		b.WriteString(e.ErrorCode)
	}
	// SOQL errors span lines (query, caret, position, detail); keep the
	// error on one line for logs. Message keeps the original text.
	if msg := strings.Join(strings.Fields(e.Message), " "); msg != "" {
		b.WriteString(": ")
		b.WriteString(msg)
	}
	return b.String()
}

// Is maps error codes onto the package sentinels, so that
// errors.Is(err, ErrRequestLimit) holds for the daily REQUEST_LIMIT_EXCEEDED,
// errors.Is(err, ErrConcurrentLimit) for a concurrent one, and
// errors.Is(err, ErrURITooLong) for 414/431.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrRequestLimit:
		return e.ErrorCode == CodeRequestLimitExceeded && !concurrentLimit(e.Message)
	case ErrConcurrentLimit:
		return e.ErrorCode == CodeRequestLimitExceeded && concurrentLimit(e.Message)
	case ErrURITooLong:
		return e.StatusCode == http.StatusRequestURITooLong || e.StatusCode == http.StatusRequestHeaderFieldsTooLarge
	}
	return false
}

// concurrentLimit reports whether a REQUEST_LIMIT_EXCEEDED message names one of
// the concurrent limits (their names start with "Concurrent":
// ConcurrentRequests, ConcurrentPerOrgLongTxn) rather than the daily total
// (TotalRequests). A message naming neither counts as the daily limit: the
// safe reading, since retrying an exhausted daily allocation only burns it.
func concurrentLimit(msg string) bool {
	return !strings.Contains(msg, "TotalRequests") && strings.Contains(msg, "Concurrent")
}

// AuthError is an OAuth error answer from the token or userinfo endpoint:
// {"error": Code, "error_description": Description}.
type AuthError struct {
	StatusCode  int
	Code        string
	Description string
}

func (e *AuthError) Error() string {
	msg := fmt.Sprintf("salesforce: authentication rejected: HTTP %d %s", e.StatusCode, e.Code)
	if e.Description != "" {
		msg += ": " + e.Description
	}
	if e.Code == "invalid_request" && strings.Contains(e.Description, "refresh_token") {
		msg += " (the connected app needs the refresh_token/offline_access scope even for the JWT flow)"
	}
	return msg
}

// Is reports whether target is ErrAuth.
func (e *AuthError) Is(target error) bool { return target == ErrAuth }

// BadResponseError describes a 2xx answer whose body could not be decoded.
type BadResponseError struct {
	URL         string // scheme, host and path; no query string
	StatusCode  int
	ContentType string
	Size        int    // the body's length in bytes
	Excerpt     string // the first bytes of the body; empty when Withheld
	// Withheld is set for an answer that may carry credentials (a token answer): its body is
	// described by Size and ContentType, never quoted.
	Withheld bool
	Err      error // the decode error
}

// badResponse is the *BadResponseError for resp, whose body (as read) is b, refused for err.
// The body is quoted unless withhold is set (see Kind.mayCarrySecrets).
func badResponse(resp *http.Response, b []byte, withhold bool, err error) *BadResponseError {
	u := *resp.Request.URL
	u.RawQuery = ""
	bad := &BadResponseError{URL: u.String(), StatusCode: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"),
		Size: len(b), Withheld: withhold, Err: err}
	if !withhold {
		bad.Excerpt = excerpt(b)
	}
	return bad
}

func (e *BadResponseError) Error() string {
	if e.Withheld {
		return fmt.Sprintf("salesforce: unexpected response from %s: HTTP %d, Content-Type %q, %s: %v",
			e.URL, e.StatusCode, e.ContentType, withheldBody(e.Size), e.Err)
	}
	return fmt.Sprintf("salesforce: unexpected response from %s: HTTP %d, Content-Type %q, body starts %q: %v",
		e.URL, e.StatusCode, e.ContentType, e.Excerpt, e.Err)
}

// Is reports whether target is ErrBadResponse.
func (e *BadResponseError) Is(target error) bool { return target == ErrBadResponse }

func (e *BadResponseError) Unwrap() error { return e.Err }

// unavailableError marks err as ErrUnavailable while keeping its own chain.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string   { return e.err.Error() }
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

func unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return &unavailableError{err: err}
}

const excerptLen = 200

// withheldBody describes, in place of an excerpt, the body of an answer that may carry
// credentials.
func withheldBody(size int) string {
	return fmt.Sprintf("a body of %d bytes (not quoted: a token answer may carry credentials)", size)
}

// excerpt returns the first excerptLen bytes of b as valid UTF-8.
func excerpt(b []byte) string {
	if len(b) > excerptLen {
		b = b[:excerptLen]
	}
	return strings.ToValidUTF8(string(b), string(utf8.RuneError))
}

// errorFromBody turns a non-2xx answer into *AuthError (OAuth shape) or
// *APIError (REST array shape, or anything else). An answer of any other shape
// is quoted in the APIError's Message only when quote is set; otherwise only
// its size is given.
func errorFromBody(method, path string, status int, body []byte, quote bool) error {
	trimmed := strings.TrimSpace(string(body))
	if strings.HasPrefix(trimmed, "[") {
		var arr []struct {
			Message   string   `json:"message"`
			ErrorCode string   `json:"errorCode"`
			Fields    []string `json:"fields"`
		}
		if json.Unmarshal(body, &arr) == nil && len(arr) > 0 {
			return &APIError{StatusCode: status, ErrorCode: arr[0].ErrorCode, Message: arr[0].Message,
				Fields: arr[0].Fields, Method: method, Path: path}
		}
	}
	if strings.HasPrefix(trimmed, "{") {
		var oe struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
			// Some REST endpoints answer a single object instead of an array.
			Message   string `json:"message"`
			ErrorCode string `json:"errorCode"`
		}
		if json.Unmarshal(body, &oe) == nil {
			switch {
			case oe.Error != "":
				return &AuthError{StatusCode: status, Code: oe.Error, Description: oe.Description}
			case oe.ErrorCode != "":
				return &APIError{StatusCode: status, ErrorCode: oe.ErrorCode, Message: oe.Message, Method: method, Path: path}
			}
		}
	}
	e := &APIError{StatusCode: status, Message: withheldBody(len(body)), Method: method, Path: path}
	if quote {
		e.Message = excerpt(body)
	}
	// A plain-text answer can still carry a code the policy acts on (userinfo
	// answers 403 "Bad_OAuth_Token"; a proxy may mangle a throttle answer).
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		for _, code := range []string{CodeRequestLimitExceeded, CodeInvalidSession, CodeBadOAuthToken} {
			if strings.Contains(string(body), code) {
				e.ErrorCode = code
				break
			}
		}
	}
	return e
}
