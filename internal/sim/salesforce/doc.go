// Package salesforce is a simulated Salesforce org for tests, benchmarks and
// `sf2loki demo`. It mirrors Salesforce, not sf2loki's client (it never
// imports the client package); importers alias it simsf.
//
//	org := simsf.New(simsf.Options{Now: clock.Now, Seed: 1})
//	org.AddUser("integration@example.com", simsf.AllPermissions())
//	kp, _ := simsf.NewKeyPair(time.Now())
//	_ = org.AddJWTApp("client-id", kp.Certificate, "integration@example.com")
//	_ = org.Populate(simsf.DataSet{}) // or Insert / AddEventLogFile / AddApexLog
//	srv, _ := org.Start()              // or httptest.NewServer(org.Handler())
//	defer srv.Close()
//
// # What it serves
//
//   - POST /services/oauth2/token: JWT bearer (RS256 verified against the
//     app's certificate; iss, sub among pre-authorized users, aud equal to the
//     org's URL, exp window) and client credentials (refused on the generic
//     login hosts). Errors are {"error","error_description"} with HTTP 400.
//     Token responses carry access_token, instance_url, id (identity URL with
//     the 18-character org id), token_type, issued_at, signature, scope.
//     Sessions slide and expire (Options.SessionLifetime, ExpireSessions).
//   - /services/oauth2/userinfo and the identity URL /id/<org>/<user>.
//   - /services/data/vXX.X/: query, queryAll, tooling/query and their
//     nextRecordsUrl cursors (Sforce-Query-Options: batchSize=200..2000),
//     sobjects (describeGlobal), sobjects/X/describe, sobjects/X/<id>,
//     limits, sobjects/EventLogFile/<id>/LogFile (CSV, gzip on request) and
//     [tooling/]sobjects/ApexLog/<id>/Body. Every REST answer carries
//     Sforce-Limit-Info: api-usage=N/M and a Date header from Options.Now.
//     Errors are Salesforce's [{"message","errorCode"}] arrays; request URIs
//     over Options.MaxURLLength answer 414 with an HTML body.
//
// # SOQL subset
//
// SELECT of fields, relationship fields (LogUser.Username), FIELDS(ALL |
// STANDARD | CUSTOM) (ALL and CUSTOM need LIMIT <= 200), COUNT(), COUNT(f),
// MIN, MAX, COUNT_DISTINCT with aliases; FROM one object; WHERE with = != <>
// < <= > >=, IN, NOT IN, LIKE, NOT, AND / OR (never mixed without
// parentheses, as in SOQL), literals: 'strings' with backslash escapes,
// numbers, TRUE/FALSE/NULL, datetimes 2026-01-01T00:00:00[.sss](Z|±hh:mm)
// (the +0000 form Salesforce itself returns is MALFORMED_QUERY), dates,
// TODAY / YESTERDAY / LAST_N_DAYS:n; GROUP BY; ORDER BY f [ASC|DESC] [NULLS
// FIRST|LAST], ...; LIMIT; OFFSET (<= 2000). Names resolve case-insensitively
// against the schema and the user's permissions (object access, and
// field-level security: Permissions.HiddenFields are left out of describe and
// FIELDS() and answer "No such column" when named): MALFORMED_QUERY,
// INVALID_FIELD (unknown, duplicate, not filterable/sortable/groupable,
// wrong literal type), INVALID_TYPE (unknown object or no access),
// INVALID_QUERY_FILTER_OPERATOR (bad id literal), NUMBER_OUTSIDE_VALID_RANGE.
//
// Big Objects (LoginEvent, ApiEvent): no aggregates, ORDER BY must start
// with EventDate DESC, no nextRecordsUrl (done:true), at most
// Options.BigObjectMaxRows rows, rows in index order (EventDate DESC,
// EventIdentifier ASC), each with the empty Id 000000000000000AAA and an
// attributes.url built from it, as real orgs answer (Options.BigObjectRealIDs
// gives them their own). BigObjectStrict (default) also allows filters only
// on EventDate / EventIdentifier with = < <= > >= and EventIdentifier only
// after an EventDate equality, and ORDER BY EventDate DESC alone;
// BigObjectPermissive accepts what the Python original assumed (Id NOT IN,
// !=, any filter, extra ORDER BY keys).
//
// # Data
//
// Objects: User, EventLogFile, LoginHistory, SetupAuditTrail,
// Audit_Event__c (custom), LoginEvent and ApiEvent (Big Objects),
// ApiAnomalyEventStore, ApexLog (data and Tooling), TraceFlag (Tooling), and
// streaming-only channels listed by describeGlobal (LoginEventStream, ...).
// EventLogFile bodies are generated while streaming from precomputed row
// templates (hundreds of MB/s, a 1 GiB file never held in memory), quoted
// CSV with embedded commas, quotes and newlines, TIMESTAMP and
// TIMESTAMP_DERIVED columns inside the LogDate bucket; a file's length is
// known up front (LogFileLength). Everything is deterministic in
// Options.Seed and the clock.
//
// # Accounting and faults
//
// Every request is counted by CallKind (Calls, CallCount, ResetCalls);
// REST calls consume DailyApiRequests (SetDailyAPILimit, SetAPIUsage,
// SetRequestLimitExceeded). Faults (AddFault, FailNext, HTMLNext,
// ResetDownloadsAfter, ExpireSessionBefore, SetLatency) are goroutine-safe
// and can be changed while serving.
//
// The same Org will later also serve the Pub/Sub gRPC API
// (Permissions.Topics already models topic access).
package salesforce
