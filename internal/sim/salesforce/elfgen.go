package salesforce

import (
	"encoding/csv"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EventLogFile CSV generation. Each event type has a column list; for a
// (seed, event type) pair the org precomputes elfTemplateCount complete,
// quoted CSV rows. A file's row i is template h(i) % count, copied and
// patched in place at three fixed-width spots: TIMESTAMP, TIMESTAMP_DERIVED
// and REQUEST_ID. Rows are therefore deterministic in (seed, file key, i),
// need no per-field formatting, and a file's length is known up front.

const elfTemplateCount = 64

type colKind int

const (
	colText colKind = iota
	colTimestamp
	colTimestampSec // TIMESTAMP without milliseconds
	colTimestampDerived
	colRequestID
)

const (
	tsWidth    = 18 // 20260630010000.000
	tsSecWidth = 14 // 20260630010000
	tsdWidth   = 24 // 2026-06-30T01:00:00.000Z
	reqIDWidth = 22
)

type elfColumn struct {
	name string
	typ  string // LogFileFieldTypes entry
	kind colKind
	gen  func(g *genCtx) string
}

// genCtx carries the per-template choices shared by correlated columns.
type genCtx struct {
	r         *rng
	eventType string
	org15     string
	user      synthUser
	ip        string
}

type synthUser struct {
	id       string // 18 characters
	username string
}

// syntheticUserCount users appear in generated data; Populate inserts them
// as User records so their ids resolve.
const syntheticUserCount = 8

func syntheticUsers() []synthUser {
	names := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "integration"}
	out := make([]synthUser, syntheticUserCount)
	for i := range out {
		out[i] = synthUser{id: makeID("005", 500000+uint64(i)), username: names[i] + "@acme.example.com"}
	}
	return out
}

type elfTemplate struct {
	row    []byte
	tsOff  int // -1 if absent
	tsMs   bool
	tsdOff int
	reqOff int
}

type elfTemplates struct {
	header []byte
	names  string // LogFileFieldNames
	types  string // LogFileFieldTypes
	tpls   [elfTemplateCount]elfTemplate
	avgLen float64
}

var (
	userAgents = []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
		"SFDC-Callout/62.0", "Workbench/62.0 (\"beta\", build 7)", "python-requests/2.31.0", "sf2loki/1.0",
	}
	entities = []string{"Account", "Contact", "Opportunity", "Case", "Lead", "User", "Audit_Event__c"}
	queries  = []string{
		"SELECT Id, Name FROM Account WHERE Name = 'O\\'Brien, \"Big\" Co' LIMIT 10",
		"SELECT Id, Email\nFROM Contact\nWHERE CreatedDate = LAST_N_DAYS:7",
		"SELECT COUNT() FROM Opportunity WHERE StageName IN ('Closed Won', 'Closed Lost')",
		"SELECT Id FROM Case",
		"",
	}
	uris = []string{
		"/services/data/v62.0/query", "/apex/AccountPage", "/lightning/r/Account/0015g00000AbCdEAAV/view",
		"/services/data/v62.0/sobjects/Account/describe", "/home/home.jsp", "/services/Soap/u/62.0",
	}
	stackTraces = []string{
		"Class.AccountService.run: line 42, column 1\nClass.AccountTrigger: line 7, column 1",
		"Trigger.CaseTrigger: line 12, column 1",
		"Class.Batch_Nightly.execute: line 88, column 1\nClass.Batch_Nightly: line 3, column 1\nAnonymousBlock: line 1, column 1",
	}
	exceptionMsgs = []string{
		"Attempt to de-reference a null object",
		"List index out of bounds: 3, \"row\" missing",
		"Too many SOQL queries: 101",
	}
)

func num(lo, hi int) func(g *genCtx) string {
	return func(g *genCtx) string { return strconv.Itoa(lo + g.r.intn(hi-lo+1)) }
}

func oneOf(vals ...string) func(g *genCtx) string {
	return func(g *genCtx) string { return pick(g.r, vals) }
}

func randKey(n int) func(g *genCtx) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	return func(g *genCtx) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[g.r.intn(len(alphabet))]
		}
		return string(b)
	}
}

