package soql

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/sf2loki/sf2loki/salesforce"
)

// row is one record read, with its position.
type row struct {
	rec salesforce.Row
	pos position
}

// reader yields rows in ascending (timestamp, key) order; io.EOF ends the run's range.
type reader interface {
	next(ctx context.Context) (row, error)
}

// maxQueryEscaped bounds the URL-encoded SOQL text; above it the field list is replaced by
// FIELDS(ALL) (Salesforce refuses request URIs over about 16 KB).
const maxQueryEscaped = 12000

// querier holds what every query of one object shares.
type querier struct {
	client  *salesforce.Client
	object  string
	tsField string
	kind    keyKind
	// selectList is the explicit field list, or "FIELDS(ALL)" (then LIMIT is at most 200).
	selectList string
	fieldsAll  bool
	// at finds the timestamp and key fields in rows (positions posTS and posKey; made on first use).
	at *salesforce.FieldIndex
	// keys is where the rows' keys are copied to, one after another (see key).
	keys []byte
}

// keyBlock is the size of the blocks rows' keys are copied into: ~220 Salesforce ids.
const keyBlock = 4 << 10

// key returns a row's key (its Id) as a string that outlives the page: a copy in a block shared
// with the keys of the rows around it, instead of an allocation per row. Bytes of a block are
// written once and never again, so the strings stay valid as long as any of them is referenced
// (the cursors handed out, the window), which keeps the block in memory.
func (q *querier) key(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(q.keys)-len(q.keys) < len(b) {
		q.keys = make([]byte, 0, max(keyBlock, len(b)))
	}
	start := len(q.keys)
	q.keys = append(q.keys, b...)
	return unsafe.String(&q.keys[start], len(b))
}

// Positions in querier.at.
const (
	posTS = iota
	posKey
)

// literal formats a position's timestamp.
func lit(t time.Time) string { return salesforce.FormatDateTime(t) }

// quoteKey returns a key as a SOQL literal (ids validated).
func (q *querier) quoteKey(key string) (string, error) {
	if q.kind == byEventIdentifier {
		return salesforce.QuoteString(key), nil
	}
	return salesforce.QuoteID(key)
}

// atOrAfter is the condition "row ≥ p" (incl) or "row > p" in (timestamp, key) order.
func (q *querier) atOrAfter(p position, incl bool) (string, error) {
	if p.key == "" {
		return q.tsField + " >= " + lit(p.ts), nil
	}
	k, err := q.quoteKey(p.key)
	if err != nil {
		return "", err
	}
	op := " > "
	if incl {
		op = " >= "
	}
	return "(" + q.tsField + " > " + lit(p.ts) + " OR (" + q.tsField + " = " + lit(p.ts) + " AND " + q.kind.field() + op + k + "))", nil
}

// before is the negation of atOrAfter.
func (q *querier) before(p position, incl bool) (string, error) {
	if p.key == "" {
		return q.tsField + " < " + lit(p.ts), nil
	}
	k, err := q.quoteKey(p.key)
	if err != nil {
		return "", err
	}
	op := " <= "
	if incl {
		op = " < "
	}
	return "(" + q.tsField + " < " + lit(p.ts) + " OR (" + q.tsField + " = " + lit(p.ts) + " AND " + q.kind.field() + op + k + "))", nil
}

// parse reads a row's position. A row without a usable timestamp or key cannot be placed in
// the order the cursor follows; Salesforce never returns one for a query filtered on the
// timestamp, so it is an error.
func (q *querier) parse(r salesforce.Row) (row, error) {
	if q.at == nil {
		q.at = salesforce.NewFieldIndex([]string{posTS: q.tsField, posKey: q.kind.field()})
	}
	at := q.at.Locate(r)
	i := at[posTS]
	if i < 0 || !isText(r.Kind(i)) {
		return row{}, fmt.Errorf("soql: %s row without %s", q.object, q.tsField)
	}
	t, err := salesforce.ParseDateTimeBytes(r.Value(i))
	if err != nil {
		return row{}, fmt.Errorf("soql: %s row: %s: %w", q.object, q.tsField, err)
	}
	i = at[posKey]
	if i < 0 || !isText(r.Kind(i)) || len(r.Value(i)) == 0 {
		return row{}, fmt.Errorf("soql: %s row without %s", q.object, q.kind.field())
	}
	return row{rec: r, pos: position{ts: t, key: q.key(r.Value(i))}}, nil
}

