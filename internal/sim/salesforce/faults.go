package salesforce

import (
	"math/rand/v2"
	"net/http"
	"time"
)

// CallKind classifies requests for accounting and fault targeting.
type CallKind string

// Request kinds counted by the org.
const (
	KindToken            CallKind = "token"              // POST /services/oauth2/token
	KindUserInfo         CallKind = "userinfo"           // /services/oauth2/userinfo
	KindIdentity         CallKind = "identity"           // /id/<org>/<user>
	KindVersions         CallKind = "versions"           // /services/data/
	KindQuery            CallKind = "query"              // /query?q=
	KindQueryAll         CallKind = "query_all"          // /queryAll?q=
	KindQueryMore        CallKind = "query_more"         // /query/<locator> (and queryAll)
	KindToolingQuery     CallKind = "tooling_query"      // /tooling/query?q=
	KindToolingQueryMore CallKind = "tooling_query_more" // /tooling/query/<locator>
	KindDescribeGlobal   CallKind = "describe_global"    // /sobjects/
	KindDescribe         CallKind = "describe"           // /sobjects/X/describe and /sobjects/X
	KindRetrieve         CallKind = "retrieve"           // /sobjects/X/<id>
	KindLimits           CallKind = "limits"             // /limits
	KindDownload         CallKind = "download"           // /sobjects/EventLogFile/<id>/LogFile
	KindApexLogBody      CallKind = "apexlog_body"       // /sobjects/ApexLog/<id>/Body
	KindOther            CallKind = "other"              // anything else (404)
)

// countsAgainstLimit reports whether a call consumes DailyApiRequests.
func (k CallKind) countsAgainstLimit() bool {
	switch k {
	case KindToken, KindUserInfo, KindIdentity, KindVersions, KindLimits, KindOther:
		return false
	}
	return true
}

// Fault is a misbehavior injected into matching requests.
type Fault struct {
	// Kind selects the requests affected ("" = every kind).
	Kind CallKind
	// Times is how many matching requests are affected (0 = 1, negative =
	// until ClearFaults).
	Times int
	// After lets this many matching requests pass untouched before the fault
	// applies (a fault in the middle of a run).
	After int
	// Status answers with this HTTP status (e.g. 500, 503, 404) and Body.
	Status int
	// Body is the response body for Status (default: a Salesforce-style
	// JSON error array matching the status).
	Body string
	// Limit selects the message of a 403 REQUEST_LIMIT_EXCEEDED default body
	// (default LimitTotalRequests, the daily allocation).
	Limit RequestLimit
	// HTMLBody answers 200 with an HTML maintenance page.
	HTMLBody bool
	// Delay waits this long before answering (honors the request context).
	Delay time.Duration
	// ExpireSession expires the caller's session before the request is
	// handled, so it answers 401 INVALID_SESSION_ID.
	ExpireSession bool
	// Reset aborts the connection after ResetAfterBytes bytes of the response
	// body have been sent (downloads: EventLogFile and ApexLog bodies).
	Reset           bool
	ResetAfterBytes int64
}

// AddFault queues a fault. Faults apply in the order added; a request
// consumes at most one (the first matching).
func (o *Org) AddFault(f Fault) {
	if f.Times == 0 {
		f.Times = 1
	}
	o.statMu.Lock()
	defer o.statMu.Unlock()
	o.faults = append(o.faults, &f)
}

// RequestLimit is the message of a 403 REQUEST_LIMIT_EXCEEDED answer: which
// limit was exceeded.
type RequestLimit string

// The request limits Salesforce reports with REQUEST_LIMIT_EXCEEDED. The
// daily total lasts until the rolling 24-hour usage falls; the concurrent
// ones (too many requests of 20 s or more running in the org at once) clear
// as soon as some of them finish.
const (
	LimitTotalRequests      RequestLimit = "TotalRequests Limit exceeded."
	LimitConcurrentRequests RequestLimit = "ConcurrentRequests (Concurrent API Requests) Limit exceeded."
	LimitConcurrentLongTxn  RequestLimit = "ConcurrentPerOrgLongTxn Limit exceeded."
)

// RequestLimitNext answers the next n requests of kind ("" = any REST call)
// with 403 REQUEST_LIMIT_EXCEEDED for limit (negative n: until ClearFaults).
func (o *Org) RequestLimitNext(kind CallKind, n int, limit RequestLimit) {
	o.AddFault(Fault{Kind: kind, Times: n, Status: http.StatusForbidden, Limit: limit})
}

// FailNext answers the next n requests of kind ("" = any) with status.
func (o *Org) FailNext(kind CallKind, n int, status int) {
	o.AddFault(Fault{Kind: kind, Times: n, Status: status})
}

// HTMLNext answers the next n requests of kind with 200 and an HTML body.
func (o *Org) HTMLNext(kind CallKind, n int) {
	o.AddFault(Fault{Kind: kind, Times: n, HTMLBody: true})
}

