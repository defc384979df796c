package salesforce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
)

func TestQueryFollowsNextRecordsURL(t *testing.T) {
	org := newTestOrg(t)
	const soql = "SELECT Id, LogUser.Username, LogLength FROM ApexLog"
	var mu sync.Mutex
	var seen []string
	org.handle("GET /services/data/v60.0/query", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, "first q="+r.URL.Query().Get("q")+" opts="+r.Header.Get("Sforce-Query-Options"))
		mu.Unlock()
		queryPage(w, 5, "/services/data/v60.0/query/01gXX0000000001AAA-2",
			map[string]any{"attributes": map[string]any{"type": "ApexLog"}, "Id": "07L000000000001AAA", "LogLength": json.Number("12899.0"),
				"LogUser": map[string]any{"attributes": map[string]any{"type": "User"}, "Username": "a@example.com"}},
			map[string]any{"Id": "07L000000000002AAA", "LogLength": 7, "LogUser": nil})
	})
	org.handle("GET /services/data/v60.0/query/{locator}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, "next "+r.PathValue("locator")+" q="+r.URL.Query().Get("q"))
		mu.Unlock()
		if r.PathValue("locator") == "01gXX0000000001AAA-2" {
			queryPage(w, 5, "/services/data/v60.0/query/01gXX0000000001AAA-4",
				map[string]any{"Id": "07L000000000003AAA"}, map[string]any{"Id": "07L000000000004AAA"})
			return
		}
		queryPage(w, 5, "", map[string]any{"Id": "07L000000000005AAA"})
	})
	c := org.client(t, func(o *Options) { o.BatchSize = 500 })
	var ids []string
	for r, err := range c.Records(context.Background(), soql) {
		if err != nil {
			t.Fatal(err)
		}
		id, _ := r.String("Id")
		ids = append(ids, id)
	}
	want := []string{"07L000000000001AAA", "07L000000000002AAA", "07L000000000003AAA", "07L000000000004AAA", "07L000000000005AAA"}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("ids = %v", ids)
	}
	wantSeen := []string{
		"first q=" + soql + " opts=batchSize=500",
		"next 01gXX0000000001AAA-2 q=",
		"next 01gXX0000000001AAA-4 q=",
	}
	if !reflect.DeepEqual(seen, wantSeen) {
		t.Fatalf("requests = %q\nwant %q", seen, wantSeen)
	}
	if n := c.Stats().Calls[KindQuery]; n != 3 {
		t.Fatalf("query calls = %d, want 3", n)
	}
}

func TestPagesStopEarlyAndNextPage(t *testing.T) {
	org := newTestOrg(t)
	var next atomic.Int64
	org.handle("GET /services/data/v60.0/tooling/query", func(w http.ResponseWriter, r *http.Request) {
		queryPage(w, 4, "/services/data/v60.0/tooling/query/01g-2", map[string]any{"Id": "07L000000000001AAA"})
	})
	org.handle("GET /services/data/v60.0/tooling/query/{loc}", func(w http.ResponseWriter, r *http.Request) {
		next.Add(1)
		queryPage(w, 4, "", map[string]any{"Id": "07L000000000002AAA"})
	})
	c := org.client(t)
	for p, err := range c.ToolingPages(context.Background(), "SELECT Id FROM ApexLog") {
		if err != nil || len(p.Records) != 1 {
			t.Fatal(p, err)
		}
		break // a caller that stops early costs no further page
	}
	if next.Load() != 0 {
		t.Fatalf("next page fetched after the caller stopped")
	}
	p, err := c.ToolingQuery(context.Background(), "SELECT Id FROM ApexLog")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.NextPage(context.Background(), p)
	if err != nil || !p2.Done || len(p2.Records) != 1 {
		t.Fatalf("NextPage = %+v, %v", p2, err)
	}
	if p3, err := c.NextPage(context.Background(), p2); p3 != nil || err != nil {
		t.Fatalf("NextPage after the last = %v, %v", p3, err)
	}
	if st := c.Stats(); st.Calls[KindToolingQuery] != 3 || st.Calls[KindQuery] != 0 {
		t.Fatalf("calls = %v", st.Calls)
	}
}

func TestNextRecordsURLMustStayOnInstance(t *testing.T) {
	org := newTestOrg(t)
	var stolen atomic.Int64
	evil := newTestOrg(t)
	evil.handle("GET /", func(w http.ResponseWriter, r *http.Request) { stolen.Add(1) })
	org.handle("GET /services/data/v60.0/query", func(w http.ResponseWriter, r *http.Request) {
		queryPage(w, 2, evil.srv.URL+"/services/data/v60.0/query/01g-1", map[string]any{"Id": "001000000000001AAA"})
	})
	c := org.client(t)
	var err error
	for _, err = range c.Records(context.Background(), "SELECT Id FROM Account") {
		if err != nil {
			break
		}
	}
	if !errors.Is(err, ErrBadResponse) || stolen.Load() != 0 {
		t.Fatalf("err = %v, foreign host hits = %d", err, stolen.Load())
	}
}

