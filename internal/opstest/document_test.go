package opstest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
)

// A checkpoint document that is neither schema 2 nor the Python flat key map is refused with
// exit 7 (needs a human) and left byte-identical: never taken for a fresh or legacy document,
// which would move every fence and cursor back.
func TestCorruptDocumentsExit7AndStayUntouched(t *testing.T) {
	o := startOrg(t, simsf.AllPermissions())
	o.addFiles(t, []string{"Login"}, time.Now().Add(-2*time.Hour), 1, 3)
	rcv := startLoki(t, simloki.Options{})
	const schema2 = `{"schema":2,"fence":{"epoch":41,"holder":"h/1","lease":{"kind":"store","name":"sf2loki"}},` +
		`"writer":{"epoch":41,"invocation":"1","seq":3,"written_at":"2026-11-30T00:00:00Z"},` +
		`"checkpoints":{"eventlogfile:Login":{"value":{"v":1,"created":"2026-11-30T00:00:00.000Z","file_id":"0AT1","row":0,"done":true},"epoch":41,"updated_at":"2026-11-30T00:00:00Z"}}}`
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"truncated", schema2[:len(schema2)/2], "not a JSON object"},
		{"wrong types", strings.Replace(schema2, `"epoch":41,"holder"`, `"epoch":"41","holder"`, 1), "fields do not match schema 2"},
		// A schema-2 document that lost its schema member: once taken for a Python map, its
		// fence read as 0 and its cursors nested under a key called "checkpoints".
		{"schema missing", strings.Replace(schema2, `"schema":2,`, ``, 1), `schema-2 member`},
		{"null cursor", `{"schema":2,"checkpoints":{"eventlogfile:Login":{"value":null,"epoch":1}}}`, "has no value"},
		{"legacy map with a non-string value", `{"eventlogfile:Login":{"created":"x"},"__fence_epoch__":3}`, "not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := setup{org: o, loki: rcv.PushURL(), types: []string{"Login"}}
			cfg := s.write(t)
			if err := os.WriteFile(s.statePath, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			r := run("--config", cfg, "run-once")
			after, err := os.ReadFile(s.statePath)
			if err != nil {
				t.Fatal(err)
			}
			if r.code != 7 || !strings.Contains(r.stdout, `"outcome":"integrity"`) || !strings.Contains(r.stdout+r.stderr, tc.want) {
				t.Fatalf("run-once on a %s document: want exit 7 (integrity) naming %q; got %s", tc.name, tc.want, r)
			}
			if !bytes.Equal(after, []byte(tc.doc)) {
				t.Fatalf("the %s document was rewritten:\n%s", tc.name, after)
			}
			if len(rcv.Entries()) != 0 {
				t.Fatalf("%d entries shipped from a %s document", len(rcv.Entries()), tc.name)
			}
		})
	}
}

// An oversize document is refused at once with exit 7 on the read path, without reading it
// whole, and left untouched.
func TestOversizeDocumentExit7WithoutReadingItWhole(t *testing.T) {
	o := startOrg(t, simsf.AllPermissions())
	rcv := startLoki(t, simloki.Options{})
	s := setup{org: o, loki: rcv.PushURL(), types: []string{"Login"}}
	cfg := s.write(t)
	// 64 MiB of a sparse file: larger than the 16 MiB limit; reading it whole would show.
	f, err := os.Create(s.statePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	before, _ := os.Stat(s.statePath)
	r := run("--config", cfg, "run-once")
	if r.code != 7 || !strings.Contains(r.stdout+r.stderr, "size limit") || !strings.Contains(r.stdout+r.stderr, "state import") {
		t.Fatalf("run-once on an oversize document: want exit 7 naming the size limit and state import; got %s", r)
	}
	after, _ := os.Stat(s.statePath)
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("the oversize document was changed")
	}
}

// A store location that cannot work is a configuration error (exit 2) naming the OS cause,
// decided at once rather than after retries that can never succeed.
func TestImpossibleStorePathExit2WithTheCause(t *testing.T) {
	o := startOrg(t, simsf.AllPermissions())
	rcv := startLoki(t, simloki.Options{})
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := setup{org: o, loki: rcv.PushURL(), types: []string{"Login"}, statePath: filepath.Join(file, "state.json")}
	cfg := s.write(t)
	r := run("--config", cfg, "run-once")
	if r.code != 2 || !strings.Contains(r.stdout+r.stderr, "not a directory") {
		t.Fatalf("run-once with a state path under a regular file: want exit 2 naming the OS cause; got %s", r)
	}
}
