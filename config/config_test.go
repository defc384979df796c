package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

func load(t *testing.T, yamlText string, env ...string) (*Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(yamlText), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(LoadOptions{Path: path, Environ: env})
}

func mustLoad(t *testing.T, yamlText string, env ...string) *Config {
	t.Helper()
	cfg, err := load(t, yamlText, env...)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return cfg
}

func TestDefaultsAreValid(t *testing.T) {
	if errs := Defaults().Validate(); len(errs) > 0 {
		t.Fatalf("defaults do not validate: %v", errs)
	}
}

func TestExampleLoadsToDefaults(t *testing.T) {
	cfg := mustLoad(t, string(Example()))
	def := Defaults()
	a, _ := json.Marshal(cfg)
	b, _ := json.Marshal(def)
	if !bytes.Equal(a, b) {
		t.Errorf("the example does not load to the defaults:\nexample:  %s\ndefaults: %s", a, b)
	}
}

func TestEnvOverrideBeatsYAML(t *testing.T) {
	cfg := mustLoad(t, "sink:\n  loki:\n    url: http://yaml.local:3100/loki/api/v1/push\nbatch:\n  max_records: 10\n",
		"SF2LOKI_SINK__LOKI__URL=http://127.0.0.1:9/push", "SF2LOKI_BATCH__MAX_RECORDS=20")
	if cfg.Sink.Loki.URL != "http://127.0.0.1:9/push" {
		t.Errorf("sink.loki.url = %q, want the env value", cfg.Sink.Loki.URL)
	}
	if cfg.Batch.MaxRecords != 20 {
		t.Errorf("batch.max_records = %d, want 20 from env", cfg.Batch.MaxRecords)
	}
}

func TestEnvOverrideErrorsNameTheVariable(t *testing.T) {
	_, err := load(t, "", "SF2LOKI_LEASE__DURATON=30s", "SF2LOKI_RUN__MAX_DURATION=soon")
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"lease.duraton", `did you mean "duration"`, "run.max_duration", "SF2LOKI_RUN__MAX_DURATION"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}

func TestEnvOverrideOfListEntryAndMap(t *testing.T) {
	org := "orgs:\n  - name: a\n    salesforce:\n      client_id: id\n      username: u\n      private_key: |\n        -----BEGIN PRIVATE KEY-----\n        MIIB\n        -----END PRIVATE KEY-----\n"
	cfg := mustLoad(t, org, "SF2LOKI_ORGS__0__NAME=prod", "SF2LOKI_SINK__LOKI__HEADERS__X_TEAM=sec")
	if cfg.Orgs[0].Name != "prod" {
		t.Errorf("orgs[0].name = %q, want prod", cfg.Orgs[0].Name)
	}
	if cfg.Sink.Loki.Headers["x_team"] != "sec" {
		t.Errorf("headers = %v", cfg.Sink.Loki.Headers)
	}
}