func TestQueryResultShapeChecks(t *testing.T) {
	for name, body := range map[string]string{
		"missing done":              `{"totalSize":1,"records":[]}`,
		"missing records":           `{"totalSize":1,"done":true}`,
		"not done without next url": `{"totalSize":1,"done":false,"records":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			org := newTestOrg(t)
			org.handle("GET /services/data/v60.0/query", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = fmt.Fprint(w, body)
			})
			c := org.client(t, func(o *Options) { o.MaxAttempts = 1 })
			if _, err := c.Query(context.Background(), "SELECT Id FROM Account"); !errors.Is(err, ErrBadResponse) {
				t.Fatalf("err = %v, want ErrBadResponse", err)
			}
			if n := c.Stats().Calls[KindQuery]; n != 1 {
				t.Fatalf("calls = %d with MaxAttempts 1, want 1", n)
			}
		})
	}
}

func TestRecordAccessors(t *testing.T) {
	var r Record
	raw := `{"attributes":{"type":"EventLogFile","url":"/x"},"Id":"0AT000000000001AAA","LogFileLength":12899.0,
		"Sequence":3,"Frac":1.5,"Big":123456789012345678,"Flag":true,"Nothing":null,
		"CreatedDate":"2026-06-30T01:00:00.000+0000",
		"LogUser":{"attributes":{"type":"User"},"Username":"a@example.com","Profile":{"Name":"Admin"}},"Empty":null}`
	dec := json.NewDecoder(stringsReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Type() != "EventLogFile" {
		t.Errorf("Type = %q", r.Type())
	}
	if n, ok := r.Int64("LogFileLength"); !ok || n != 12899 {
		t.Errorf("Int64(LogFileLength) = %d,%v", n, ok)
	}
	if n, ok := r.Int64("Big"); !ok || n != 123456789012345678 {
		t.Errorf("Int64(Big) = %d,%v", n, ok)
	}
	if _, ok := r.Int64("Frac"); ok {
		t.Error("Int64 accepted 1.5")
	}
	if f, ok := r.Float64("Frac"); !ok || f != 1.5 {
		t.Errorf("Float64 = %v,%v", f, ok)
	}
	if s, ok := r.String("LogUser.Username"); !ok || s != "a@example.com" {
		t.Errorf("String(LogUser.Username) = %q,%v", s, ok)
	}
	if s, ok := r.String("LogUser.Profile.Name"); !ok || s != "Admin" {
		t.Errorf("String(LogUser.Profile.Name) = %q,%v", s, ok)
	}
	if _, ok := r.String("Empty.Username"); ok {
		t.Error("path through a null relationship reported ok")
	}
	if _, ok := r.String("Nothing"); ok {
		t.Error("null reported as a string")
	}
	if s, _ := r.String("Flag"); s != "true" {
		t.Errorf("String(Flag) = %q", s)
	}
	if tm, ok := r.Time("CreatedDate"); !ok || FormatDateTime(tm) != "2026-06-30T01:00:00.000Z" {
		t.Errorf("Time = %v,%v", tm, ok)
	}
	flat := r.Flatten()
	want := map[string]any{
		"Id": "0AT000000000001AAA", "LogFileLength": json.Number("12899.0"), "Sequence": json.Number("3"),
		"Frac": json.Number("1.5"), "Big": json.Number("123456789012345678"), "Flag": true, "Nothing": nil,
		"CreatedDate": "2026-06-30T01:00:00.000+0000", "LogUser.Username": "a@example.com",
		"LogUser.Profile.Name": "Admin", "Empty": nil,
	}
	if !reflect.DeepEqual(flat, want) {
		t.Errorf("Flatten = %#v\nwant %#v", flat, want)
	}
	if _, ok := r["attributes"]; !ok {
		t.Error("Flatten modified the record")
	}
}

func TestCounterAttributesCallsPerCaller(t *testing.T) {
	org := newTestOrg(t)
	org.handle("GET /services/data/v60.0/query", func(w http.ResponseWriter, r *http.Request) {
		queryPage(w, 1, "", map[string]any{"Id": "001000000000001AAA"})
	})
	org.handle("GET "+limitsPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{})
	})
	c := org.client(t)
	var a, b Counter
	ctxA := WithCounter(context.Background(), &a)
	ctxB := WithCounter(context.Background(), &b)
	for range 2 {
		if _, err := c.Query(ctxA, "SELECT Id FROM Account"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Limits(ctxB); err != nil {
		t.Fatal(err)
	}
	// The first request (A's) minted the token, so A carries it.
	if got := a.Calls(); got[KindQuery] != 2 || got[KindToken] != 1 || got[KindLimits] != 0 || a.BytesRead() == 0 {
		t.Errorf("counter A = %v, %d bytes", got, a.BytesRead())
	}
	if got := b.Calls(); b.Total() != 1 || got[KindLimits] != 1 {
		t.Errorf("counter B = %v", got)
	}
	if st := c.Stats(); st.TotalCalls() != 4 {
		t.Errorf("client stats = %v, want 4 calls", st.Calls)
	}
}
