package keyset

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/salesforce"
)

// Query is what every query of one key shares.
type Query struct {
	// Object is the sObject queried (LoginHistory, ApexLog).
	Object string
	// Select is the field list.
	Select string
	// TSField is the timestamp field the key follows.
	TSField string
	// Kind is the key of the rows.
	Kind Kind
	// Where, when set, is a condition ANDed to every query (in parentheses).
	Where string
}

// AtOrAfter is the condition "row ≥ p" (incl) or "row > p" in (timestamp, key) order.
func (q *Query) AtOrAfter(p Position, incl bool) (string, error) {
	op := " > "
	if incl {
		op = " >= "
	}
	return q.cond(p, " >= ", " > ", op)
}

// Before is the negation of AtOrAfter.
func (q *Query) Before(p Position, incl bool) (string, error) {
	op := " <= "
	if incl {
		op = " < "
	}
	return q.cond(p, " < ", " < ", op)
}

// cond is the condition comparing a row with p: "ts <noKey> p.TS" when p has no key, else
// "(ts <strict> p.TS OR (ts = p.TS AND key <keyOp> p.Key))".
func (q *Query) cond(p Position, noKey, strict, keyOp string) (string, error) {
	lit := salesforce.FormatDateTime(p.TS)
	if p.Key == "" {
		return q.TSField + noKey + lit, nil
	}
	k, err := q.Kind.Quote(p.Key)
	if err != nil {
		return "", err
	}
	return "(" + q.TSField + strict + lit + " OR (" + q.TSField + " = " + lit + " AND " + q.Kind.Field() + keyOp + k + "))", nil
}

// Pager decides the queries of one key's run over a standard (or Tooling) object read in
// (timestamp, Id) order, and which of their rows are delivered; the source sends the queries
// (Next), hands it each row's position in the order received (Row) and says when a query has
// returned all its rows (Drained). A query is
//
//	WHERE [(where) AND] (start arm [OR probe arm]) [AND after last row] [AND ts < top]
//	ORDER BY ts ASC, Id ASC [LIMIT n]
//
// with the start arm "at or after Start" and the probe arm "(before Start) AND Id > ProbeMax".
// A query that returned its full LIMIT, or whose pages were lost, is continued by a new keyset
// query after the last row received.
//
// The probe arm's rows, when there are any, come first in that order, which is not Id order: a
// run cut after one of them would leave others with a lower Id unread, behind the max_id its
// cursor carries. So they are never delivered from that query. When its first row is a probe
// row, Row abandons the query and the pager reads the probe instead in Id order,
//
//	WHERE [(where) AND] Id > ProbeMax AND (before Start) [AND ts < top] ORDER BY Id ASC [LIMIT n]
//
// raising ProbeMax with every row, so that every probe row up to the one last delivered (the
// max_id of its cursor) is delivered wherever the run ends; then it sends the first query again
// (whose probe arm now starts at the raised ProbeMax, so a row that turned up meanwhile is found
// too). A run without late rows costs no further query.
type Pager struct {
	Query
	// Start is the window start (inclusive) or the position (exclusive); see Tracker.Start.
	Start     Position
	StartIncl bool
	// ProbeMax, when set, adds the probe arm (see Tracker.ProbeMax; ByID only).
	ProbeMax string
	// Top, when set, is an exclusive upper bound of the timestamps read (settle).
	Top time.Time

	last    *Position // nil, or &lastAt
	lastAt  Position
	probing bool // the query sent is the probe in Id order
	first   bool // the next row is the first of a query with a probe arm
}

// Next returns the text of the next query to send, with LIMIT n (negative: none).
func (p *Pager) Next(n int) (string, error) {
	build := p.build
	if p.probing {
		build = p.buildProbe
	}
	soql, err := build(n)
	if err != nil {
		return "", err
	}
	p.first = !p.probing && p.ProbeMax != "" && p.last == nil
	return soql, nil
}

