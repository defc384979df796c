package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/config"
	"github.com/sf2loki/sf2loki/internal/hostileconfig"
)

const placeholderKey = "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEA\n-----END PRIVATE KEY-----\n"

// Every hostile input under the size cap is refused with a message saying why (or, for the
// largest valid one, loads), and at most MaxPrintedErrors problems are printed.
func TestLoadRefusesHostileInputs(t *testing.T) {
	for _, in := range hostileconfig.Inputs(placeholderKey) {
		t.Run(in.Name, func(t *testing.T) {
			if len(in.YAML) > config.MaxFileBytes {
				t.Fatalf("the input is %d bytes, over the cap %d", len(in.YAML), config.MaxFileBytes)
			}
			path := writeTemp(t, string(in.YAML))
			cfg, err := config.Load(config.LoadOptions{Path: path, Environ: append([]string{}, in.Env...)})
			if in.Want == "" {
				if err != nil {
					t.Fatalf("the valid input was refused: %v", err)
				}
				if cfg == nil {
					t.Fatal("no configuration")
				}
				return
			}
			var errs config.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Load = %v, want config.Errors", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, in.Want) {
				t.Errorf("the refusal does not say %q:\n%.2000s", in.Want, msg)
			}
			if lines := strings.Count(msg, "\n") + 1; lines > config.MaxPrintedErrors+1 {
				t.Errorf("%d lines printed for %d problems, want at most %d", lines, len(errs), config.MaxPrintedErrors+1)
			}
			if len(errs) > config.MaxPrintedErrors && !strings.HasSuffix(msg, "… and "+strconv.Itoa(len(errs)-config.MaxPrintedErrors)+" more") {
				t.Errorf("%d problems but the message does not end with how many more:\n%.300s", len(errs), msg[max(0, len(msg)-300):])
			}
		})
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sf2loki.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// An endless or oversize configuration, secret or other named file (ca_file, credentials_file) is
// refused after reading just past its cap, with a message naming the key, the file and the cap;
// a file at the cap loads.
func TestLoadRefusesOversizeFiles(t *testing.T) {
	dir := t.TempDir()
	atCap := filepath.Join(dir, "at-cap.yaml")
	if err := os.WriteFile(atCap, []byte("#"+strings.Repeat("x", config.MaxFileBytes-2)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	overCap := filepath.Join(dir, "over-cap.yaml")
	if err := os.WriteFile(overCap, []byte("#"+strings.Repeat("x", config.MaxFileBytes-1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bigSecret := filepath.Join(dir, "big.secret")
	if err := os.WriteFile(bigSecret, []byte(strings.Repeat("s", config.MaxSecretFileBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	bigCA := filepath.Join(dir, "big-ca.pem")
	if err := os.WriteFile(bigCA, []byte(strings.Repeat("c", config.MaxNamedFileBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	smallCA := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(smallCA, []byte(strings.Repeat("c", config.MaxNamedFileBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	caAt := func(file string) string {
		return writeTemp(t, "sink:\n  loki:\n    tls:\n      ca_file: "+file+"\n")
	}
	secretAt := func(file string) string {
		return writeTemp(t, "sink:\n  loki:\n    username: u\n    password_file: "+file+"\n")
	}
	cases := []struct {
		name, path string
		want       []string // "" = loads
	}{
		{"config at the cap", atCap, nil},
		{"config over the cap", overCap, []string{overCap, "larger than 256KiB"}},
		{"config /dev/zero", "/dev/zero", []string{"/dev/zero", "larger than 256KiB"}},
		{"secret over the cap", secretAt(bigSecret), []string{"sink.loki.password_file", bigSecret, "larger than 64KiB"}},
		{"secret /dev/zero", secretAt("/dev/zero"), []string{"sink.loki.password_file", "/dev/zero", "larger than 64KiB"}},
		{"ca_file at the cap", caAt(smallCA), nil},
		{"ca_file over the cap", caAt(bigCA), []string{"sink.loki.tls.ca_file", bigCA, "larger than 1MiB"}},
		{"ca_file /dev/zero", caAt("/dev/zero"), []string{"sink.loki.tls.ca_file", "/dev/zero", "larger than 1MiB"}},
		{"credentials_file missing", writeTemp(t, "state:\n  gcs:\n    credentials_file: "+filepath.Join(dir, "none.json")+"\n"),
			[]string{"state.gcs.credentials_file", "none.json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(config.LoadOptions{Path: tc.path, Environ: []string{}})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not name %q: %v", w, err)
				}
			}
		})
	}
}
