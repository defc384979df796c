package salesforce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Page is one page of a SOQL answer.
type Page struct {
	// TotalSize is Salesforce's count of matching rows (over all pages).
	TotalSize int
	// Done is true on the last page.
	Done bool
	// NextRecordsURL is the instance path of the next page when Done is false.
	NextRecordsURL string
	// Records are the rows of this page, in server order.
	Records []Record

	tooling bool
}

// pageJSON is the wire shape; pointers tell missing members from zero ones.
type pageJSON struct {
	TotalSize      *int     `json:"totalSize"`
	Done           *bool    `json:"done"`
	NextRecordsURL string   `json:"nextRecordsUrl"`
	Records        []Record `json:"records"`
}

// Query runs a SOQL query and returns its first page. Build soql only with
// the helpers of soql.go. Pages ask for Options.BatchSize rows
// (Sforce-Query-Options); Salesforce may return fewer.
func (c *Client) Query(ctx context.Context, soql string) (*Page, error) {
	return c.query(ctx, soql, false)
}

// ToolingQuery runs a Tooling API SOQL query (ApexLog, TraceFlag, …) and
// returns its first page.
func (c *Client) ToolingQuery(ctx context.Context, soql string) (*Page, error) {
	return c.query(ctx, soql, true)
}

func (c *Client) query(ctx context.Context, soql string, tooling bool) (*Page, error) {
	if strings.TrimSpace(soql) == "" {
		return nil, errors.New("salesforce: empty SOQL query")
	}
	rest := "query"
	if tooling {
		rest = "tooling/query"
	}
	return c.fetchPage(ctx, c.dataPath(rest)+"?q="+url.QueryEscape(soql), tooling)
}

// NextPage fetches the page after p by its nextRecordsUrl. It returns
// (nil, nil) when p is the last page.
func (c *Client) NextPage(ctx context.Context, p *Page) (*Page, error) {
	if p == nil || p.Done || p.NextRecordsURL == "" {
		return nil, nil
	}
	return c.fetchPage(ctx, p.NextRecordsURL, p.tooling)
}

func (c *Client) fetchPage(ctx context.Context, path string, tooling bool) (*Page, error) {
	kind, hdr, err := c.pageRequest(path, tooling)
	if err != nil {
		return nil, err
	}
	var page *Page
	err = c.authorizedJSON(ctx, kind, path, hdr, func(b []byte) error {
		var pj pageJSON
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber() // keeps 12899.0 and 18-digit numbers exactly as sent
		if err := dec.Decode(&pj); err != nil {
			return err
		}
		if pj.Done == nil || pj.Records == nil {
			return errors.New("not a query result: missing done or records")
		}
		page = &Page{Done: *pj.Done, NextRecordsURL: pj.NextRecordsURL, Records: pj.Records, tooling: tooling}
		if pj.TotalSize != nil {
			page.TotalSize = *pj.TotalSize
		}
		if !page.Done && page.NextRecordsURL == "" {
			return errors.New("done is false but nextRecordsUrl is missing")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// pageRequest is what fetching a page of a query needs: the call's kind and the header asking
// for Options.BatchSize rows. The locator path is followed on the instance only: an absolute URL
// in nextRecordsUrl must never receive our bearer token.
func (c *Client) pageRequest(path string, tooling bool) (Kind, http.Header, error) {
	if !strings.HasPrefix(path, "/services/") {
		return "", nil, fmt.Errorf("%w: nextRecordsUrl %q is not an instance path", ErrBadResponse, excerpt([]byte(path)))
	}
	kind := KindQuery
	if tooling {
		kind = KindToolingQuery
	}
	return kind, http.Header{"Sforce-Query-Options": {"batchSize=" + strconv.Itoa(c.opts.BatchSize)}}, nil
}

// Pages runs soql and yields every page, following nextRecordsUrl until the
// last one. Iteration stops after the first error, which is yielded with a
// nil page. Stopping early leaves the server-side locator to expire.
func (c *Client) Pages(ctx context.Context, soql string) iter.Seq2[*Page, error] {
	return c.pages(ctx, soql, false)
}

// ToolingPages is Pages for a Tooling API query.
func (c *Client) ToolingPages(ctx context.Context, soql string) iter.Seq2[*Page, error] {
	return c.pages(ctx, soql, true)
}

func (c *Client) pages(ctx context.Context, soql string, tooling bool) iter.Seq2[*Page, error] {
	return func(yield func(*Page, error) bool) {
		p, err := c.query(ctx, soql, tooling)
		for {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(p, nil) || p.Done {
				return
			}
			p, err = c.NextPage(ctx, p)
		}
	}
}

// Records runs soql and yields every record of every page. Iteration stops
// after the first error, which is yielded with a nil record.
func (c *Client) Records(ctx context.Context, soql string) iter.Seq2[Record, error] {
	return records(c.pages(ctx, soql, false))
}

// ToolingRecords is Records for a Tooling API query.
func (c *Client) ToolingRecords(ctx context.Context, soql string) iter.Seq2[Record, error] {
	return records(c.pages(ctx, soql, true))
}

func records(pages iter.Seq2[*Page, error]) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for p, err := range pages {
			if err != nil {
				yield(nil, err)
				return
			}
			for _, r := range p.Records {
				if !yield(r, nil) {
					return
				}
			}
		}
	}
}
