package salesforce

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFaultsAndAccounting(t *testing.T) {
	e := newEnv(t, Options{})
	insertLoginHistory(t, e.org, 10)
	e.login()
	q := "SELECT Id FROM LoginHistory"

	e.org.FailNext(KindQuery, 2, 503)
	for i := 0; i < 2; i++ {
		if code, _, ec := e.query(q); code != 503 || ec != CodeServerUnavailable {
			t.Fatalf("fault %d: %d %s", i, code, ec)
		}
	}
	if code, _, _ := e.query(q); code != 200 {
		t.Fatalf("after faults: %d", code)
	}

	// Faults target a kind; others pass.
	e.org.FailNext(KindDescribe, 1, 500)
	if code, _, _ := e.query(q); code != 200 {
		t.Fatal("query hit a describe fault")
	}
	if resp, b := e.get(ver + "/sobjects/LoginHistory/describe"); resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), CodeUnknownException) {
		t.Fatalf("describe fault: %d %s", resp.StatusCode, b)
	}

	e.org.HTMLNext("", 1)
	resp, b := e.get(ver + "/query?q=" + url.QueryEscape(q))
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.HasPrefix(string(b), "<!DOCTYPE html>") {
		t.Fatalf("HTML fault: %d %s", resp.StatusCode, b)
	}

	e.org.AddFault(Fault{Kind: KindQuery, Status: 502})
	if resp, _ := e.get(ver + "/query?q=" + url.QueryEscape(q)); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("502 fault: %d", resp.StatusCode)
	}

	// Persistent faults until cleared.
	e.org.AddFault(Fault{Kind: KindLimits, Times: -1, Status: 503})
	for i := 0; i < 3; i++ {
		if resp, _ := e.get(ver + "/limits"); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("persistent fault %d: %d", i, resp.StatusCode)
		}
	}
	e.org.ClearFaults()
	if resp, _ := e.get(ver + "/limits"); resp.StatusCode != http.StatusOK {
		t.Fatal("ClearFaults left a fault")
	}

	// Every request is counted by kind, whatever its outcome.
	calls := e.org.Calls()
	if calls[KindQuery] != 6 || calls[KindDescribe] != 1 || calls[KindLimits] != 4 || calls[KindToken] != 1 {
		t.Errorf("calls %v", calls)
	}
	e.org.ResetCalls()
	if e.org.TotalCalls() != 0 {
		t.Error("ResetCalls")
	}
}

func TestSlowResponsesHonourContext(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	e.org.AddFault(Fault{Kind: KindLimits, Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+ver+"/limits", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow response: %v", err)
	}
	e.org.SetLatency(time.Millisecond)
	if resp, _ := e.get(ver + "/limits"); resp.StatusCode != http.StatusOK {
		t.Fatalf("with latency: %d", resp.StatusCode)
	}
}

func TestRequestLimit(t *testing.T) {
	e := newEnv(t, Options{DailyAPILimit: 5})
	e.login()
	q := "SELECT Id FROM User"
	for i := 1; i <= 5; i++ {
		resp, _ := e.get(ver + "/query?q=" + url.QueryEscape(q))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Sforce-Limit-Info") != "api-usage="+itoa(i)+"/5" {
			t.Fatalf("call %d: %d %q", i, resp.StatusCode, resp.Header.Get("Sforce-Limit-Info"))
		}
	}
	resp, b := e.get(ver + "/query?q=" + url.QueryEscape(q))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), CodeRequestLimitExceeded) || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("over the limit: %d %s", resp.StatusCode, b)
	}
	// /limits still answers and does not count.
	resp, b = e.get(ver + "/limits")
	var lim map[string]map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &lim) != nil || lim["DailyApiRequests"]["Max"] != 5.0 || lim["DailyApiRequests"]["Remaining"] != 0.0 {
		t.Fatalf("/limits: %d %s", resp.StatusCode, b)
	}
	if _, nested := lim["PermissionSets"]["CreateCustom"].(map[string]any); !nested {
		t.Error("/limits lacks a nested sub-limit")
	}
	e.org.SetDailyAPILimit(100)
	if code, _, _ := e.query(q); code != 200 {
		t.Fatal("raised limit not applied")
	}
	e.org.SetRequestLimitExceeded(true)
	if code, _, ec := e.query(q); code != 403 || ec != CodeRequestLimitExceeded {
		t.Fatalf("forced limit: %d %s", code, ec)
	}
	e.org.SetRequestLimitExceeded(false)
	if used, max := e.org.APIUsage(); used != 6 || max != 100 {
		t.Errorf("usage %d/%d", used, max)
	}
}

