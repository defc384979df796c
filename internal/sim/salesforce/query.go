package salesforce

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// locator is an open query cursor (nextRecordsUrl).
type locator struct {
	id       string
	userID   string
	plan     *plan
	rows     []*record
	batch    int
	lastUsed time.Time
	opened   uint64
}

// batchSize reads Sforce-Query-Options: batchSize=N, clamped to 200..2000.
func (o *Org) batchSize(r *http.Request) int {
	n := o.opts.DefaultBatchSize
	for _, part := range strings.Split(r.Header.Get("Sforce-Query-Options"), ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "batchSize") {
			continue
		}
		if x, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			n = x
		}
	}
	return max(MinBatchSize, min(MaxBatchSize, n))
}

// runQuery parses, compiles and executes a query and renders its first page.
func (o *Org) runQuery(c *execCtx, src string, batch int) ([]byte, *apiError) {
	if strings.TrimSpace(src) == "" {
		return nil, newAPIError(http.StatusBadRequest, CodeMalformedQuery, "A query string has to be specified")
	}
	q, err := parseSOQL(src)
	if err != nil {
		return nil, err
	}
	o.applyDue(c.now)
	o.mu.RLock()
	p, err := c.compile(q)
	if err != nil {
		o.mu.RUnlock()
		return nil, err
	}
	rows := c.execute(p)
	if p.countOnly {
		o.mu.RUnlock()
		b := []byte(`{"totalSize":`)
		b = strconv.AppendInt(b, int64(len(rows)), 10)
		return append(b, `,"done":true,"records":[]}`...), nil
	}
	if p.aggregate {
		agg := c.aggregate(p, rows)
		b := c.appendAggPage(nil, p, agg)
		o.mu.RUnlock()
		return b, nil
	}
	if p.obj.isBig() || len(rows) <= batch {
		b := c.appendPage(nil, p, rows, len(rows), "")
		o.mu.RUnlock()
		return b, nil
	}
	o.mu.RUnlock()

	o.mu.Lock()
	defer o.mu.Unlock()
	loc := o.openLocator(c, p, rows, batch)
	return c.appendPage(nil, p, rows[:batch], len(rows), c.nextURL(loc.id, batch)), nil
}

func (c *execCtx) nextURL(locID string, offset int) string {
	prefix := "/services/data/v" + c.version
	if c.tooling {
		prefix += "/tooling"
	}
	if c.all {
		return prefix + "/queryAll/" + locID + "-" + strconv.Itoa(offset)
	}
	return prefix + "/query/" + locID + "-" + strconv.Itoa(offset)
}

// openLocator registers a cursor; callers hold o.mu for writing.
func (o *Org) openLocator(c *execCtx, p *plan, rows []*record, batch int) *locator {
	o.expireLocators(c.now)
	if limit := o.opts.MaxOpenLocators; limit > 0 {
		var mine []*locator
		for _, l := range o.locators {
			if l.userID == c.user.id {
				mine = append(mine, l)
			}
		}
		for len(mine) >= limit {
			oldest := 0
			for i, l := range mine {
				if l.opened < mine[oldest].opened {
					oldest = i
				}
			}
			delete(o.locators, mine[oldest].id)
			mine = append(mine[:oldest], mine[oldest+1:]...)
		}
	}
	o.locSeq++
	loc := &locator{id: makeID("01g", o.locSeq), userID: c.user.id, plan: p, rows: rows, batch: batch, lastUsed: c.now, opened: o.locSeq}
	o.locators[loc.id] = loc
	return loc
}

func (o *Org) expireLocators(now time.Time) {
	for id, l := range o.locators {
		if now.Sub(l.lastUsed) > o.opts.LocatorIdleTimeout {
			delete(o.locators, id)
		}
	}
}