// Row takes the position of the next row of the query Next last returned, and reports whether
// the row is delivered. False abandons that query: the source drops its remaining rows and
// sends Next's next one.
func (p *Pager) Row(r Position) (bool, error) {
	if p.probing {
		if strings.Compare(ByID.Norm(r.Key), ByID.Norm(p.ProbeMax)) <= 0 {
			return false, fmt.Errorf("the late-row probe returned row %s, not after %s; the Id condition is not applied", r.Key, p.ProbeMax)
		}
		p.ProbeMax = r.Key
		return true, nil
	}
	if p.first {
		p.first = false
		if c := p.Kind.Cmp(r, p.Start); c < 0 || c == 0 && !p.StartIncl {
			p.probing = true
			return false, nil
		}
	}
	if p.last != nil && r.Key == p.last.Key {
		// A keyset query returned the row it starts after: reading on would loop.
		return false, fmt.Errorf("row %s returned again after itself; the keyset condition is not applied", r.Key)
	}
	p.lastAt = r
	p.last = &p.lastAt
	return true, nil
}

// Drained says that the query Next last returned has returned all its rows (fewer than its
// LIMIT, or all its pages without one), and reports whether another query follows: after the
// probe, the query it interrupted.
func (p *Pager) Drained() bool {
	more := p.probing
	p.probing = false
	return more
}

// Longest returns the longest query text the pager can send, with LIMIT n.
func (p Pager) Longest(n int) string {
	sample := Position{TS: time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC), Key: "000000000000000AAA"}
	p.Start, p.last, p.ProbeMax, p.Top = sample, &sample, sample.Key, sample.TS
	p.probing = false
	soql, err := p.build(n)
	if err != nil {
		return ""
	}
	return soql
}

// build returns the text of the next keyset query with LIMIT n.
func (p *Pager) build(n int) (string, error) {
	var conds []string
	if p.Where != "" {
		conds = append(conds, "("+p.Where+")")
	}
	arm, err := p.AtOrAfter(p.Start, p.StartIncl)
	if err != nil {
		return "", err
	}
	if p.ProbeMax != "" {
		below, err := p.Before(p.Start, p.StartIncl)
		if err != nil {
			return "", err
		}
		m, err := salesforce.QuoteID(p.ProbeMax)
		if err != nil {
			return "", err
		}
		arm = "(" + arm + " OR (Id > " + m + " AND " + below + "))"
	}
	conds = append(conds, arm)
	if p.last != nil {
		after, err := p.AtOrAfter(*p.last, false)
		if err != nil {
			return "", err
		}
		conds = append(conds, after)
	}
	return p.text(conds, p.TSField+" ASC, Id ASC", n), nil
}

// buildProbe returns the text of the next probe query, in Id order, with LIMIT n.
func (p *Pager) buildProbe(n int) (string, error) {
	if p.Kind != ByID {
		return "", errors.New("the late-row probe needs rows keyed on Id")
	}
	var conds []string
	if p.Where != "" {
		conds = append(conds, "("+p.Where+")")
	}
	m, err := salesforce.QuoteID(p.ProbeMax)
	if err != nil {
		return "", err
	}
	below, err := p.Before(p.Start, p.StartIncl)
	if err != nil {
		return "", err
	}
	conds = append(conds, "Id > "+m, below)
	return p.text(conds, "Id ASC", n), nil
}

// text assembles a query: the conditions, the upper bound, the order, the LIMIT.
func (p *Pager) text(conds []string, order string, n int) string {
	if !p.Top.IsZero() {
		conds = append(conds, p.TSField+" < "+salesforce.FormatDateTime(p.Top))
	}
	soql := "SELECT " + p.Select + " FROM " + p.Object + " WHERE " + strings.Join(conds, " AND ") + " ORDER BY " + order
	if n >= 0 {
		soql += " LIMIT " + strconv.Itoa(n)
	}
	return soql
}