func randID(prefix string, emptyOneIn int) func(g *genCtx) string {
	return func(g *genCtx) string {
		if emptyOneIn > 0 && g.r.intn(emptyOneIn) == 0 {
			return ""
		}
		return makeID(prefix, uint64(1+g.r.intn(1<<20)))
	}
}

// Column sets (abridged but realistic) of common event types.
var (
	colEventType = elfColumn{name: "EVENT_TYPE", typ: "String", gen: func(g *genCtx) string { return g.eventType }}
	colTS        = elfColumn{name: "TIMESTAMP", typ: "String", kind: colTimestamp}
	colTSSec     = elfColumn{name: "TIMESTAMP", typ: "String", kind: colTimestampSec}
	colReqID     = elfColumn{name: "REQUEST_ID", typ: "String", kind: colRequestID}
	colOrgID     = elfColumn{name: "ORGANIZATION_ID", typ: "Id", gen: func(g *genCtx) string { return g.org15 }}
	colUserID    = elfColumn{name: "USER_ID", typ: "Id", gen: func(g *genCtx) string { return g.user.id[:15] }}
	colRunTime   = elfColumn{name: "RUN_TIME", typ: "Number", gen: num(1, 5000)}
	colCPUTime   = elfColumn{name: "CPU_TIME", typ: "Number", gen: num(0, 2000)}
	colURI       = elfColumn{name: "URI", typ: "String", gen: func(g *genCtx) string { return pick(g.r, uris) }}
	colSession   = elfColumn{name: "SESSION_KEY", typ: "String", gen: randKey(16)}
	colLoginKey  = elfColumn{name: "LOGIN_KEY", typ: "String", gen: randKey(16)}
	colUserType  = elfColumn{name: "USER_TYPE", typ: "String", gen: oneOf("Standard", "Standard", "Automated", "CsnOnly")}
	colReqStatus = elfColumn{name: "REQUEST_STATUS", typ: "String", gen: oneOf("S", "S", "S", "F", "U", "")}
	colDBTotal   = elfColumn{name: "DB_TOTAL_TIME", typ: "Number", gen: num(100000, 90000000)}
	colTSD       = elfColumn{name: "TIMESTAMP_DERIVED", typ: "DateTime", kind: colTimestampDerived}
	colUserID18  = elfColumn{name: "USER_ID_DERIVED", typ: "Id", gen: func(g *genCtx) string { return g.user.id }}
	// CLIENT_IP is a String column: a request from inside Salesforce (a login from
	// AppExchange, say) shows "Salesforce.com IP" instead of an address.
	colClientIP = elfColumn{name: "CLIENT_IP", typ: "String", gen: func(g *genCtx) string {
		if g.r.intn(8) == 0 {
			return "Salesforce.com IP"
		}
		return g.ip
	}}
	colURIID     = elfColumn{name: "URI_ID_DERIVED", typ: "Id", gen: randID("001", 2)}
	colUserAgent = elfColumn{name: "USER_AGENT", typ: "String", gen: func(g *genCtx) string { return pick(g.r, userAgents) }}
	colAPIVer    = elfColumn{name: "API_VERSION", typ: "String", gen: oneOf("62.0", "61.0", "58.0", "9998.0")}
	colAPIType   = elfColumn{name: "API_TYPE", typ: "String", gen: oneOf("R", "E", "P", "f")}
	colEntity    = elfColumn{name: "ENTITY_NAME", typ: "String", gen: func(g *genCtx) string { return pick(g.r, entities) }}
	colQuery     = elfColumn{name: "QUERY", typ: "EscapedString", gen: func(g *genCtx) string { return pick(g.r, queries) }}
	colClient    = elfColumn{name: "CLIENT_NAME", typ: "String", gen: oneOf("Workbench", "DataLoader, v62", "sf2loki", "")}
)

func commonHead() []elfColumn {
	return []elfColumn{colEventType, colTS, colReqID, colOrgID, colUserID, colRunTime, colCPUTime, colURI,
		colSession, colLoginKey, colUserType, colReqStatus, colDBTotal}
}

func commonTail() []elfColumn { return []elfColumn{colTSD, colUserID18, colClientIP, colURIID} }

