package salesforce

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func TestStartAndListenAndServe(t *testing.T) {
	org := New(Options{})
	srv := must[*Server](t)(org.Start())
	resp, err := http.Get(srv.URL + "/services/data/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Start: %d", resp.StatusCode)
	}
	noErr(t, srv.Close())

	ln := must[net.Listener](t)(net.Listen("tcp", "127.0.0.1:0"))
	addr := ln.Addr().String()
	noErr(t, ln.Close())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- org.ListenAndServe(ctx, addr) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/services/data/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListenAndServe never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ListenAndServe returned %v after cancel", err)
	}
}

func TestExplicitBaseURL(t *testing.T) {
	const my = "https://acme.my.salesforce.com"
	e := newEnv(t, Options{BaseURL: my + "/"})
	key, _ := keys(t)
	c := e.claims()
	if code, m := e.postToken(url.Values{"grant_type": {GrantJWTBearer}, "assertion": {signJWT(t, key, c)}}); code != 400 || m["error_description"] != DescAudienceInvalid {
		t.Fatalf("aud = listener URL with an explicit BaseURL: %d %v", code, m)
	}
	c["aud"] = my
	code, m := e.postToken(url.Values{"grant_type": {GrantJWTBearer}, "assertion": {signJWT(t, key, c)}})
	if code != 200 || m["instance_url"] != my || m["id"] != my+"/id/"+e.org.OrgID()+"/"+e.org.mustUser(t, testUser) {
		t.Fatalf("%d %v", code, m)
	}
	e.token = m["access_token"].(string)
	insertLoginHistory(t, e.org, 2100)
	_, p, _ := e.query("SELECT Id FROM LoginHistory")
	if p.NextRecordsURL == "" || p.NextRecordsURL[0] != '/' {
		t.Fatalf("nextRecordsUrl must be a path relative to instance_url: %q", p.NextRecordsURL)
	}
}

func TestNewKeyPairWorksWithJWTApps(t *testing.T) {
	kp := must[*KeyPair](t)(NewKeyPair(epoch))
	e := newEnv(t, Options{})
	noErr(t, e.org.AddJWTApp("kp-app", kp.Certificate, testUser))
	c := e.claims()
	c["iss"] = "kp-app"
	if code, m := e.postToken(url.Values{"grant_type": {GrantJWTBearer}, "assertion": {signJWT(t, kp.Key, c)}}); code != 200 {
		t.Fatalf("%d %v", code, m)
	}
	if len(kp.KeyPEM) == 0 || len(kp.RSAKeyPEM) == 0 || len(kp.CertificatePEM) == 0 {
		t.Fatal("PEM encodings missing")
	}
}

// TestEventLogFileDiscoveryQuirk: an unfiltered GROUP BY EventType
// under-reports; the Interval-filtered form is complete.
func TestEventLogFileDiscoveryQuirk(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	for _, s := range []EventLogFileSpec{{EventType: "Login"}, {EventType: "API", Interval: IntervalHourly}, {EventType: "URI", Interval: IntervalHourly}} {
		must[string](t)(e.org.AddEventLogFile(s))
	}
	types := func(q string) []string {
		_, p, ec := e.query(q)
		if ec != "" {
			t.Fatal(ec)
		}
		var out []string
		for _, r := range p.Records {
			out = append(out, r["EventType"].(string))
		}
		return out
	}
	if got := types("SELECT EventType FROM EventLogFile WHERE Interval = 'Hourly' GROUP BY EventType"); len(got) != 2 || got[0] != "API" || got[1] != "URI" {
		t.Errorf("filtered discovery: %v", got)
	}
	if got := types("SELECT EventType FROM EventLogFile GROUP BY EventType"); len(got) != 1 || got[0] != "Login" {
		t.Errorf("unfiltered discovery: %v", got)
	}
}