func TestSecretFromFileAndEnv(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("from-file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := mustLoad(t, "sink:\n  loki:\n    username: u\n    password_file: "+pw+"\n")
	if got := cfg.Sink.Loki.Password.Value(); got != "from-file-secret" {
		t.Errorf("password = %q, want the file content without the newline", got)
	}
	if s := cfg.Sink.Loki.Password.String(); strings.Contains(s, "from-file") {
		t.Errorf("Secret.String leaks the value: %q", s)
	}
	if b, _ := json.Marshal(cfg); bytes.Contains(b, []byte("from-file-secret")) {
		t.Errorf("JSON of the config leaks the secret: %s", b)
	}
	if got := cfg.Secrets(); len(got) != 1 || got[0] != "from-file-secret" {
		t.Errorf("Secrets() = %v", got)
	}
	cfg = mustLoad(t, "sink:\n  loki:\n    username: u\n    password_file: "+pw+"\n", "SF2LOKI_SINK__LOKI__PASSWORD=from-env-secret")
	if got := cfg.Sink.Loki.Password.Value(); got != "from-env-secret" {
		t.Errorf("password = %q, want env to win over the YAML _file", got)
	}
	cfg = mustLoad(t, "sink:\n  loki:\n    username: u\n", "SF2LOKI_SINK__LOKI__PASSWORD_FILE="+pw)
	if got := cfg.Sink.Loki.Password.Value(); got != "from-file-secret" {
		t.Errorf("password = %q, want the file named by the env _FILE override", got)
	}
}

func TestInterpolation(t *testing.T) {
	cfg := mustLoad(t, "sink:\n  loki:\n    tenant_id: ${TENANT}-x\n    headers:\n      X-Lit: $${NOT_A_VAR}\n", "TENANT=acme")
	if cfg.Sink.Loki.TenantID != "acme-x" {
		t.Errorf("tenant_id = %q", cfg.Sink.Loki.TenantID)
	}
	if cfg.Sink.Loki.Headers["X-Lit"] != "${NOT_A_VAR}" {
		t.Errorf("escaped literal = %q", cfg.Sink.Loki.Headers["X-Lit"])
	}
}

func TestDurationsAndSizes(t *testing.T) {
	cfg := mustLoad(t, "run:\n  max_duration: 2m30s\nbatch:\n  max_bytes: 64MiB\nsink:\n  loki:\n    line_max_bytes: 2048\n")
	if cfg.Run.MaxDuration.D() != 150*time.Second {
		t.Errorf("max_duration = %v", cfg.Run.MaxDuration)
	}
	if cfg.Batch.MaxBytes != 64<<20 || cfg.Sink.Loki.LineMaxBytes != 2048 {
		t.Errorf("sizes = %d, %d", cfg.Batch.MaxBytes, cfg.Sink.Loki.LineMaxBytes)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	_, err := load(t, "nope: 1\n")
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Path != "nope" {
		t.Fatalf("want one FieldError for path nope, got %#v", err)
	}
}

func TestSuggest(t *testing.T) {
	cases := []struct{ in, want string }{
		{"urll", "url"}, {"renew_intervl", "renew_interval"}, {"zzzzzzzz", ""},
	}
	for _, c := range cases {
		if got := suggest(c.in, []string{"url", "renew_interval", "duration"}); got != c.want {
			t.Errorf("suggest(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	raw, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("config.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("config.schema.json")
	if err != nil {
		t.Fatalf("the generated schema is not a valid JSON Schema: %v", err)
	}
	return s
}

func yamlToInstance(t *testing.T, text string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	if v == nil {
		v = map[string]any{}
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func TestJSONSchemaAcceptsExampleAndRejectsBadConfigs(t *testing.T) {
	s := compileSchema(t)
	if err := s.Validate(yamlToInstance(t, string(Example()))); err != nil {
		t.Fatalf("schema rejects the generated example: %v", err)
	}
	good := []string{
		"sink:\n  loki:\n    password_file: /x\n    batch_max_bytes: 4MiB\n",
		"orgs:\n  - name: a\n    salesforce:\n      client_id: x\n",
	}
	for _, g := range good {
		if err := s.Validate(yamlToInstance(t, g)); err != nil {
			t.Errorf("schema rejects valid config %q: %v", g, err)
		}
	}
	bad := map[string]string{
		"unknown key":        "sink:\n  loki:\n    urll: x\n",
		"wrong type":         "batch:\n  max_records: lots\n",
		"wrong type section": "sink: 5\n",
		"bad enum":           "state:\n  store: filee\n",
		"bad duration":       "run:\n  max_duration: soon\n",
		"negative duration":  "run:\n  max_duration: -1m\n",
		"below minimum":      "batch:\n  max_records: 0\n",
	}
	for name, b := range bad {
		if err := s.Validate(yamlToInstance(t, b)); err == nil {
			t.Errorf("%s: schema accepts %q", name, b)
		}
	}
}

func TestReferenceNamesEveryKey(t *testing.T) {
	ref := string(Reference())
	for _, key := range []string{"salesforce.login_url", "sink.loki.on_permanent_reject", "lease.renew_interval", "orgs[].name", "SF2LOKI_RUN__MAX_DURATION", "password_file"} {
		if !strings.Contains(ref, key) {
			t.Errorf("reference does not mention %s", key)
		}
	}
}

// TestOrderingLimitsAreChecked: the receiver's limits the ordering design relies on must make
// sense together — an entry stamped now must never be too far behind a stream whose newest
// entry is as far in the future as the receiver allows.
func TestOrderingLimitsAreChecked(t *testing.T) {
	for _, tc := range []struct{ yaml, path string }{
		{"sink:\n  loki:\n    out_of_order_window: 5m\n", "sink.loki.creation_grace_period"},
		{"sink:\n  loki:\n    max_age: 0s\n", "sink.loki.max_age"},
		{"sink:\n  loki:\n    metadata_max_entries: 0\n", "sink.loki.metadata_max_entries"},
	} {
		_, err := load(t, tc.yaml)
		var errs Errors
		if !errors.As(err, &errs) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%q: error %v, want one naming %s", tc.yaml, err, tc.path)
		}
	}
	cfg := mustLoad(t, "sink:\n  loki:\n    out_of_order_window: 2h\n    restamp: false\n")
	if l := cfg.Sink.Loki; l.OutOfOrderWindow.D() != 2*time.Hour || l.Restamp || !l.StructuredMetadata || l.CreationGrace.D() != 10*time.Minute {
		t.Fatalf("loaded %+v", l)
	}
}

// A protobuf push is one snappy block, whose length a receiver reads as 32 bits:
// batch_max_bytes is refused above 1GiB, naming the key, and 1GiB itself loads.
func TestBatchMaxBytesAtMostOneGiB(t *testing.T) {
	_, err := load(t, "sink:\n  loki:\n    batch_max_bytes: 5GiB\n")
	wantErrors(t, err, "sink.loki.batch_max_bytes: 5GiB is too large; at most 1GiB")
	cfg, err := load(t, "sink:\n  loki:\n    batch_max_bytes: 1GiB\n")
	if err != nil {
		t.Fatalf("1GiB refused: %v", err)
	}
	if cfg.Sink.Loki.BatchMaxBytes != 1<<30 {
		t.Errorf("batch_max_bytes = %s", cfg.Sink.Loki.BatchMaxBytes)
	}
}