func columnsFor(eventType string) []elfColumn {
	var mid []elfColumn
	switch eventType {
	case "Login":
		// The Login event type's documented columns and value forms: LOGIN_TYPE is a one-letter
		// code (A Application, 6 Remote Access Client, i Remote Access 2.0, 5 SAML Idp Initiated
		// SSO, I Other Apex API), LOGIN_SUB_TYPE the login flow (empty for a UI login),
		// TLS_PROTOCOL a bare version.
		mid = []elfColumn{
			{name: "LOGIN_TYPE", typ: "String", gen: oneOf("A", "A", "6", "i", "5", "I")},
			{name: "BROWSER_TYPE", typ: "String", gen: func(g *genCtx) string { return pick(g.r, userAgents) }},
			colAPIType, colAPIVer,
			{name: "USER_NAME", typ: "String", gen: func(g *genCtx) string { return g.user.username }},
			{name: "TLS_PROTOCOL", typ: "String", gen: oneOf("1.2", "1.2", "1.3")},
			{name: "CIPHER_SUITE", typ: "String", gen: oneOf("ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-AES128-GCM-SHA256", "TLS_AES_256_GCM_SHA384")},
			{name: "AUTHENTICATION_METHOD_REFERENCE", typ: "String", gen: oneOf("", "", "pwd", "mfa")},
			{name: "LOGIN_SUB_TYPE", typ: "String", gen: oneOf("", "", "OAuth Refresh Token", "OAuth Web Server", "OAuth Client Credentials", "OAuth Username-Password")},
			{name: "LOGIN_STATUS", typ: "String", gen: oneOf("LOGIN_NO_ERROR", "LOGIN_NO_ERROR", "LOGIN_NO_ERROR", "LOGIN_ERROR_INVALID_PASSWORD")},
			{name: "SOURCE_IP", typ: "IP", gen: func(g *genCtx) string { return g.ip }},
			{name: "COUNTRY_CODE", typ: "String", gen: oneOf("US", "US", "GB", "DE", "")},
			{name: "LOGIN_URL", typ: "String", gen: oneOf("acme.my.salesforce.com", "login.salesforce.com")},
			{name: "HTTP_REFERER", typ: "String", gen: oneOf("", "https://acme.my.salesforce.com/")},
			{name: "FORWARDED_FOR_IP", typ: "String", gen: oneOf("", "", "unknown")},
			{name: "AUTHENTICATION_SERVICE_ID", typ: "Id", gen: randID("0LE", 2)},
			{name: "USE_API_TOKEN", typ: "String", gen: oneOf("", "P", "T")},
		}
	case "Logout":
		mid = []elfColumn{
			{name: "USER_INITIATED_LOGOUT", typ: "Number", gen: oneOf("0", "1")},
			{name: "SESSION_LEVEL", typ: "String", gen: oneOf("STANDARD", "HIGH_ASSURANCE")},
			{name: "PLATFORM_TYPE", typ: "String", gen: oneOf("1015", "2003", "")},
			{name: "BROWSER_TYPE", typ: "String", gen: func(g *genCtx) string { return pick(g.r, userAgents) }},
			colAPIType, colAPIVer,
		}
	case "API":
		mid = []elfColumn{colAPIType, colAPIVer, colClient,
			{name: "METHOD_NAME", typ: "String", gen: oneOf("query", "describeSObject", "update", "create", "queryMore")},
			colEntity,
			{name: "ROWS_PROCESSED", typ: "Number", gen: num(0, 2000)},
			{name: "REQUEST_SIZE", typ: "Number", gen: num(100, 90000)},
			{name: "RESPONSE_SIZE", typ: "Number", gen: num(100, 900000)},
			colQuery,
		}
	case "RestApi":
		mid = []elfColumn{colAPIVer, colEntity,
			{name: "METHOD", typ: "String", gen: oneOf("GET", "GET", "POST", "PATCH")},
			{name: "MEDIA_TYPE", typ: "String", gen: oneOf("application/json", "application/json; charset=UTF-8")},
			{name: "STATUS_CODE", typ: "Number", gen: oneOf("200", "200", "201", "400", "404")},
			{name: "ROWS_PROCESSED", typ: "Number", gen: num(0, 2000)},
			{name: "REQUEST_SIZE", typ: "Number", gen: num(0, 9000)},
			{name: "RESPONSE_SIZE", typ: "Number", gen: num(100, 900000)},
			colUserAgent, colClient,
		}
	case "Report":
		mid = []elfColumn{colEntity,
			{name: "DISPLAY_TYPE", typ: "String", gen: oneOf("D", "S", "H", "")},
			{name: "RENDERING_TYPE", typ: "String", gen: oneOf("W", "E", "P", "J")},
			{name: "REPORT_ID", typ: "Id", gen: randID("00O", 0)},
			{name: "ROW_COUNT", typ: "Number", gen: num(0, 50000)},
			{name: "NUMBER_COLUMNS", typ: "Number", gen: num(1, 40)},
			{name: "SORT", typ: "String", gen: oneOf("Amount DESC, CloseDate ASC", "Name ASC", "")},
			{name: "DB_BLOCKS", typ: "Number", gen: num(0, 90000)},
			{name: "DB_CPU_TIME", typ: "Number", gen: num(0, 9000)},
			{name: "ORIGIN", typ: "String", gen: oneOf("ReportExecuted", "DashboardComponentUpdated", "ReportExported, \"xlsx\"")},
		}
	case "URI":
		mid = []elfColumn{
			{name: "REFERRER_URI", typ: "String", gen: oneOf("https://acme.lightning.force.com/lightning/page/home", "", "https://acme.my.salesforce.com/?a=1&b=2,3")},
			colUserAgent,
		}
	case "ApexExecution":
		mid = []elfColumn{
			{name: "CALLOUT_TIME", typ: "Number", gen: num(0, 3000)},
			{name: "ENTRY_POINT", typ: "String", gen: oneOf("AccountTrigger", "VF- /apex/AccountPage", "Scheduled: Nightly, \"Full\" Job", "Batch_Nightly")},
			{name: "EXEC_TIME", typ: "Number", gen: num(1, 10000)},
			{name: "NUMBER_SOQL_QUERIES", typ: "Number", gen: num(0, 100)},
			{name: "QUIDDITY", typ: "String", gen: oneOf("A", "R", "V", "W", "H", "B")},
		}
	case "ApexUnexpectedException":
		return []elfColumn{colEventType, colTS, colReqID, colOrgID, colUserID,
			{name: "EXCEPTION_TYPE", typ: "String", gen: oneOf("System.NullPointerException", "System.ListException", "System.LimitException")},
			{name: "EXCEPTION_MESSAGE", typ: "String", gen: func(g *genCtx) string { return pick(g.r, exceptionMsgs) }},
			{name: "STACK_TRACE", typ: "String", gen: func(g *genCtx) string { return pick(g.r, stackTraces) }},
			{name: "EXCEPTION_CATEGORY", typ: "String", gen: oneOf("APEX_CODE", "TRIGGER")},
			colTSD, colUserID18,
		}
	case "ApexCallout":
		// SUCCESS is typed Boolean and written 1 or 0; TIMESTAMP has no milliseconds in these
		// files (both forms occur in real files).
		return []elfColumn{colEventType, colTSSec, colReqID, colOrgID, colUserID, colRunTime, colCPUTime, colURI,
			colSession, colLoginKey,
			{name: "TYPE", typ: "String", gen: oneOf("REST", "REST", "AJAX")},
			{name: "METHOD", typ: "String", gen: oneOf("GET", "POST", "PUT")},
			{name: "SUCCESS", typ: "Boolean", gen: oneOf("1", "1", "1", "0")},
			{name: "STATUS_CODE", typ: "Number", gen: oneOf("200", "200", "201", "500", "503")},
			{name: "TIME", typ: "Number", gen: num(5, 12000)},
			{name: "REQUEST_SIZE", typ: "Number", gen: num(0, 4000)},
			{name: "RESPONSE_SIZE", typ: "Number", gen: num(0, 90000)},
			{name: "URL", typ: "String", gen: oneOf("https://api.example.com/v1/orders", "https://hooks.example.net/notify?a=1,b=2")},
			colTSD, colUserID18, colClientIP, colURIID,
		}
	case "ReportExport":
		// Report Export: a report exported as Details Only (Formatted Report and XLSX exports
		// appear in the Report type instead). CLIENT_INFO names the client.
		return []elfColumn{colEventType, colTS, colReqID, colOrgID, colUserID, colCPUTime, colURI, colSession, colLoginKey,
			{name: "CLIENT_INFO", typ: "String", gen: oneOf("Browser", "Browser", "Salesforce Mobile", "API")},
			{name: "REPORT_DESCRIPTION", typ: "String", gen: oneOf("Pipeline by owner", "All open cases", "Contacts with emails, \"EU\"", "")},
			colTSD, colUserID18, colClientIP, colURIID,
		}
	case "ApiTotalUsage":
		return []elfColumn{colEventType, colTS, colReqID, colOrgID, colUserID,
			{name: "API_FAMILY", typ: "String", gen: oneOf("REST", "SOAP", "BULK_API_2")},
			colAPIVer,
			{name: "API_RESOURCE", typ: "String", gen: oneOf("/v62.0/query", "/v62.0/sobjects/EventLogFile/{id}/LogFile", "/v62.0/limits")},
			colClient,
			{name: "HTTP_METHOD", typ: "String", gen: oneOf("GET", "POST")},
			colClientIP,
			{name: "COUNTS_AGAINST_API_LIMIT", typ: "Boolean", gen: oneOf("true", "true", "false")},
			{name: "CONNECTED_APP_ID", typ: "Id", gen: randID("0H4", 3)},
			colEntity,
			{name: "STATUS_CODE", typ: "Number", gen: oneOf("200", "200", "400", "401")},
			colTSD, colUserID18,
		}
	}
	cols := commonHead()
	cols = append(cols, mid...)
	return append(cols, commonTail()...)
}

