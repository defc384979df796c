package salesforce

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

func TestTLSOptions(t *testing.T) {
	var tokens atomic.Int64
	srv := httptest.NewTLSServer(tokenMux(&tokens))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	base := Options{
		LoginURL: srv.URL, ClientID: "cid", Username: "u@example.com", PrivateKeyPEM: testKeyPEM(),
		Logger: discardLogger(),
	}
	tests := []struct {
		name       string
		mod        func(*Options)
		wantOK     bool
		wantTokens int64 // token requests that reached the server
	}{
		{"unknown CA is refused, not retried", func(*Options) {}, false, 0},
		{"CA file trusted", func(o *Options) { o.TLSCAFile = caFile }, true, 1},
		{"insecure when asked", func(o *Options) { o.TLSInsecureSkipVerify = true }, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tokens.Store(0)
			o := base
			tt.mod(&o)
			c, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Session(context.Background())
			if (err == nil) != tt.wantOK {
				t.Fatalf("Session err = %v", err)
			}
			if !tt.wantOK {
				if errors.Is(err, ErrUnavailable) {
					t.Errorf("a certificate error reported as unavailable: %v", err)
				}
				if n := c.Stats().Calls[KindToken]; n != 1 {
					t.Errorf("attempts = %d, want 1", n)
				}
			}
			if tokens.Load() != tt.wantTokens {
				t.Errorf("token requests served = %d, want %d", tokens.Load(), tt.wantTokens)
			}
		})
	}
	t.Run("CA file without certificates", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.pem")
		_ = os.WriteFile(bad, []byte("not a cert"), 0o600)
		o := base
		o.TLSCAFile = bad
		var ce *ConfigError
		if _, err := New(o); !errors.As(err, &ce) || ce.Field != "TLSCAFile" {
			t.Fatalf("New = %v", err)
		}
	})
}
