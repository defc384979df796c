package salesforce

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
)

// BenchmarkQueryPage measures fetching and decoding one 2000-row page (the
// per-API-call cost of the soql source), through the full client stack with
// an in-memory transport.
func BenchmarkQueryPage(b *testing.B) {
	records := make([]map[string]any, 2000)
	for i := range records {
		records[i] = map[string]any{
			"attributes": map[string]any{"type": "LoginHistory", "url": "/services/data/v60.0/sobjects/LoginHistory/0Ya"},
			"Id":         fmt.Sprintf("0Ya%015d", i), "LoginTime": "2026-06-30T01:00:00.000+0000",
			"SourceIp": "10.0.0.1", "Status": "Success", "Application": "Browser", "Browser": "Chrome 120",
			"Platform": "Mac OSX", "LoginType": "Application", "LoginUrl": "acme.my.salesforce.com",
			"ApiType": nil, "ApiVersion": "N/A", "CountryIso": "DE", "UserId": "0055g000000XyZwAAA",
		}
	}
	page, err := json.Marshal(map[string]any{"totalSize": 2000, "done": true, "records": records})
	if err != nil {
		b.Fatal(err)
	}
	var tokens atomic.Int64
	mux := tokenMux(&tokens)
	mux.HandleFunc("GET /services/data/v60.0/query", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(page)
	})
	c := inMemoryClient(b, mux)
	ctx := context.Background()
	// maps: Query, every row a map[string]any; rows: QueryRows, the page read into the last
	// released one, as the SOQL source reads it.
	b.Run("maps", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		b.ReportAllocs()
		for b.Loop() {
			p, err := c.Query(ctx, "SELECT Id FROM LoginHistory")
			if err != nil || len(p.Records) != 2000 {
				b.Fatal(p, err)
			}
		}
		b.ReportMetric(float64(b.N)*2000/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("rows", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		b.ReportAllocs()
		for b.Loop() {
			p, err := c.QueryRows(ctx, "SELECT Id FROM LoginHistory")
			if err != nil || len(p.Rows) != 2000 {
				b.Fatal(p, err)
			}
			p.Release()
		}
		b.ReportMetric(float64(b.N)*2000/b.Elapsed().Seconds(), "rows/s")
	})
}
