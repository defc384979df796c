// Package salesforce is sf2loki's client for the Salesforce REST API: OAuth
// (JWT bearer and client credentials) with a shared token cache, SOQL and
// Tooling queries that follow nextRecordsUrl, describe and describeGlobal,
// org limits, and streamed downloads of EventLogFile and ApexLog bodies.
//
// The client is built to spend as few API calls as the org's daily budget
// allows: describes are cached per Client, query pages ask for up to 2000
// rows (Sforce-Query-Options), an expired session costs exactly one token
// request, and the daily REQUEST_LIMIT_EXCEEDED is reported at once as
// ErrRequestLimit instead of being retried. Every request is counted per Kind (see Stats) for
// the run report, and the Sforce-Limit-Info header is exposed as APIUsage.
//
// What is retried, and how, is decided in one place (policy.go):
//   - 401 (or 403 INVALID_SESSION_ID): the token is invalidated
//     (compare-and-clear) and the request is retried once with a new one;
//   - 5xx, 429, transport errors and unparseable 2xx bodies (a download typed
//     as an HTML page among them, see htmlPage): exponential backoff with
//     jitter, at most Options.MaxAttempts - 1 times, bounded by the context,
//     and then ErrUnavailable;
//   - REQUEST_LIMIT_EXCEEDED is classified by its message: a concurrent
//     limit ("ConcurrentRequests …", "ConcurrentPerOrgLongTxn …": too many
//     long-running requests right now) is retried with the same backoff for
//     as long as the context's deadline leaves time for the wait (MaxAttempts - 1
//     times without a deadline), then ErrConcurrentLimit and ErrUnavailable;
//     the daily total ("TotalRequests …", or any other message) is
//     ErrRequestLimit, never retried;
//   - everything else (4xx): a typed *APIError, never retried.
//
// SOQL text must be assembled with the helpers in soql.go (QuoteString,
// FormatDateTime, ValidateIdentifier, ValidateFieldPath, ValidateID): they are
// the only place where values are turned into SOQL, so no checkpoint value,
// configured object name or event type can inject into a query.
//
// The package never logs access tokens, client secrets, private keys or JWT
// assertions.
package salesforce