// queryMore serves GET .../query/<locator>-<offset>.
func (o *Org) queryMore(c *execCtx, ref string) ([]byte, *apiError) {
	bad := newAPIError(http.StatusBadRequest, CodeInvalidQueryLocator, "invalid query locator")
	id, offS, ok := strings.Cut(ref, "-")
	off, err := strconv.Atoi(offS)
	if !ok || err != nil || off < 0 {
		return nil, bad
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.expireLocators(c.now)
	loc := o.locators[id]
	if loc == nil || loc.userID != c.user.id {
		return nil, bad
	}
	loc.lastUsed = c.now
	end := min(off+loc.batch, len(loc.rows))
	if off >= end {
		delete(o.locators, id)
		return c.appendPage(nil, loc.plan, nil, len(loc.rows), ""), nil
	}
	next := ""
	if end < len(loc.rows) {
		next = c.nextURL(id, end)
	} else {
		delete(o.locators, id)
	}
	return c.appendPage(nil, loc.plan, loc.rows[off:end], len(loc.rows), next), nil
}

// Rendering. Records are written by hand to keep Salesforce's key order and
// value formats (datetimes with +0000, doubles like Java's Double.toString).

func (c *execCtx) appendPage(b []byte, p *plan, rows []*record, total int, next string) []byte {
	b = append(b, '{')
	if c.tooling {
		// Tooling API results also carry the page size first.
		b = append(b, `"size":`...)
		b = strconv.AppendInt(b, int64(total), 10)
		b = append(b, ',')
	}
	b = append(b, `"totalSize":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	if next == "" {
		b = append(b, `,"done":true`...)
	} else {
		b = append(b, `,"done":false,"nextRecordsUrl":`...)
		b = appendJSONString(b, next)
	}
	if c.tooling {
		// ... and the cursor's locator (null on the last page) and the object's name (null
		// for an empty result).
		b = append(b, `,"queryLocator":`...)
		if next == "" {
			b = append(b, "null"...)
		} else {
			b = appendJSONString(b, next[strings.LastIndexByte(next, '/')+1:])
		}
		b = append(b, `,"entityTypeName":`...)
		if total == 0 {
			b = append(b, "null"...)
		} else {
			b = appendJSONString(b, p.obj.name)
		}
	}
	b = append(b, `,"records":[`...)
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = c.appendRecord(b, p, r)
	}
	return append(b, "]}"...)
}

func (c *execCtx) sobjectURL(obj *object, id string) string {
	prefix := "/services/data/v" + c.version
	if c.tooling {
		prefix += "/tooling"
	}
	return prefix + "/sobjects/" + obj.name + "/" + id
}

// EmptyID is the Id real orgs return for Big Object rows.
const EmptyID = "000000000000000AAA"

// shownID is the Id a query result shows for a record of obj.
func (c *execCtx) shownID(obj *object, id string) string {
	if obj.isBig() && !c.o.opts.BigObjectRealIDs {
		return EmptyID
	}
	return id
}

func (c *execCtx) appendAttributes(b []byte, obj *object, id string) []byte {
	b = append(b, `"attributes":{"type":`...)
	b = appendJSONString(b, obj.name)
	if id != "" {
		b = append(b, `,"url":`...)
		b = appendJSONString(b, c.sobjectURL(obj, c.shownID(obj, id)))
	}
	return append(b, '}')
}

func (c *execCtx) appendRecord(b []byte, p *plan, r *record) []byte {
	b = append(b, '{')
	b = c.appendAttributes(b, p.obj, r.id)
	for _, col := range p.cols {
		b = append(b, ',')
		if col.res != nil {
			b = appendJSONString(b, col.res.f.Name)
			b = append(b, ':')
			v := c.get(col.res, r)
			if col.res.f.Name == "Id" && v != nil {
				v = c.shownID(p.obj, r.id)
			}
			b = c.appendValue(b, col.res.f, p.obj, r.id, v)
			continue
		}
		b = appendJSONString(b, col.rel.RelName)
		b = append(b, ':')
		ref, _ := r.vals[col.rel.Name].(string)
		t := c.o.byID[to15(ref)]
		if t == nil || t.obj != col.target {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '{')
		b = c.appendAttributes(b, t.obj, t.id)
		for _, s := range col.sub {
			b = append(b, ',')
			b = appendJSONString(b, s.f.Name)
			b = append(b, ':')
			b = c.appendValue(b, s.f, t.obj, t.id, t.vals[s.f.Name])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func (c *execCtx) appendValue(b []byte, f *fieldDef, obj *object, id string, v any) []byte {
	if f.Type == typeBase64 {
		return appendJSONString(b, c.sobjectURL(obj, id)+"/"+f.Name)
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return appendJSONString(b, x)
	case time.Time:
		if f.Type == typeDate {
			return appendJSONString(b, x.UTC().Format("2006-01-02"))
		}
		return appendJSONString(b, sfDateTime(x))
	case int64:
		if f.Type == typeDouble {
			return append(b, javaDouble(float64(x))...)
		}
		return strconv.AppendInt(b, x, 10)
	case float64:
		return append(b, javaDouble(x)...)
	case bool:
		return strconv.AppendBool(b, x)
	}
	return append(b, "null"...)
}

func (c *execCtx) appendAggPage(b []byte, p *plan, rows []aggRow) []byte {
	b = append(b, `{"totalSize":`...)
	b = strconv.AppendInt(b, int64(len(rows)), 10)
	b = append(b, `,"done":true,"records":[`...)
	for i, row := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"attributes":{"type":"AggregateResult"}`...)
		for j, a := range p.aggCols {
			b = append(b, ',')
			b = appendJSONString(b, a.key)
			b = append(b, ':')
			f := a.res.f
			if a.fn == "COUNT" || a.fn == "COUNT_DISTINCT" {
				f = &fieldDef{Type: typeInt}
			}
			b = c.appendValue(b, f, p.obj, "", row.vals[j])
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
