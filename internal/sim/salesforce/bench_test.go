package salesforce

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkEventLogFileGenerate measures the CSV generator alone.
func BenchmarkEventLogFileGenerate(b *testing.B) {
	org := New(Options{Seed: 1, Now: func() time.Time { return epoch }})
	id, err := org.AddEventLogFile(EventLogFileSpec{EventType: "API", Interval: IntervalHourly, TargetBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	r, _ := org.Get(id)
	b.SetBytes(int64(r["LogFileLength"].(float64)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := org.EventLogFileContent(id, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEventLogFileDownload measures a download over loopback HTTP,
// plain and gzip-encoded.
func BenchmarkEventLogFileDownload(b *testing.B) {
	for _, enc := range []string{"identity", "gzip"} {
		b.Run(enc, func(b *testing.B) {
			e := newEnv(b, Options{})
			e.login()
			id, err := e.org.AddEventLogFile(EventLogFileSpec{EventType: "API", Interval: IntervalHourly, TargetBytes: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			r, _ := e.org.Get(id)
			b.SetBytes(int64(r["LogFileLength"].(float64)))
			tr := &http.Transport{DisableCompression: enc == "identity"}
			defer tr.CloseIdleConnections()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req, _ := http.NewRequest(http.MethodGet, e.srv.URL+ver+"/sobjects/EventLogFile/"+id+"/LogFile", nil)
				req.Header.Set("Authorization", "Bearer "+e.token)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkQueryPage measures one 2000-row query page.
func BenchmarkQueryPage(b *testing.B) {
	e := newEnv(b, Options{})
	uid, _ := e.org.UserID(testUser)
	recs := make([]Record, 2000)
	for i := range recs {
		recs[i] = Record{"UserId": uid, "LoginTime": epoch.Add(-time.Duration(i) * time.Second), "Status": "Success"}
	}
	if _, err := e.org.Insert("LoginHistory", recs...); err != nil {
		b.Fatal(err)
	}
	e.login()
	h := e.org.Handler()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest(http.MethodGet, ver+"/query?q=SELECT+Id,LoginTime,Status,UserId+FROM+LoginHistory+ORDER+BY+LoginTime,Id", nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
