package salesforce

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// ApexLogSpec describes an ApexLog (debug log) to add. Zero fields take
// defaults: LogUser the first generated user, StartTime now, Operation
// "/apex/AccountPage", Request "API" (or "Application": from the user
// interface), Status "Success", Application
// "Unknown", Location "Monitoring", a generated body of BodyBytes (2048).
type ApexLogSpec struct {
	ID                   string
	LogUser              string // username or user id
	StartTime            time.Time
	Operation            string
	Request              string
	Status               string
	Application          string
	Location             string
	DurationMilliseconds int
	Body                 []byte
	BodyBytes            int
	VisibleAt            time.Time
}

type apexBody struct {
	body []byte
}

// generateApexBody produces a deterministic debug log of about n bytes.
func generateApexBody(seed uint64, start time.Time, n int) []byte {
	r := newRNG(seed)
	var b bytes.Buffer
	b.WriteString("62.0 APEX_CODE,FINEST;APEX_PROFILING,INFO;CALLOUT,INFO;DB,INFO;SYSTEM,DEBUG;VALIDATION,INFO;WORKFLOW,INFO\n")
	t := start
	events := []string{"USER_DEBUG|[12]|DEBUG|processing account, \"batch\" 7", "SOQL_EXECUTE_BEGIN|[42]|Aggregations:0|SELECT Id FROM Account",
		"SOQL_EXECUTE_END|[42]|Rows:12", "METHOD_ENTRY|[1]|01p5g000000AbCd|AccountService.run()", "METHOD_EXIT|[1]|01p5g000000AbCd|AccountService.run()",
		"LIMIT_USAGE_FOR_NS|(default)|\n  Number of SOQL queries: 3 out of 100\n  Number of query rows: 12 out of 50000"}
	for b.Len() < n {
		t = t.Add(time.Duration(r.intn(5000)) * time.Microsecond)
		b.WriteString(t.UTC().Format("15:04:05.000"))
		b.WriteString(" (")
		b.WriteString(strconv.Itoa(r.intn(99999999)))
		b.WriteString(")|")
		b.WriteString(pick(r, events))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// AddApexLog adds an ApexLog record with its body and returns its id.
func (o *Org) AddApexLog(spec ApexLogSpec) (string, error) {
	now := o.now().UTC()
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&spec.Operation, "/apex/AccountPage")
	def(&spec.Request, "API")
	def(&spec.Status, "Success")
	def(&spec.Application, "Unknown")
	def(&spec.Location, "Monitoring")
	if spec.StartTime.IsZero() {
		spec.StartTime = now
	}
	if spec.BodyBytes <= 0 {
		spec.BodyBytes = 2048
	}
	userID := syntheticUsers()[0].id
	if spec.LogUser != "" {
		if id, ok := o.UserID(spec.LogUser); ok {
			userID = id
		} else if id, ok := normalizeID(spec.LogUser); ok {
			userID = id
		} else {
			return "", fmt.Errorf("%w: %s", ErrUnknownUser, spec.LogUser)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	obj := o.objectByName("ApexLog")
	rec, err := o.buildRecord(obj, Record{
		"Id": spec.ID, "LogUserId": userID, "Operation": spec.Operation, "Request": spec.Request,
		"Status": spec.Status, "Application": spec.Application, "Location": spec.Location,
		"StartTime": spec.StartTime, "DurationMilliseconds": spec.DurationMilliseconds,
		"SystemModstamp": spec.StartTime, "LastModifiedDate": spec.StartTime,
	}, now)
	if err != nil {
		return "", err
	}
	body := spec.Body
	if body == nil {
		body = generateApexBody(uint64(o.opts.Seed)^hashString(rec.id), spec.StartTime, spec.BodyBytes)
	}
	rec.vals["LogLength"] = int64(len(body))
	rec.vals["RequestIdentifier"] = uuidFor(uint64(o.opts.Seed), "req"+rec.id)
	rec.apex = &apexBody{body: body}
	rec.visibleAt = spec.VisibleAt
	o.addRecord(rec)
	return rec.id, nil
}

func (o *Org) serveApexLogBody(w http.ResponseWriter, r *http.Request, c *execCtx, id string, reset *Fault) {
	o.mu.RLock()
	rec := o.byID[to15(id)]
	var body *apexBody
	if rec != nil && rec.obj.name == "ApexLog" && (rec.visibleAt.IsZero() || !rec.visibleAt.After(c.now)) {
		body = rec.apex
	}
	obj := o.objectByName("ApexLog")
	o.mu.RUnlock()
	if !c.user.perms.canRead(obj) {
		writeAPIError(w, newAPIError(http.StatusForbidden, CodeInsufficientAccess, "insufficient access rights on object id"))
		return
	}
	if body == nil {
		writeAPIError(w, notFound())
		return
	}
	o.streamBody(w, r, reset, "text/plain;charset=UTF-8", func() int64 { return int64(len(body.body)) },
		func(dst io.Writer) error { _, err := dst.Write(body.body); return err })
}
