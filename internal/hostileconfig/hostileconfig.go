// Package hostileconfig builds the worst configuration files found for sf2loki's loader, each
// under config.MaxFileBytes: YAML alias bombs, files filled with unknown keys or bad labels,
// runaway interpolation, deep nesting, and the largest configuration that is valid. The config
// tests check that each is refused with a clear message, the cli benchmark measures the time and
// memory `config check` and `run-once` take on each, and the loader's fuzz corpus starts from them.
package hostileconfig

import (
	"fmt"
	"strings"

	"github.com/sf2loki/sf2loki/config"
)

// Input is one configuration file.
type Input struct {
	Name string
	YAML []byte
	// Env is the environment the file is loaded with (KEY=value), besides nothing else.
	Env []string
	// Want is a substring of the message that refuses the file; empty for a valid file.
	Want string
	// Job is the job group run-once needs (--job) for a valid file with job groups.
	Job string
}

// BigEnv names the environment variable the interpolation inputs expand.
const BigEnv = "SF2LOKI_HOSTILE_BIG"

// budget is what every generator stays under, leaving room for a header.
const budget = config.MaxFileBytes - 4<<10

// Inputs returns every hostile input. keyPEM is a PEM private key for the valid inputs.
func Inputs(keyPEM string) []Input {
	return []Input{
		aliasBombOfSections(),
		billionLaughs(),
		aliasedInterpolation(),
		interpolationInOneValue(),
		unknownKeys(),
		invalidLabels(),
		tooManyLabels(),
		longFlowList(),
		deepNesting(),
		longUnknownKey(),
		endlessFiles(),
		unclosedFlowList(),
		syntaxErrorAtTheEnd(),
		misindentedKeys(),
		largestValid(keyPEM),
	}
}

// aliasBombOfSections nests lists of aliases of lists through the sections that materialize a
// struct per entry: orgs × soql objects × fields.
func aliasBombOfSections() Input {
	var b strings.Builder
	b.WriteString("x:\n  f: &f [" + repeatJoin("abc", 1000) + "]\n")
	b.WriteString("  o: &o {name: LoginHistory, fields: *f}\n")
	b.WriteString("  objs: &objs [" + repeatJoin("*o", 1000) + "]\n")
	b.WriteString("  org: &org {name: p, sources: {soql: {enabled: true, objects: *objs}}}\n")
	b.WriteString("orgs: [" + repeatJoin("*org", 100) + "]\n")
	return Input{Name: "alias-bomb-sections", YAML: []byte(b.String()), Want: "more than 100000 values"}
}

// billionLaughs is the classic: ten levels of ten aliases, in a list of strings.
func billionLaughs() Input {
	var b strings.Builder
	b.WriteString("x:\n  l0: &l0 [" + repeatJoin("lol", 10) + "]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", i, i, repeatJoin(fmt.Sprintf("*l%d", i-1), 10))
	}
	b.WriteString("shape:\n  metadata: *l9\n")
	return Input{Name: "billion-laughs", YAML: []byte(b.String()), Want: "expected a single value"}
}

// aliasedInterpolation aliases one large value that interpolation rebuilds at every use.
func aliasedInterpolation() Input {
	val := strings.Repeat("$${", (budget-8<<10)/3)
	var b strings.Builder
	b.WriteString("x:\n  v: &v \"" + val + "\"\n")
	b.WriteString("sink:\n  loki:\n    extra_labels: [" + repeatJoin("*v", 1000) + "]\n")
	return Input{Name: "aliased-interpolation", YAML: []byte(b.String()), Want: "interpolation"}
}

// interpolationInOneValue repeats ${BIG} in one value: each use adds a large environment value.
func interpolationInOneValue() Input {
	ref := "${" + BigEnv + "}"
	val := strings.Repeat(ref, budget/len(ref))
	return Input{Name: "interpolation-one-value", YAML: []byte("sink:\n  loki:\n    tenant_id: \"" + val + "\"\n"),
		Env: []string{BigEnv + "=" + strings.Repeat("x", 100<<10)}, Want: "interpolation builds a value of more than"}
}

// unknownKeys fills the file with keys no section has.
func unknownKeys() Input {
	var b strings.Builder
	for i := 0; b.Len() < budget; i++ {
		fmt.Fprintf(&b, "k%07d: v\n", i)
	}
	return Input{Name: "unknown-keys", YAML: []byte(b.String()), Want: "unknown key"}
}

// invalidLabels is the most invalid labels a map may hold: every one is a problem.
func invalidLabels() Input {
	var b strings.Builder
	b.WriteString("sink:\n  loki:\n    labels:\n")
	for i := range config.MaxEntries {
		fmt.Fprintf(&b, "      \"bad-%d\": v\n", i)
	}
	return Input{Name: "invalid-labels", YAML: []byte(b.String()), Want: "is not a valid Loki label name"}
}