// isText reports whether a value of kind k has text (Row.String's ok).
func isText(k salesforce.ValueKind) bool {
	return k == salesforce.ValueString || k == salesforce.ValueNumber || k == salesforce.ValueBool
}

// keysetReader reads a standard object in (timestamp, Id) order with keyset queries:
//
//	WHERE [(where) AND] (start arm [OR probe arm]) [AND after last row] [AND ts < top]
//	ORDER BY ts ASC, Id ASC [LIMIT n]
//
// A query's pages are followed by nextRecordsUrl, so a run costs one call per page (2000 rows
// with an explicit field list). A LIMIT is set only when the run can take fewer rows than a
// page; a query that returned its full LIMIT, or whose locator was lost, is continued by a new
// keyset query after the last row read.
//
// The probe arm's rows, when there are any, come first in that order, which is not Id order: a
// run cut after one of them would leave others with a lower Id unread, behind the max_id its
// cursor carries. So they are never delivered from that query. When its first row is a probe
// row, the reader reads the probe instead in Id order,
//
//	WHERE [(where) AND] Id > probeMax AND before start [AND ts < top] ORDER BY Id ASC [LIMIT n]
//
// raising probeMax with every row, so that every probe row up to the one last delivered (the
// max_id of its cursor) is delivered wherever the run ends; then it sends the first query again
// (whose probe arm now starts at the raised probeMax). A run without late rows costs no
// further call.
type keysetReader struct {
	q     *querier
	where string
	// start is the window start (inclusive) or the position (exclusive).
	start     position
	startIncl bool
	// probeMax, when set, adds the arm (before start AND Id > probeMax); it is the Id of the
	// last probe row read.
	probeMax string
	// top, when set, is an exclusive upper bound (settle).
	top time.Time
	// limit returns the LIMIT of the next query: 0 to stop, negative for none.
	limit func() int

	last    *position // nil, or &lastAt
	lastAt  position
	page    *salesforce.RowPage
	buf     []salesforce.Row
	open    bool // a query's pages are being read
	got     int  // rows received by the open query
	asked   int  // its LIMIT, negative for none
	probing bool // the open query is the probe in Id order
	first   bool // the next row is the first of a query with a probe arm
	done    bool
}

func (k *keysetReader) next(ctx context.Context) (row, error) {
	for {
		if len(k.buf) > 0 {
			r, err := k.q.parse(k.buf[0])
			k.buf = k.buf[1:]
			if err != nil {
				return row{}, err
			}
			if k.probing {
				if strings.Compare(byID.norm(r.pos.key), byID.norm(k.probeMax)) <= 0 {
					return row{}, fmt.Errorf("soql: %s: the late-row probe returned row %s, not after %s; the Id condition is not applied", k.q.object, r.pos.key, k.probeMax)
				}
				k.probeMax = r.pos.key
				return r, nil
			}
			if k.first {
				k.first = false
				if k.beforeStart(r.pos) {
					k.buf, k.open, k.probing = nil, false, true
					continue
				}
			}
			if k.last != nil && r.pos.key == k.last.key {
				// A keyset query returned the row it starts after: reading on would loop.
				return row{}, fmt.Errorf("soql: %s: row %s returned again after itself; the keyset condition is not applied", k.q.object, r.pos.key)
			}
			k.lastAt = r.pos
			k.last = &k.lastAt
			return r, nil
		}
		if k.done {
			return row{}, io.EOF
		}
		if k.open {
			if !k.page.Done {
				// Every row of the page has been handed out and shaped by now (the stream
				// reads one row at a time): the next page may be read over it.
				k.page.Release()
				p, err := k.q.client.NextRowPage(ctx, k.page)
				var apiErr *salesforce.APIError
				if errors.As(err, &apiErr) && apiErr.ErrorCode == salesforce.CodeInvalidQueryLocator {
					// The locator expired or was released: continue with a keyset query.
					k.open = false
					continue
				}
				if err != nil {
					return row{}, err
				}
				k.page, k.buf = p, p.Rows
				k.got += len(p.Rows)
				continue
			}
			k.open = false
			if k.asked < 0 || k.got < k.asked {
				// The probe is drained: back to the query it interrupted.
				if !k.probing {
					k.done = true
				}
				k.probing = false
				continue
			}
		}
		if err := k.query(ctx); err != nil {
			return row{}, err
		}
	}
}

