package salesforce

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// route is a classified request path.
type route struct {
	kind    CallKind
	version string // "62.0" for /services/data/vXX.X paths
	badVer  bool
	tooling bool
	all     bool   // queryAll
	locator string // query_more
	object  string // describe, retrieve, downloads
	id      string // retrieve, downloads
	basic   bool   // /sobjects/X (basic info) rather than describe
}

var versionRE = regexp.MustCompile(`^v(\d{2,3}\.\d)$`)

func (o *Org) parseRoute(path string) route {
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	switch {
	case path == "/services/oauth2/token":
		return route{kind: KindToken}
	case path == "/services/oauth2/userinfo":
		return route{kind: KindUserInfo}
	case strings.HasPrefix(path, "/id/"):
		return route{kind: KindIdentity}
	case path == "/services/data":
		return route{kind: KindVersions}
	case !strings.HasPrefix(path, "/services/data/"):
		return route{kind: KindOther}
	}
	segs := strings.Split(strings.TrimPrefix(path, "/services/data/"), "/")
	rt := route{kind: KindOther}
	m := versionRE.FindStringSubmatch(segs[0])
	if m == nil {
		rt.badVer = true
		return rt
	}
	rt.version = m[1]
	if v, _ := strconv.ParseFloat(rt.version, 64); v < 20 || v > o.apiVer {
		rt.badVer = true
	}
	segs = segs[1:]
	if len(segs) > 0 && segs[0] == "tooling" {
		rt.tooling = true
		segs = segs[1:]
	}
	n := len(segs)
	switch {
	case n == 1 && segs[0] == "query":
		rt.kind = KindQuery
		if rt.tooling {
			rt.kind = KindToolingQuery
		}
	case n == 2 && segs[0] == "query":
		rt.kind, rt.locator = KindQueryMore, segs[1]
		if rt.tooling {
			rt.kind = KindToolingQueryMore
		}
	case n == 1 && segs[0] == "queryAll" && !rt.tooling:
		rt.kind, rt.all = KindQueryAll, true
	case n == 2 && segs[0] == "queryAll" && !rt.tooling:
		rt.kind, rt.locator, rt.all = KindQueryMore, segs[1], true
	case n == 1 && segs[0] == "sobjects":
		rt.kind = KindDescribeGlobal
	case n == 2 && segs[0] == "sobjects":
		rt.kind, rt.object, rt.basic = KindDescribe, segs[1], true
	case n == 3 && segs[0] == "sobjects" && segs[2] == "describe":
		rt.kind, rt.object = KindDescribe, segs[1]
	case n == 3 && segs[0] == "sobjects":
		rt.kind, rt.object, rt.id = KindRetrieve, segs[1], segs[2]
	case n == 4 && segs[0] == "sobjects" && strings.EqualFold(segs[1], "EventLogFile") && segs[3] == "LogFile" && !rt.tooling:
		rt.kind, rt.object, rt.id = KindDownload, segs[1], segs[2]
	case n == 4 && segs[0] == "sobjects" && strings.EqualFold(segs[1], "ApexLog") && segs[3] == "Body":
		rt.kind, rt.object, rt.id = KindApexLogBody, segs[1], segs[2]
	case n == 1 && segs[0] == "limits" && !rt.tooling:
		rt.kind = KindLimits
	}
	return rt
}

const maintenancePage = `<!DOCTYPE html><html><head><title>Maintenance</title></head><body><h1>Down for Maintenance</h1><p>This site is temporarily unavailable.</p></body></html>`

