package cli

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/config"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
)

// TestSOQLAndApexLogWiring builds both sources from a multi-org configuration against the
// simulated org and pulls one record of each: the config keys reach the options, and entries
// carry the org and sf_org_id labels.
func TestSOQLAndApexLogWiring(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	org := simsf.New(simsf.Options{Seed: 3, Logger: slog.New(slog.DiscardHandler)})
	org.AddUser("integration@example.com", simsf.AllPermissions())
	if err := org.AddJWTApp("3MVG9-wiring", &key.PublicKey, "integration@example.com"); err != nil {
		t.Fatal(err)
	}
	srv, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	now := time.Now()
	if _, err := org.Insert("LoginHistory", simsf.Record{"LoginTime": now.Add(-time.Minute), "Status": "Success"},
		simsf.Record{"LoginTime": now.Add(-2 * time.Hour), "Status": "Success"}); err != nil {
		t.Fatal(err)
	}
	if _, err := org.AddApexLog(simsf.ApexLogSpec{LogUser: "integration@example.com", StartTime: now.Add(-time.Minute), Body: []byte("debug body")}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	keyPath := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "c.yaml")
	yaml := fmt.Sprintf(`orgs:
  - name: prod
    salesforce:
      login_url: %s
      client_id: 3MVG9-wiring
      username: integration@example.com
      private_key_file: %s
    sources:
      soql:
        enabled: true
        objects:
          - name: LoginHistory
            lookback: 30m
            overlap: 0s
      apexlog:
        enabled: true
        users: [integration@example.com]
        max_body_bytes: 1KiB
`, srv.URL, keyPath)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{Path: cfgPath})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := buildShaper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := salesforce.New(salesforceOptions(cfg.Orgs[0].Salesforce, cfg.HTTP, slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	bindings, err := orgBindings(cfg, cfg.OrgList()[0], client, sh, slog.New(slog.DiscardHandler))
	if err != nil || len(bindings) != 2 {
		t.Fatalf("%d bindings (%v), want soql and apexlog", len(bindings), err)
	}
	for _, b := range bindings {
		src := b.Source
		streams, err := src.Open(context.Background(), source.OpenRequest{Log: slog.New(slog.DiscardHandler),
			Count: func(string, int64) {}, Note: func(string) {}})
		if err != nil {
			t.Fatal(err)
		}
		if len(streams) != 1 {
			t.Fatalf("%s: %d streams, want 1", src.Name(), len(streams))
		}
		var recs []source.Record
		for {
			var rec source.Record
			err := streams[0].Next(context.Background(), &rec)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", src.Name(), err)
			}
			recs = append(recs, rec)
		}
		// lookback 30m keeps one of the two logins; the ApexLog body is within 1KiB.
		if len(recs) != 1 {
			t.Fatalf("%s: %d records, want 1", src.Name(), len(recs))
		}
		e := recs[0].Entry
		if o, _ := e.Labels.Get("org"); o != "prod" {
			t.Fatalf("%s: labels %s, want org=prod", src.Name(), e.Labels)
		}
		if id, _ := e.Labels.Get("sf_org_id"); id != org.OrgID() {
			t.Fatalf("%s: labels %s, want sf_org_id=%s", src.Name(), e.Labels, org.OrgID())
		}
		if src.Name() == "apexlog" && !strings.Contains(e.Line, "debug body") {
			t.Fatalf("apexlog line %q", e.Line)
		}
	}
}