// simulatedEventTypes are the event types whose columns the simulator knows.
var simulatedEventTypes = []string{"Login", "Logout", "API", "RestApi", "Report", "URI", "ApexExecution",
	"ApexCallout", "ApexUnexpectedException", "ApiTotalUsage"}

var (
	columnTypesOnce sync.Once
	columnTypes     map[string]string // column name → LogFileFieldTypes entry
)

// ListedFields returns the LogFileFieldNames and LogFileFieldTypes the simulated org lists for
// an EventLogFile body: its CSV header's names, each typed as the simulated event types type it
// (String when none has it). A generated file of a simulated event type lists exactly these.
func ListedFields(body io.Reader) (names, types string, err error) {
	r := csv.NewReader(body)
	r.LazyQuotes = true
	header, err := r.Read()
	if err != nil {
		return "", "", err
	}
	return strings.Join(header, ","), documentedTypes(header), nil
}

// documentedTypes returns the LogFileFieldTypes of a header: each column typed as the
// simulated event types type it, String when none has it.
func documentedTypes(header []string) string {
	columnTypesOnce.Do(func() {
		columnTypes = map[string]string{}
		for _, et := range simulatedEventTypes {
			for _, c := range columnsFor(et) {
				columnTypes[c.name] = c.typ
			}
		}
	})
	types := make([]string, len(header))
	for i, n := range header {
		types[i] = columnTypes[strings.ToUpper(strings.TrimSpace(n))]
		if types[i] == "" {
			types[i] = "String"
		}
	}
	return strings.Join(types, ",")
}