// ResetDownloadsAfter aborts the next n downloads (EventLogFile LogFile)
// after afterBytes bytes of body.
func (o *Org) ResetDownloadsAfter(afterBytes int64, n int) {
	o.AddFault(Fault{Kind: KindDownload, Times: n, Reset: true, ResetAfterBytes: afterBytes})
}

// ExpireSessionBefore expires the caller's session right before the next n
// requests of kind, so they answer 401 (e.g. mid-pagination: KindQueryMore).
func (o *Org) ExpireSessionBefore(kind CallKind, n int) {
	o.AddFault(Fault{Kind: kind, Times: n, ExpireSession: true})
}

// ClearFaults removes every queued fault and the latency.
func (o *Org) ClearFaults() {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	o.faults = nil
	o.latency, o.latencyMax = 0, 0
}

// SetLatency delays every request by d (0 = none).
func (o *Org) SetLatency(d time.Duration) {
	o.SetLatencyRange(d, d)
}

// SetLatencyRange delays every request by a time drawn uniformly from [least, most], as a
// real org answers (50-200 ms for a REST call), from the org's seed.
func (o *Org) SetLatencyRange(least, most time.Duration) {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	o.latency, o.latencyMax = least, max(least, most)
	if o.latencyRand == nil {
		o.latencyRand = rand.New(rand.NewPCG(uint64(o.opts.Seed), 0x1a7e)) //nolint:gosec // a simulation
	}
}

// drawLatency returns the delay of one request (statMu held).
func (o *Org) drawLatency() time.Duration {
	if o.latencyMax <= o.latency {
		return o.latency
	}
	return o.latency + time.Duration(o.latencyRand.Int64N(int64(o.latencyMax-o.latency)+1))
}

// SetConcurrentLimit answers a REST request that arrives while n others are being answered with
// 403 REQUEST_LIMIT_EXCEEDED for the concurrent-requests limit (0 = no limit), as an org does
// over its concurrent-request allowance.
func (o *Org) SetConcurrentLimit(n int) {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	o.concLimit = n
}

// PeakConcurrent returns the most REST requests the org has answered at once (those refused by
// SetConcurrentLimit included).
func (o *Org) PeakConcurrent() int {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	return o.inflightMax
}

// enter counts a REST request in; it reports false when the request is over the concurrent
// limit. Call leave when the answer is written.
func (o *Org) enter() bool {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	o.inflight++
	o.inflightMax = max(o.inflightMax, o.inflight)
	return o.concLimit <= 0 || o.inflight <= o.concLimit
}

func (o *Org) leave() {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	o.inflight--
}

// SetRequestLimitExceeded makes every REST call answer 403
// REQUEST_LIMIT_EXCEEDED while on (the daily limit is also enforced from
// the counters).
func (o *Org) SetRequestLimitExceeded(on bool) {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	o.limitExceeded = on
}

// SetDailyAPILimit sets DailyApiRequests.Max.
func (o *Org) SetDailyAPILimit(limit int) {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	o.apiMax = limit
}

// SetAPIUsage sets the number of API requests already used today.
func (o *Org) SetAPIUsage(used int) {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	o.apiUsed = used
}

// APIUsage returns DailyApiRequests used and max.
func (o *Org) APIUsage() (used, limit int) {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	return o.apiUsed, o.apiMax
}

// takeFault consumes the first fault matching kind and returns it with the
// global latency.
func (o *Org) takeFault(kind CallKind) (*Fault, time.Duration) {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	for i, f := range o.faults {
		if f.Kind != "" && f.Kind != kind {
			continue
		}
		if f.After > 0 {
			f.After--
			return nil, o.drawLatency()
		}
		cp := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				o.faults = append(o.faults[:i:i], o.faults[i+1:]...)
			}
		}
		return &cp, o.drawLatency()
	}
	return nil, o.drawLatency()
}

func (o *Org) count(kind CallKind) {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	o.calls[kind]++
}

// Calls returns a copy of the request counters by kind (every request is
// counted, whatever its outcome).
func (o *Org) Calls() map[CallKind]int {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	out := make(map[CallKind]int, len(o.calls))
	for k, v := range o.calls {
		out[k] = v
	}
	return out
}

// CallCount returns the number of requests of one kind.
func (o *Org) CallCount(kind CallKind) int {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	return o.calls[kind]
}

// TotalCalls returns the number of requests of every kind.
func (o *Org) TotalCalls() int {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	n := 0
	for _, v := range o.calls {
		n += v
	}
	return n
}

// ResetCalls zeroes the request counters (not the API usage).
func (o *Org) ResetCalls() {
	o.statMu.Lock()
	defer o.statMu.Unlock()
	o.calls = map[CallKind]int{}
}
