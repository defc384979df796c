package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/internal/demo"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
)

// max_retries counts retries, so a request is sent max_retries + 1 times, and 0 means one
// attempt: for Salesforce (which once made 4 attempts with 0) and Loki (which once made 9).
// The configuration is loaded from YAML and mapped onto the clients' options as run-once does.
func TestMaxRetriesCountsRetriesAfterOneAttempt(t *testing.T) {
	org := simsf.New(simsf.Options{Seed: 5, Logger: slog.New(slog.DiscardHandler)})
	org.AddUser(demo.User, simsf.AllPermissions())
	if err := org.AddClientCredentialsApp(demo.Client, "client-secret-value", demo.User); err != nil {
		t.Fatal(err)
	}
	srv, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	recv := simloki.Start(t, simloki.Options{})
	log := slog.New(slog.DiscardHandler)

	for _, retries := range []int{0, 2} {
		t.Run(fmt.Sprintf("max_retries=%d", retries), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sf2loki.yaml")
			yaml := fmt.Sprintf(`salesforce:
  login_url: %s
  auth_mode: client_credentials
  client_id: %s
  client_secret: client-secret-value
  max_retries: %d
sink:
  loki:
    url: %s
    max_retries: %d
    min_backoff: 1ms
    max_backoff: 2ms
`, srv.URL, demo.Client, retries, recv.PushURL(), retries)
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(config.LoadOptions{Path: path, Environ: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			want := retries + 1

			so := salesforceOptions(cfg.Salesforce, cfg.HTTP, log)
			so.RetryWaitMin, so.RetryWaitMax = time.Millisecond, 2*time.Millisecond
			sf, err := salesforce.New(so)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sf.Session(context.Background()); err != nil {
				t.Fatal(err)
			}
			before := org.Calls()[simsf.KindQuery]
			org.FailNext(simsf.KindQuery, 100, 503)
			defer org.ClearFaults()
			if _, err := sf.Query(context.Background(), "SELECT Id FROM LoginHistory"); err == nil {
				t.Fatal("the query succeeded against an org answering 503")
			}
			if got := org.Calls()[simsf.KindQuery] - before; got != want {
				t.Errorf("salesforce.max_retries %d: %d query attempts, want %d", retries, got, want)
			}

			lc, err := loki.New(lokiOptions(cfg.Sink.Loki, cfg.HTTP, log))
			if err != nil {
				t.Fatal(err)
			}
			recv.Reset()
			recv.FailNext(-1, 503, "")
			defer recv.ClearFaults()
			res := lc.Push(context.Background(), []loki.Entry{{Timestamp: time.Now(), Labels: loki.LabelsFromMap(map[string]string{"job": "sf2loki"}), Line: "x"}})
			if res.Err == nil {
				t.Fatal("the push succeeded against a receiver answering 503")
			}
			if got := len(recv.Requests()); got != want {
				t.Errorf("sink.loki.max_retries %d: %d push attempts, want %d", retries, got, want)
			}
		})
	}
}