var (
	templateMu    sync.Mutex
	templateCache = map[templateKey]*elfTemplates{}
)

type templateKey struct {
	seed      int64
	org       string
	eventType string
	crlf      bool
}

// templatesFor returns the (cached) row templates of an event type.
func templatesFor(seed int64, org15, eventType string, crlf bool) *elfTemplates {
	k := templateKey{seed, org15, eventType, crlf}
	templateMu.Lock()
	defer templateMu.Unlock()
	if t := templateCache[k]; t != nil {
		return t
	}
	t := buildTemplates(seed, org15, eventType, crlf)
	templateCache[k] = t
	return t
}

func csvQuote(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

func buildTemplates(seed int64, org15, eventType string, crlf bool) *elfTemplates {
	cols := columnsFor(eventType)
	eol := "\n"
	if crlf {
		eol = "\r\n"
	}
	t := &elfTemplates{}
	names := make([]string, len(cols))
	types := make([]string, len(cols))
	for i, c := range cols {
		names[i], types[i] = c.name, c.typ
		if i > 0 {
			t.header = append(t.header, ',')
		}
		t.header = csvQuote(t.header, c.name)
	}
	t.header = append(t.header, eol...)
	t.names, t.types = strings.Join(names, ","), strings.Join(types, ",")
	total := 0
	for k := 0; k < elfTemplateCount; k++ {
		t.tpls[k] = makeTemplate(seed, org15, eventType, cols, k, eol, -1, "")
		total += len(t.tpls[k].row)
	}
	t.avgLen = float64(total) / elfTemplateCount
	return t
}

// makeTemplate renders template k; column override (if >= 0) gets value val.
func makeTemplate(seed int64, org15, eventType string, cols []elfColumn, k int, eol string, override int, val string) elfTemplate {
	r := newRNG(uint64(seed) ^ hashString(eventType) ^ uint64(k)*0x9e3779b97f4a7c15)
	g := &genCtx{r: r, eventType: eventType, org15: org15, user: pick(r, syntheticUsers()),
		ip: strconv.Itoa(10+r.intn(200)) + "." + strconv.Itoa(r.intn(256)) + "." + strconv.Itoa(r.intn(256)) + "." + strconv.Itoa(1+r.intn(254))}
	tp := elfTemplate{tsOff: -1, tsdOff: -1, reqOff: -1}
	var row []byte
	for i, c := range cols {
		if i > 0 {
			row = append(row, ',')
		}
		switch c.kind {
		case colTimestamp:
			tp.tsOff, tp.tsMs = len(row)+1, true
			row = csvQuote(row, strings.Repeat("0", tsWidth))
		case colTimestampSec:
			tp.tsOff = len(row) + 1
			row = csvQuote(row, strings.Repeat("0", tsSecWidth))
		case colTimestampDerived:
			tp.tsdOff = len(row) + 1
			row = csvQuote(row, strings.Repeat("0", tsdWidth))
		case colRequestID:
			tp.reqOff = len(row) + 1
			row = csvQuote(row, strings.Repeat("0", reqIDWidth))
		default:
			v := c.gen(g)
			if i == override {
				v = val
			}
			row = csvQuote(row, v)
		}
	}
	tp.row = append(row, eol...)
	return tp
}

// oversizedTemplate is a row whose free-text column holds about n bytes
// with embedded newlines, quotes and commas.
func oversizedTemplate(seed int64, org15, eventType string, crlf bool, n int) *elfTemplate {
	cols := columnsFor(eventType)
	col := -1
	for i, c := range cols {
		if c.kind != colText {
			continue
		}
		switch c.name {
		case "QUERY", "STACK_TRACE", "URI":
			col = i
		}
		if col < 0 && c.name != "EVENT_TYPE" {
			col = i
		}
	}
	const chunk = "line of a very long value, with \"quotes\" and commas\n"
	val := strings.Repeat(chunk, n/len(chunk)+1)[:n]
	eol := "\n"
	if crlf {
		eol = "\r\n"
	}
	tp := makeTemplate(seed, org15, eventType, cols, 0, eol, col, val)
	return &tp
}

// elfBody describes one revision of an EventLogFile's content. It is
// immutable: a regeneration installs a new one.
type elfBody struct {
	tpl         *elfTemplates
	key         uint64
	rows        int
	spacingRows int   // rows spread evenly over the LogDate bucket
	startMs     int64 // LogDate in epoch ms
	spanMs      int64 // bucket length (1h or 24h)
	explicit    []byte
	length      int64
	bigRow      int // row index served from big (-1: none)
	big         *elfTemplate
}

func (b *elfBody) rowHash(i int) uint64 { return splitmix64(b.key ^ uint64(i)*0xd1b54a32d192ed03) }

// computeLength returns the byte length of the first rows rows (+ header).
func (b *elfBody) lengthOf(rows int) int64 {
	if b.explicit != nil {
		return int64(len(b.explicit))
	}
	n := int64(len(b.tpl.header))
	for i := 0; i < rows; i++ {
		if i == b.bigRow {
			n += int64(len(b.big.row))
			continue
		}
		n += int64(len(b.tpl.tpls[b.rowHash(i)%elfTemplateCount].row))
	}
	return n
}

func (b *elfBody) rowTimeMs(i int, h uint64) int64 {
	if i < b.spacingRows {
		return b.startMs + int64(i)*b.spanMs/int64(b.spacingRows)
	}
	return b.startMs + int64(h>>11)%b.spanMs // late row: anywhere in the bucket
}

// tsCache memoises the date part of timestamps for the current UTC day.
type tsCache struct {
	dayStart int64
	iso      [10]byte // 2006-01-02
	compact  [8]byte  // 20060102
}

func (c *tsCache) set(ms int64) {
	t := time.UnixMilli(ms).UTC()
	y, m, d := t.Date()
	c.dayStart = time.Date(y, m, d, 0, 0, 0, 0, time.UTC).UnixMilli()
	put4(c.iso[0:], y)
	c.iso[4] = '-'
	put2(c.iso[5:], int(m))
	c.iso[7] = '-'
	put2(c.iso[8:], d)
	put4(c.compact[0:], y)
	put2(c.compact[4:], int(m))
	put2(c.compact[6:], d)
}

func put2(b []byte, v int) { b[0], b[1] = byte('0'+v/10), byte('0'+v%10) }
func put3(b []byte, v int) { b[0], b[1], b[2] = byte('0'+v/100), byte('0'+v/10%10), byte('0'+v%10) }
func put4(b []byte, v int) {
	b[0], b[1], b[2], b[3] = byte('0'+v/1000%10), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10)
}