func (k *keysetReader) query(ctx context.Context) error {
	n := k.limit()
	if n == 0 {
		k.done = true
		return nil
	}
	if k.q.fieldsAll && (n < 0 || n > salesforce.MinBatchSize) {
		// FIELDS(ALL) needs LIMIT 200 or less.
		n = salesforce.MinBatchSize
	}
	build := k.build
	if k.probing {
		build = k.buildProbe
	}
	soql, err := build(n)
	if err != nil {
		return err
	}
	k.page.Release() // as in next: its rows are all handed out
	p, err := k.q.client.QueryRows(ctx, soql)
	if err != nil {
		return err
	}
	k.page, k.buf, k.got, k.asked, k.open = p, p.Rows, len(p.Rows), n, true
	k.first = !k.probing && k.probeMax != "" && k.last == nil
	return nil
}

// beforeStart reports whether p lies before start: a row only the probe arm asks for.
func (k *keysetReader) beforeStart(p position) bool {
	c := k.q.kind.cmp(p, k.start)
	return c < 0 || c == 0 && !k.startIncl
}

// build returns the SOQL text of the next query with LIMIT n.
func (k *keysetReader) build(n int) (string, error) {
	var conds []string
	if k.where != "" {
		conds = append(conds, "("+k.where+")")
	}
	arm, err := k.q.atOrAfter(k.start, k.startIncl)
	if err != nil {
		return "", err
	}
	if k.probeMax != "" {
		below, err := k.q.before(k.start, k.startIncl)
		if err != nil {
			return "", err
		}
		m, err := salesforce.QuoteID(k.probeMax)
		if err != nil {
			return "", err
		}
		arm = "(" + arm + " OR (Id > " + m + " AND " + below + "))"
	}
	conds = append(conds, arm)
	if k.last != nil {
		after, err := k.q.atOrAfter(*k.last, false)
		if err != nil {
			return "", err
		}
		conds = append(conds, after)
	}
	if !k.top.IsZero() {
		conds = append(conds, k.q.tsField+" < "+lit(k.top))
	}
	soql := "SELECT " + k.q.selectList + " FROM " + k.q.object + " WHERE " + strings.Join(conds, " AND ") +
		" ORDER BY " + k.q.tsField + " ASC, Id ASC"
	if n >= 0 {
		soql += " LIMIT " + strconv.Itoa(n)
	}
	return soql, nil
}

// buildProbe returns the SOQL text of the next probe query, in Id order, with LIMIT n.
func (k *keysetReader) buildProbe(n int) (string, error) {
	var conds []string
	if k.where != "" {
		conds = append(conds, "("+k.where+")")
	}
	m, err := salesforce.QuoteID(k.probeMax)
	if err != nil {
		return "", err
	}
	below, err := k.q.before(k.start, k.startIncl)
	if err != nil {
		return "", err
	}
	conds = append(conds, "Id > "+m, below)
	if !k.top.IsZero() {
		conds = append(conds, k.q.tsField+" < "+lit(k.top))
	}
	soql := "SELECT " + k.q.selectList + " FROM " + k.q.object + " WHERE " + strings.Join(conds, " AND ") + " ORDER BY Id ASC"
	if n >= 0 {
		soql += " LIMIT " + strconv.Itoa(n)
	}
	return soql, nil
}

// tooLong reports whether the longest query this reader can send would exceed the URL budget.
func (k *keysetReader) tooLong() bool {
	sample := *k
	p := position{ts: time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC), key: "000000000000000AAA"}
	sample.start, sample.last, sample.probeMax, sample.top = p, &p, p.key, p.ts
	soql, err := sample.build(fullPage)
	return err == nil && len(url.QueryEscape(soql)) > maxQueryEscaped
}