// tooManyLabels fills the file with labels, far more than a map may hold.
func tooManyLabels() Input {
	var b strings.Builder
	b.WriteString("sink:\n  loki:\n    labels: {")
	for i := 0; b.Len() < budget; i++ {
		fmt.Fprintf(&b, "\"b-%d\": v, ", i)
	}
	b.WriteString("}\n")
	return Input{Name: "too-many-labels", YAML: []byte(b.String()), Want: "entries; at most"}
}

// longFlowList is one flow list of the most scalars the file can hold (the parser's worst case).
func longFlowList() Input {
	n := budget / 2
	return Input{Name: "long-flow-list", YAML: []byte("shape:\n  metadata: [" + strings.Repeat("a,", n) + "a]\n"), Want: "entries; at most"}
}

// deepNesting opens as many flow lists as the file holds.
func deepNesting() Input {
	return Input{Name: "deep-nesting", YAML: []byte("shape:\n  metadata: " + strings.Repeat("[", budget) + "\n"), Want: "not valid YAML"}
}

// longUnknownKey is one unknown key as long as the file.
func longUnknownKey() Input {
	return Input{Name: "long-unknown-key", YAML: []byte("sink:\n  ? " + strings.Repeat("k", budget) + "\n  : v\n"), Want: "unknown key"}
}

// endlessFiles names /dev/zero for every file the configuration reads: secret files and the
// TLS files, which the clients would otherwise read until memory runs out.
func endlessFiles() Input {
	return Input{Name: "endless-files", YAML: []byte(`salesforce:
  private_key_file: /dev/zero
  tls: {ca_file: /dev/zero, cert_file: /dev/zero, key_file: /dev/zero}
sink:
  loki:
    username: u
    password_file: /dev/zero
    tls: {ca_file: /dev/zero}
metrics:
  otlp:
    tls: {ca_file: /dev/zero}
`), Want: "/dev/zero is larger than"}
}

// unclosedFlowList opens a flow list on line 2 and never closes it: the parser reads the whole
// file before failing, and finding the damaged line takes the most work.
func unclosedFlowList() Input {
	var b strings.Builder
	b.WriteString("shape:\n  metadata: [a,\n")
	for b.Len() < budget {
		b.WriteString("    a,\n")
	}
	return Input{Name: "unclosed-flow-list", YAML: []byte(b.String()), Want: "line 2, at shape.metadata"}
}

// syntaxErrorAtTheEnd is a file of valid keys whose last line is damaged.
func syntaxErrorAtTheEnd() Input {
	var b strings.Builder
	b.WriteString("sink:\n  loki:\n    labels:\n")
	n := 0
	for ; b.Len() < budget; n++ {
		fmt.Fprintf(&b, "      l%d: v\n", n)
	}
	b.WriteString("     bad: : x\n")
	return Input{Name: "syntax-error-at-the-end", YAML: []byte(b.String()), Want: fmt.Sprintf("line %d", n+4)}
}

// misindentedKeys is a file of keys that belong one section deeper than they are written.
func misindentedKeys() Input {
	var b strings.Builder
	b.WriteString("sink:\n  loki:\n")
	for b.Len() < budget {
		b.WriteString("  url: x\n  timeout: 5s\n")
	}
	return Input{Name: "misindented-keys", YAML: []byte(b.String()), Want: "appears twice"}
}

// largestValid is a valid configuration with the most orgs and job groups allowed, each org
// polling SOQL objects, the first org's sections shared with the others through aliases.
func largestValid(keyPEM string) Input {
	const orgs = 100
	var b strings.Builder
	b.WriteString("orgs:\n  - name: org0\n    salesforce: &sf\n      login_url: http://127.0.0.1:1\n      client_id: c\n" +
		"      username: u@example.com\n      max_retries: 0\n      private_key: |\n")
	for _, line := range strings.Split(strings.TrimSpace(keyPEM), "\n") {
		b.WriteString("        " + line + "\n")
	}
	b.WriteString("    sources:\n      soql:\n        enabled: true\n        objects: &objs\n")
	for i := range 20 {
		fmt.Fprintf(&b, "          - {name: Obj%d__c, timestamp_field: CreatedDate, fields: [Id, UserId, LoginTime, Status]}\n", i)
	}
	for i := 1; i < orgs; i++ {
		fmt.Fprintf(&b, "  - name: org%d\n    salesforce: *sf\n    sources: {soql: {enabled: true, objects: *objs}}\n", i)
	}
	b.WriteString("jobs:\n")
	for i := range orgs {
		fmt.Fprintf(&b, "  - name: j%d\n    orgs: [org%d]\n", i, i)
	}
	b.WriteString("state:\n  file:\n    path: /nonexistent-sf2loki-hostile/state.json\n")
	return Input{Name: "largest-valid", YAML: []byte(b.String()), Job: "j0"}
}

func repeatJoin(s string, n int) string {
	return strings.TrimSuffix(strings.Repeat(s+",", n), ",")
}