// writeTo streams the header and the first rows rows to w.
func (b *elfBody) writeTo(w io.Writer, rows int) error {
	if b.explicit != nil {
		_, err := w.Write(b.explicit)
		return err
	}
	const flushAt = 256 << 10
	buf := make([]byte, 0, flushAt+64<<10)
	buf = append(buf, b.tpl.header...)
	var tc tsCache
	tc.dayStart = -1 << 62
	for i := 0; i < rows; i++ {
		h := b.rowHash(i)
		tp := &b.tpl.tpls[h%elfTemplateCount]
		if i == b.bigRow {
			tp = b.big
		}
		if len(buf)+len(tp.row) > cap(buf) {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		start := len(buf)
		buf = append(buf, tp.row...)
		row := buf[start:]
		ms := b.rowTimeMs(i, h)
		if ms < tc.dayStart || ms >= tc.dayStart+86400000 {
			tc.set(ms)
		}
		msOfDay := int(ms - tc.dayStart)
		hh, mm, ss, milli := msOfDay/3600000, msOfDay/60000%60, msOfDay/1000%60, msOfDay%1000
		if o := tp.tsOff; o >= 0 {
			copy(row[o:], tc.compact[:])
			put2(row[o+8:], hh)
			put2(row[o+10:], mm)
			put2(row[o+12:], ss)
			if tp.tsMs {
				row[o+14] = '.'
				put3(row[o+15:], milli)
			}
		}
		if o := tp.tsdOff; o >= 0 {
			copy(row[o:], tc.iso[:])
			row[o+10] = 'T'
			put2(row[o+11:], hh)
			row[o+13] = ':'
			put2(row[o+14:], mm)
			row[o+16] = ':'
			put2(row[o+17:], ss)
			row[o+19] = '.'
			put3(row[o+20:], milli)
			row[o+23] = 'Z'
		}
		if o := tp.reqOff; o >= 0 {
			x := h ^ b.key
			for k := 0; k < reqIDWidth; k++ {
				if k == 11 {
					x = splitmix64(h ^ b.key ^ 0x632be59bd9b4e019)
				}
				row[o+k] = base62[x%62]
				x /= 62
			}
		}
		if len(buf) >= flushAt {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	if len(buf) > 0 {
		_, err := w.Write(buf)
		return err
	}
	return nil
}