func TestURLTooLong(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	var ids []string
	for i := 0; i < 700; i++ {
		ids = append(ids, "'"+makeID("0Yc", uint64(i+1))+"'")
	}
	q := "SELECT Id FROM LoginEvent WHERE EventDate = 2026-06-30T00:00:00Z AND Id NOT IN (" + strings.Join(ids, ",") + ")"
	resp, b := e.get(ver + "/query?q=" + url.QueryEscape(q))
	if resp.StatusCode != http.StatusRequestURITooLong || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%d bytes of URL: %d %s", len(q), resp.StatusCode, b)
	}
	if e.org.CallCount(KindQuery) != 1 {
		t.Error("the refused request is still counted")
	}
}

func TestDateHeaderFollowsClock(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	e.clock.Advance(90 * time.Second)
	resp, _ := e.get(ver + "/limits")
	if d, err := http.ParseTime(resp.Header.Get("Date")); err != nil || !d.Equal(epoch.Add(90*time.Second)) {
		t.Fatalf("Date %q", resp.Header.Get("Date"))
	}
}

// TestConcurrentUse runs queries, downloads and runtime knobs in parallel
// (meaningful under -race).
func TestConcurrentUse(t *testing.T) {
	e := populatedEnv(t, Options{})
	id := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "API", Rows: 2000}))
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				req, _ := http.NewRequest(http.MethodGet, e.srv.URL+ver+"/query?q="+url.QueryEscape("SELECT Id, LoginTime FROM LoginHistory ORDER BY LoginTime"), nil)
				req.Header.Set("Authorization", "Bearer "+e.token)
				req.Header.Set("Sforce-Query-Options", "batchSize=200")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
				req, _ = http.NewRequest(http.MethodGet, e.srv.URL+ver+"/sobjects/EventLogFile/"+id+"/LogFile", nil)
				req.Header.Set("Authorization", "Bearer "+e.token)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		e.org.FailNext(KindQuery, 1, 503)
		e.org.SetLatency(0)
		_ = e.org.Calls()
		must[[]string](t)(e.org.Insert("LoginHistory", Record{"LoginTime": epoch}))
		noErr(t, e.org.RegenerateEventLogFile(id, epoch, 2000+i))
	}
	wg.Wait()
}

func TestRequestLimitFaults(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	q := ver + "/query?q=" + url.QueryEscape("SELECT Id FROM User")
	e.org.RequestLimitNext(KindQuery, 2, LimitConcurrentRequests)
	e.org.RequestLimitNext(KindQuery, 1, "")
	for i, want := range []RequestLimit{LimitConcurrentRequests, LimitConcurrentRequests, LimitTotalRequests} {
		resp, b := e.get(q)
		var body []map[string]string
		if resp.StatusCode != http.StatusForbidden || json.Unmarshal(b, &body) != nil || len(body) != 1 ||
			body[0]["errorCode"] != CodeRequestLimitExceeded || body[0]["message"] != string(want) {
			t.Fatalf("request %d: %d %s, want 403 %s", i, resp.StatusCode, b, want)
		}
	}
	if resp, _ := e.get(q); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the faults: %d", resp.StatusCode)
	}
}

func TestFaultAfter(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	q := ver + "/query?q=" + url.QueryEscape("SELECT Id FROM User")
	e.org.AddFault(Fault{Kind: KindQuery, After: 2, Status: http.StatusServiceUnavailable})
	for i, want := range []int{200, 200, 503, 200} {
		if resp, _ := e.get(q); resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
}

// TestConcurrentLimitAndLatencyRange: with a concurrent limit of 2, a third request arriving
// while two are being answered (held by the latency) is refused with the concurrent-requests
// REQUEST_LIMIT_EXCEEDED; the peak counts it; once they finish a request is answered again.
func TestConcurrentLimitAndLatencyRange(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	e.org.SetLatencyRange(time.Second, 1200*time.Millisecond) // long enough for the third to arrive
	e.org.SetConcurrentLimit(2)
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Go(func() {
			resp, _ := e.get(ver + "/limits")
			codes <- resp.StatusCode
		})
	}
	for e.org.PeakConcurrent() < 2 { // both are being answered
		time.Sleep(time.Millisecond)
	}
	resp, b := e.get(ver + "/limits")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), string(LimitConcurrentRequests)) {
		t.Fatalf("third concurrent request: %d %s", resp.StatusCode, b)
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Fatalf("a request within the limit got %d", c)
		}
	}
	e.org.SetLatency(0)
	if resp, _ := e.get(ver + "/limits"); resp.StatusCode != http.StatusOK || e.org.PeakConcurrent() != 3 {
		t.Fatalf("after the others finished: %d, peak %d", resp.StatusCode, e.org.PeakConcurrent())
	}
}
