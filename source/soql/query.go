package soql

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"
	"unsafe"

	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source/keyset"
)

// row is one record read, with its position.
type row struct {
	rec salesforce.Row
	pos keyset.Position
}

// reader yields rows in ascending (timestamp, key) order; io.EOF ends the run's range.
type reader interface {
	next(ctx context.Context) (row, error)
}

// maxQueryEscaped bounds the URL-encoded SOQL text; above it the field list is replaced by
// FIELDS(ALL) (Salesforce refuses request URIs over about 16 KB).
const maxQueryEscaped = 12000

// querier holds what every query of one object shares. Its Select is the explicit field list,
// or "FIELDS(ALL)" (then LIMIT is at most 200).
type querier struct {
	keyset.Query
	client    *salesforce.Client
	fieldsAll bool
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

// parse reads a row's position. A row without a usable timestamp or key cannot be placed in
// the order the cursor follows; Salesforce never returns one for a query filtered on the
// timestamp, so it is an error.
func (q *querier) parse(r salesforce.Row) (row, error) {
	if q.at == nil {
		q.at = salesforce.NewFieldIndex([]string{posTS: q.TSField, posKey: q.Kind.Field()})
	}
	at := q.at.Locate(r)
	i := at[posTS]
	if i < 0 || !isText(r.Kind(i)) {
		return row{}, fmt.Errorf("soql: %s row without %s", q.Object, q.TSField)
	}
	t, err := salesforce.ParseDateTimeBytes(r.Value(i))
	if err != nil {
		return row{}, fmt.Errorf("soql: %s row: %s: %w", q.Object, q.TSField, err)
	}
	i = at[posKey]
	if i < 0 || !isText(r.Kind(i)) || len(r.Value(i)) == 0 {
		return row{}, fmt.Errorf("soql: %s row without %s", q.Object, q.Kind.Field())
	}
	return row{rec: r, pos: keyset.Position{TS: t, Key: q.key(r.Value(i))}}, nil
}

// isText reports whether a value of kind k has text (Row.String's ok).
func isText(k salesforce.ValueKind) bool {
	return k == salesforce.ValueString || k == salesforce.ValueNumber || k == salesforce.ValueBool
}

// keysetReader reads a standard object in (timestamp, Id) order with the queries its pager
// decides (see keyset.Pager). A query's pages are followed by nextRecordsUrl, so a run costs
// one call per page (2000 rows with an explicit field list). A LIMIT is set only when the run
// can take fewer rows than a page.
type keysetReader struct {
	q     *querier
	pager keyset.Pager
	// limit returns the LIMIT of the next query: 0 to stop, negative for none.
	limit func() int

	page  *salesforce.RowPage
	buf   []salesforce.Row
	open  bool // a query's pages are being read
	got   int  // rows received by the open query
	asked int  // its LIMIT, negative for none
	done  bool
}

func (k *keysetReader) next(ctx context.Context) (row, error) {
	for {
		if len(k.buf) > 0 {
			r, err := k.q.parse(k.buf[0])
			k.buf = k.buf[1:]
			if err != nil {
				return row{}, err
			}
			ok, err := k.pager.Row(r.pos)
			if err != nil {
				return row{}, fmt.Errorf("soql: %s: %w", k.q.Object, err)
			}
			if !ok {
				// The pager abandons the query: its next one reads the rows in another order.
				k.buf, k.open = nil, false
				continue
			}
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
			if (k.asked < 0 || k.got < k.asked) && !k.pager.Drained() {
				k.done = true
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
	soql, err := k.pager.Next(n)
	if err != nil {
		return err
	}
	k.page.Release() // as in next: its rows are all handed out
	p, err := k.q.client.QueryRows(ctx, soql)
	if err != nil {
		return err
	}
	k.page, k.buf, k.got, k.asked, k.open = p, p.Rows, len(p.Rows), n, true
	return nil
}

// tooLong reports whether the longest query this reader can send would exceed the URL budget.
func (k *keysetReader) tooLong() bool {
	return len(url.QueryEscape(k.pager.Longest(fullPage))) > maxQueryEscaped
}
