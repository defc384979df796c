package salesforce_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
)

// Example starts an org, mints a token with the client credentials flow and
// runs a query, the way a client under test would.
func Example() {
	now := time.Date(2026, 6, 30, 12, 0, 0, 0, time.UTC)
	org := simsf.New(simsf.Options{Seed: 1, Now: func() time.Time { return now }})
	org.AddUser("integration@example.com", simsf.AllPermissions())
	if err := org.AddClientCredentialsApp("my-client", "my-secret", "integration@example.com"); err != nil {
		panic(err)
	}
	if _, err := org.Insert("Audit_Event__c", simsf.Record{"Action__c": "Export", "Event_Time__c": now}); err != nil {
		panic(err)
	}
	srv, err := org.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	resp, err := http.PostForm(srv.URL+"/services/oauth2/token", url.Values{
		"grant_type": {"client_credentials"}, "client_id": {"my-client"}, "client_secret": {"my-secret"}})
	if err != nil {
		panic(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		InstanceURL string `json:"instance_url"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()

	q := url.QueryEscape("SELECT Action__c, Event_Time__c FROM Audit_Event__c")
	req, _ := http.NewRequest(http.MethodGet, tok.InstanceURL+"/services/data/v62.0/query?q="+q, nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	var page struct {
		TotalSize int `json:"totalSize"`
		Records   []struct {
			Action    string `json:"Action__c"`
			EventTime string `json:"Event_Time__c"`
		} `json:"records"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&page)
	resp.Body.Close()
	fmt.Println(page.TotalSize, page.Records[0].Action, page.Records[0].EventTime)
	fmt.Println(org.CallCount(simsf.KindToken), org.CallCount(simsf.KindQuery), resp.Header.Get("Sforce-Limit-Info"))
	// Output:
	// 1 Export 2026-06-30T12:00:00.000+0000
	// 1 1 api-usage=1/100000
}