func writeHTML(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/html;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func writeFaultStatus(w http.ResponseWriter, f *Fault) {
	if f.Body != "" {
		ct := "application/json;charset=UTF-8"
		if !strings.HasPrefix(strings.TrimSpace(f.Body), "[") && !strings.HasPrefix(strings.TrimSpace(f.Body), "{") {
			ct = "text/html;charset=UTF-8"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(f.Status)
		_, _ = w.Write([]byte(f.Body))
		return
	}
	switch f.Status {
	case http.StatusServiceUnavailable:
		writeAPIError(w, newAPIError(f.Status, CodeServerUnavailable, "Server temporarily unavailable"))
	case http.StatusNotFound:
		writeAPIError(w, newAPIError(f.Status, CodeNotFound, "The requested resource does not exist"))
	case http.StatusUnauthorized:
		writeAPIError(w, newAPIError(f.Status, CodeInvalidSessionID, "Session expired or invalid"))
	case http.StatusForbidden:
		msg := LimitTotalRequests
		if f.Limit != "" {
			msg = f.Limit
		}
		writeAPIError(w, newAPIError(f.Status, CodeRequestLimitExceeded, string(msg)))
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		writeHTML(w, f.Status, "<html><body><h1>"+strconv.Itoa(f.Status)+" "+http.StatusText(f.Status)+"</h1></body></html>")
	default:
		writeAPIError(w, newAPIError(f.Status, CodeUnknownException,
			"An unexpected error occurred. Please include this ErrorId if you contact support: 1804518442-12345 (-1234567890)"))
	}
}

func (o *Org) serveHTTP(w http.ResponseWriter, r *http.Request) {
	now := o.now()
	w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
	rt := o.parseRoute(r.URL.Path)
	o.count(rt.kind)
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	if len(uri) > o.opts.MaxURLLength {
		writeHTML(w, http.StatusRequestURITooLong, "<html><head><title>414 Request-URI Too Large</title></head><body><h1>Request-URI Too Large</h1><p>The requested URL's length exceeds the capacity limit for this server.</p></body></html>")
		return
	}
	if rest := rt.kind != KindToken && rt.kind != KindUserInfo && rt.kind != KindIdentity && rt.kind != KindVersions; rest {
		ok := o.enter()
		defer o.leave()
		if !ok {
			writeFaultStatus(w, &Fault{Status: http.StatusForbidden, Limit: LimitConcurrentRequests})
			return
		}
	}
	f, delay := o.takeFault(rt.kind)
	if f != nil {
		delay += f.Delay
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
		now = o.now()
		w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
	}
	var reset *Fault
	if f != nil {
		if f.ExpireSession {
			o.expireRequestSession(r)
		}
		switch {
		case f.Status != 0:
			writeFaultStatus(w, f)
			return
		case f.HTMLBody:
			writeHTML(w, http.StatusOK, maintenancePage)
			return
		case f.Reset:
			reset = f
		}
	}
	o.opts.Logger.Debug("simsf request", "method", r.Method, "kind", string(rt.kind), "path", r.URL.Path)
	switch rt.kind {
	case KindToken:
		o.handleToken(w, r, now)
	case KindUserInfo, KindIdentity:
		o.handleUserInfo(w, r, now)
	case KindVersions:
		o.handleVersions(w)
	default:
		o.serveREST(w, r, rt, now, reset)
	}
}

func (o *Org) handleVersions(w http.ResponseWriter) {
	var out []map[string]string
	for v := 200; v <= int(o.apiVer*10+0.5); v += 10 {
		s := strconv.Itoa(v/10) + ".0"
		out = append(out, map[string]string{"label": "API " + s, "url": "/services/data/v" + s, "version": s})
	}
	writeJSON(w, http.StatusOK, out)
}

func (o *Org) serveREST(w http.ResponseWriter, r *http.Request, rt route, now time.Time, reset *Fault) {
	if rt.badVer || rt.kind == KindOther {
		writeAPIError(w, newAPIError(http.StatusNotFound, CodeNotFound, "The requested resource does not exist"))
		return
	}
	s, ok := o.authenticate(r, now)
	if !ok {
		writeAPIError(w, newAPIError(http.StatusUnauthorized, CodeInvalidSessionID, "Session expired or invalid"))
		return
	}
	o.authMu.Lock()
	u := *s.user
	o.authMu.Unlock()
	if !u.perms.APIEnabled {
		writeAPIError(w, newAPIError(http.StatusForbidden, CodeAPIDisabledForOrg, "The REST API is not enabled for this Organization."))
		return
	}
	o.statMu.Lock()
	if rt.kind.countsAgainstLimit() {
		if o.limitExceeded || o.apiUsed >= o.apiMax {
			used, limit := o.apiUsed, o.apiMax
			o.statMu.Unlock()
			w.Header().Set("Sforce-Limit-Info", "api-usage="+strconv.Itoa(used)+"/"+strconv.Itoa(limit))
			writeAPIError(w, newAPIError(http.StatusForbidden, CodeRequestLimitExceeded, string(LimitTotalRequests)))
			return
		}
		o.apiUsed++
	}
	used, limit := o.apiUsed, o.apiMax
	o.statMu.Unlock()
	w.Header().Set("Sforce-Limit-Info", "api-usage="+strconv.Itoa(used)+"/"+strconv.Itoa(limit))
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeAPIError(w, newAPIError(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "HTTP Method '"+r.Method+"' not allowed. Allowed are GET,HEAD"))
		return
	}
	verNum, _ := strconv.ParseFloat(rt.version, 64)
	c := &execCtx{o: o, user: &u, now: now, tooling: rt.tooling, all: rt.all, version: rt.version, verNum: verNum}
	var body []byte
	var err *apiError
	switch rt.kind {
	case KindQuery, KindQueryAll, KindToolingQuery:
		body, err = o.runQuery(c, r.URL.Query().Get("q"), o.batchSize(r))
	case KindQueryMore, KindToolingQueryMore:
		body, err = o.queryMore(c, rt.locator)
	case KindDescribeGlobal:
		body, err = o.describeGlobal(c)
	case KindDescribe:
		body, err = o.describe(c, rt.object, rt.basic)
	case KindRetrieve:
		body, err = o.retrieve(c, rt.object, rt.id, r.URL.Query().Get("fields"))
	case KindLimits:
		body = o.limits()
	case KindDownload:
		o.serveLogFile(w, r, c, rt.id, reset)
		return
	case KindApexLogBody:
		o.serveApexLogBody(w, r, c, rt.id, reset)
		return
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
