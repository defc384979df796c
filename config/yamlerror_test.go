package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/config"
)

// A YAML syntax error names the line that is damaged (the parser itself names the line where
// the enclosing mapping starts) and the key path there.
func TestSyntaxErrorNamesTheDamagedLineAndKey(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"under-indented key", "sink:\n  loki:\n    url: http://localhost:3100/x\n   timeout: 5s\nlease:\n  duration: 30s\n",
			[]string{"line 4, at sink.loki.timeout", "check the indentation"}},
		{"over-indented key", "orgs:\n  - name: a\n    salesforce:\n      client_id: x\n       username: y\n",
			[]string{"line 5, at orgs[].salesforce.username", "check the indentation"}},
		{"colon in a value", "sink:\n  loki:\n    url: http://localhost:3100/x\n    tenant_id: a: b\n    timeout: 5s\n",
			[]string{"line 4, at sink.loki.tenant_id"}},
		{"tab", "sink:\n  loki:\n    url: http://localhost:3100/x\n\ttimeout: 5s\n", []string{"line 4", "not tabs"}},
		{"list item in a mapping", "sink:\n  loki:\n    url: http://localhost:3100/x\n    - a\nrun:\n  drain: true\n", []string{"line 4, at sink.loki"}},
		{"unclosed flow list", "shape:\n  metadata: [a, b\nrun:\n  drain: true\nlease:\n  duration: 30s\n", []string{"line 2, at shape.metadata"}},
		{"unclosed quote", "sink:\n  loki:\n    url: \"http://localhost:3100/x\n    timeout: 5s\nlease:\n  duration: 30s\n", []string{"line 3, at sink.loki.url"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(config.LoadOptions{Path: writeTemp(t, tc.yaml), Environ: []string{}})
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
		})
	}
}

// A section indented wrongly is one problem that says where its keys belong, not one "unknown
// key" per key.
func TestMisindentedSectionIsOneProblemWithAHint(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       string
	}{
		{"keys not under their section", "sink:\n  loki:\n  url: http://localhost:3100/x\n  tenant_id: a\n  timeout: 5s\n  encoding: json\n" +
			"  username: u\n  password: p\n  batch_max_entries: 10\n  min_backoff: 1s\n  max_backoff: 2s\n  gzip: false\n  max_retries: 1\n" +
			"  line_max_bytes: 2KiB\n  max_age: 1h\n  on_permanent_reject: drop\n  dead_letter_path: /tmp/x\n",
			`sink: keys url, tenant_id, timeout and 12 more (lines 3-17) belong to sink.loki, not sink: indent them under "loki:" (line 2)`},
		{"section body at the top level", "salesforce:\nlogin_url: https://acme.my.salesforce.com\nclient_id: x\n",
			`keys login_url, client_id (lines 2-3) belong to salesforce, not the top level: indent them under "salesforce:" (line 1)`},
		{"top-level section inside another", "sink:\n  loki:\n    url: http://localhost:3100/x\n    lease:\n      duration: 30s\n",
			"sink.loki: key lease (line 4) belongs to the top level, not sink.loki: indent it less"},
		{"list entry keys outside the entry", "sources:\n  soql:\n    objects:\n    - name: LoginHistory\n    fields: [Id]\n",
			`key fields (line 5) belongs to an entry of sources.soql.objects, not sources.soql: indent it under "objects:" (line 3)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(config.LoadOptions{Path: writeTemp(t, tc.yaml), Environ: []string{}})
			var errs config.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Load = %v, want config.Errors", err)
			}
			var hits int
			for _, e := range errs {
				if strings.Contains(e.Msg, "unknown key") {
					t.Errorf("an unknown-key problem besides the hint: %v", e)
				}
				if strings.Contains(e.Error(), tc.want) {
					hits++
				}
			}
			if hits != 1 {
				t.Errorf("want one problem saying %q, got:\n%v", tc.want, err)
			}
		})
	}
}
