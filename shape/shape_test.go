package shape

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/jsonenc"
	"github.com/sf2loki/sf2loki/loki"
)

var testSalt = []byte("0123456789abcdef-salt")

func mustShaper(t *testing.T, opts Options) *Shaper {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// row fills r with name=value pairs (all strings).
func row(r *Record, kv ...string) *Record {
	r.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		r.AppendString(kv[i], String, kv[i+1])
	}
	r.Time = time.Unix(1700000000, 0)
	return r
}

func fields(kv ...string) []string {
	var out []string
	for i := 0; i < len(kv); i += 2 {
		out = append(out, kv[i])
	}
	return out
}

func wantHash(v string) string {
	m := hmac.New(sha256.New, testSalt)
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}

func meta(e loki.Entry) map[string]string {
	m := map[string]string{}
	for _, p := range e.Metadata {
		m[p.Name] = p.Value
	}
	return m
}

func TestLineKeepsFieldOrderAndKinds(t *testing.T) {
	s := mustShaper(t, Options{})
	p := s.Plan(Schema{Source: "eventlogfile", Type: "API", Fields: []string{"Z", "A", "N", "B", "B1", "B0", "BX", "NUL", "BAD"}})
	var r Record
	r.AppendString("Z", String, "last\"quoted\"\n")
	r.AppendString("A", String, "")
	r.AppendString("N", Number, "12899.0")
	r.AppendString("B", Bool, "true")
	r.AppendString("B1", Bool, "1")
	r.AppendString("B0", Bool, "0")
	r.AppendString("BX", Bool, "2")
	r.AppendString("NUL", Null, "ignored")
	r.AppendString("BAD", Number, "12,5")
	r.Time = time.Unix(1, 0)
	e, skip := p.Shape(&r)
	if skip != "" {
		t.Fatalf("skipped: %s", skip)
	}
	want := `{"Z":"last\"quoted\"\n","A":"","N":12899.0,"B":true,"B1":true,"B0":false,"BX":"2","NUL":null,"BAD":"12,5"}`
	if e.Line != want {
		t.Fatalf("line\n got %s\nwant %s", e.Line, want)
	}
	if !json.Valid([]byte(e.Line)) {
		t.Fatal("line is not valid JSON")
	}
	if got := e.Labels.String(); got != `{event_type="API", job="sf2loki", service_name="sf2loki", source="eventlogfile"}` {
		t.Fatalf("labels %s", got)
	}
	if !e.Timestamp.Equal(time.Unix(1, 0)) {
		t.Fatalf("timestamp %v", e.Timestamp)
	}
}

func TestOmitEmptyAndInvalidUTF8(t *testing.T) {
	s := mustShaper(t, Options{OmitEmpty: true, Metadata: []string{"X"}})
	p := s.Plan(Schema{Source: "s", Type: "T", Fields: []string{"E", "X"}})
	var r Record
	r.AppendString("E", String, "")
	r.AppendString("X", String, "a\xffb")
	e, _ := p.Shape(&r)
	if e.Line != `{"X":"a`+"\ufffd"+`b"}` {
		t.Fatalf("line %q", e.Line)
	}
	if meta(e)["X"] != "a\ufffdb" {
		t.Fatalf("metadata %q", meta(e)["X"])
	}
}

func TestHashedFieldIsHashedEverywhere(t *testing.T) {
	s := mustShaper(t, Options{
		Salt:       testSalt,
		Transforms: []Transform{{Op: OpHash, Fields: []string{"user_*"}}},
		Metadata:   []string{"USER_ID"},
		Types:      []TypeRule{{Type: "Login", Labels: []string{"USER_NAME"}}},
	})
	p := s.Plan(Schema{Source: "eventlogfile", Type: "Login", Fields: fields("USER_ID", "", "USER_NAME", "", "OTHER", "")})
	var r Record
	e, _ := p.Shape(row(&r, "USER_ID", "005xx0000012345", "USER_NAME", "jane@example.com", "OTHER", "005xx0000012345 in text"))
	hid, hname := wantHash("005xx0000012345"), wantHash("jane@example.com")
	if strings.Contains(e.Line, "jane@example.com") || !strings.Contains(e.Line, `"USER_ID":"`+hid+`"`) || !strings.Contains(e.Line, `"USER_NAME":"`+hname+`"`) {
		t.Fatalf("line not hashed: %s", e.Line)
	}
	if meta(e)["USER_ID"] != hid {
		t.Fatalf("metadata USER_ID = %q, want the hash", meta(e)["USER_ID"])
	}
	if v, _ := e.Labels.Get("user_name"); v != hname {
		t.Fatalf("label user_name = %q, want the hash", v)
	}
	if strings.Contains(e.Labels.String(), "jane") {
		t.Fatalf("labels leak the value: %s", e.Labels)
	}
	// The original also disappears from inside other fields.
	if !strings.Contains(e.Line, `"OTHER":"`+hid+` in text"`) {
		t.Fatalf("hashed value not replaced inside another field: %s", e.Line)
	}
	// Short values are not chased into other fields.
	e3, _ := p.Shape(row(&r, "USER_ID", "ab", "USER_NAME", "x", "OTHER", "tab"))
	if !strings.Contains(e3.Line, `"OTHER":"tab"`) {
		t.Fatalf("a short hashed value garbled another field: %s", e3.Line)
	}
	// Deterministic: same salt, same value, same hash.
	e2, _ := p.Shape(row(&r, "USER_ID", "005xx0000012345", "USER_NAME", "jane@example.com", "OTHER", ""))
	if meta(e2)["USER_ID"] != hid {
		t.Fatal("hash is not stable")
	}
}

func TestMask(t *testing.T) {
	cases := []struct {
		mode MaskMode
		in   string
		want string
	}{
		{MaskAuto, "jane.doe@example.com", "j***@example.com"},
		{MaskAuto, "10.1.2.3", "10.1.2.0"},
		{MaskAuto, "255.255.255.255", "255.255.255.0"},
		{MaskAuto, "10.01.2.3", "*********"},
		{MaskAuto, "1.2.3", "*****"},
		{MaskAuto, "1.2.3.4.5", "*********"},
		{MaskAuto, "256.1.1.1", "*********"},
		{MaskAuto, "2001:db8:1:2::5", "2001:db8:1::"},
		{MaskAuto, "::ffff:10.1.2.3", "10.1.2.0"},
		{MaskAuto, "secret", "******"},
		{MaskAuto, "héllo", "*****"},
		{MaskEmail, "not an email", "************"},
		{MaskIP, "10.1.2.3", "10.1.2.0"},
		{MaskIP, "2001:db8:1:2::5", "2001:db8:1::"},
		// A value without an address is not an address to hide: left as it is.
		{MaskIP, "Salesforce.com IP", "Salesforce.com IP"},
		{MaskIP, "unknown", "unknown"},
		{MaskIP, "jane@example.com", "jane@example.com"},
		// A forwarded-for chain: each address masked, the separators kept.
		{MaskIP, "10.1.2.3, 192.0.2.77", "10.1.2.0, 192.0.2.0"},
		{MaskIP, "2001:db8:1:2::5,10.0.0.9", "2001:db8:1::,10.0.0.0"},
		// Other text holding an address is masked in full.
		{MaskIP, "client 10.1.2.3 via proxy", "*************************"},
		{MaskIP, "abc1.2.3.4", "**********"},
		{MaskIP, "host [2001:db8::1]", "******************"},
		{MaskFull, "10.1.2.3", "********"},
		{MaskAuto, "", ""},
	}
	for _, c := range cases {
		t.Run(string(c.mode)+"/"+c.in, func(t *testing.T) {
			s := mustShaper(t, Options{Transforms: []Transform{{Op: OpMask, Fields: []string{"F"}, Mode: c.mode}}})
			p := s.Plan(Schema{Source: "s", Type: "T", Fields: []string{"F"}})
			var r Record
			e, _ := p.Shape(row(&r, "F", c.in))
			if want := `{"F":"` + c.want + `"}`; e.Line != want {
				t.Fatalf("got %s want %s", e.Line, want)
			}
		})
	}
}

func TestDropFieldAndRegexReplace(t *testing.T) {
	s := mustShaper(t, Options{
		Transforms: []Transform{
			{Op: OpDropField, Fields: []string{"SESSION_KEY"}},
			{Op: OpRegexReplace, Fields: []string{"URI"}, Pattern: `\?.*$`, Replacement: ""},
			{Op: OpRegexReplace, Fields: []string{"URI"}, Pattern: `/(\d+)$`, Replacement: "/$1-x", Types: []string{"other"}},
		},
		Metadata: []string{"SESSION_KEY", "URI"},
	})
	p := s.Plan(Schema{Source: "s", Type: "URI", Fields: fields("SESSION_KEY", "", "URI", "")})
	var r Record
	e, _ := p.Shape(row(&r, "SESSION_KEY", "abc", "URI", "/apex/page/12?token=secret"))
	if e.Line != `{"URI":"/apex/page/12"}` {
		t.Fatalf("line %s", e.Line)
	}
	if m := meta(e); m["URI"] != "/apex/page/12" || m["SESSION_KEY"] != "" {
		t.Fatalf("metadata %v", m)
	}
}

func TestDropRowRulesSeeOriginalValues(t *testing.T) {
	s := mustShaper(t, Options{
		Salt: testSalt,
		Transforms: []Transform{
			{Op: OpHash, Fields: []string{"USER_NAME"}},
			{Op: OpDropRow, Name: "automation", Match: map[string]string{"USER_NAME": "*@integration.example.com", "STATUS": "S"}},
			{Op: OpDropRow, Types: []string{"Logout"}},
		},
	})
	p := s.Plan(Schema{Source: "s", Type: "Login", Fields: fields("USER_NAME", "", "STATUS", "")})
	var r Record
	if _, skip := p.Shape(row(&r, "USER_NAME", "bot@integration.example.com", "STATUS", "S")); skip != "drop_row:automation" {
		t.Fatalf("skip = %q, want drop_row:automation", skip)
	}
	if _, skip := p.Shape(row(&r, "USER_NAME", "bot@integration.example.com", "STATUS", "F")); skip != "" {
		t.Fatalf("a row failing one condition was dropped (%s)", skip)
	}
	lp := s.Plan(Schema{Source: "s", Type: "logout", Fields: fields("X", "")})
	if _, skip := lp.Shape(row(&r, "X", "1")); skip != "drop_row:drop_row_2" {
		t.Fatalf("an empty match must drop every row of its types; skip = %q", skip)
	}
	// Unaligned record (an extra field): same decision through the slow path.
	row(&r, "USER_NAME", "bot@integration.example.com", "STATUS", "S")
	r.AppendString("_extra", String, "x")
	if _, skip := p.Shape(&r); skip != "drop_row:automation" {
		t.Fatalf("unaligned: skip = %q", skip)
	}
}

func TestSamplingIsDeterministicPerID(t *testing.T) {
	s := mustShaper(t, Options{Types: []TypeRule{{Type: "API", SampleRate: 0.25}}})
	run := func() map[int]bool {
		p := s.Plan(Schema{Source: "s", Type: "API", Fields: []string{"N"}})
		kept := map[int]bool{}
		var r Record
		for i := range 20000 {
			row(&r, "N", fmt.Sprint(i))
			r.ID = fmt.Appendf(r.ID, "0ATxx0000000001:%d", i)
			if _, skip := p.Shape(&r); skip == "" {
				kept[i] = true
			} else if skip != "sampled" {
				t.Fatalf("skip reason %q", skip)
			}
		}
		return kept
	}
	a, b := run(), run()
	if len(a) < 4500 || len(a) > 5500 {
		t.Fatalf("kept %d of 20000 at rate 0.25", len(a))
	}
	if len(a) != len(b) {
		t.Fatalf("re-run kept %d, first run %d", len(b), len(a))
	}
	for i := range a {
		if !b[i] {
			t.Fatalf("row %d kept on the first run only", i)
		}
	}
	// Other types are not sampled.
	p := s.Plan(Schema{Source: "s", Type: "Login", Fields: []string{"N"}})
	var r Record
	for i := range 100 {
		row(&r, "N", fmt.Sprint(i))
		if _, skip := p.Shape(&r); skip != "" {
			t.Fatal("an unsampled type lost a row")
		}
	}
}

func TestSampleFieldKey(t *testing.T) {
	s := mustShaper(t, Options{Types: []TypeRule{{Type: "API", SampleRate: 0.5, SampleField: "REQUEST_ID"}}})
	p := s.Plan(Schema{Source: "s", Type: "API", Fields: []string{"REQUEST_ID", "N"}})
	var r Record
	for i := range 200 {
		// Same request id, different record ids: one decision for all.
		row(&r, "REQUEST_ID", "req-1", "N", fmt.Sprint(i))
		r.ID = fmt.Append(r.ID, i)
		_, skip := p.Shape(&r)
		_, first := p.Shape(row(&r, "REQUEST_ID", "req-1", "N", "0"))
		if skip != first {
			t.Fatal("the sample field does not decide alone")
		}
	}
}

func TestLineFieldMode(t *testing.T) {
	s := mustShaper(t, Options{Salt: testSalt, Transforms: []Transform{{Op: OpHash, Fields: []string{"LogUserId"}}}})
	p := s.Plan(Schema{Source: "apexlog", Type: "ApexLog", Fields: []string{"Id", "LogUserId", "Body"}, LineField: "Body",
		Labels: []loki.Label{{Name: "sf_org_id", Value: "00Dxx"}}})
	var r Record
	e, _ := p.Shape(row(&r, "Id", "07L1", "LogUserId", "005A", "Body", "line1\nline2"))
	if e.Line != "line1\nline2" {
		t.Fatalf("line %q", e.Line)
	}
	m := meta(e)
	if m["Id"] != "07L1" || m["LogUserId"] != wantHash("005A") || len(m) != 2 {
		t.Fatalf("metadata %v", m)
	}
	if e.Metadata[0].Name != "Id" || e.Metadata[1].Name != "LogUserId" {
		t.Fatalf("metadata not sorted: %v", e.Metadata)
	}
	if v, _ := e.Labels.Get("sf_org_id"); v != "00Dxx" {
		t.Fatalf("schema label missing: %s", e.Labels)
	}
}

func TestLabelsStaticAndPerEntry(t *testing.T) {
	s := mustShaper(t, Options{Labels: map[string]string{"environment": "prod", "job": "sec"}}).With(loki.Label{Name: "org", Value: "eu"})
	p := s.Plan(Schema{Source: "soql", Type: "LoginHistory", Labels: []loki.Label{{Name: "sf_org_id", Value: "00D1"}}})
	want := `{environment="prod", event_type="LoginHistory", job="sec", org="eu", service_name="sf2loki", sf_org_id="00D1", source="soql"}`
	if got := p.Labels().String(); got != want {
		t.Fatalf("labels\n got %s\nwant %s", got, want)
	}
}

func TestPromotedLabelsAreCachedPerValue(t *testing.T) {
	s := mustShaper(t, Options{Types: []TypeRule{{Type: "Login", Labels: []string{"LOGIN_STATUS"}}}})
	if got := s.PromotedLabelNames(); len(got) != 1 || got[0] != "login_status" {
		t.Fatalf("PromotedLabelNames = %v", got)
	}
	p := s.Plan(Schema{Source: "eventlogfile", Type: "Login", Fields: []string{"LOGIN_STATUS"}})
	var r Record
	a, _ := p.Shape(row(&r, "LOGIN_STATUS", "OK"))
	b, _ := p.Shape(row(&r, "LOGIN_STATUS", "FAIL"))
	c, _ := p.Shape(row(&r, "LOGIN_STATUS", "OK"))
	if a.Labels.String() == b.Labels.String() || a.Labels.String() != c.Labels.String() {
		t.Fatalf("labels %s %s %s", a.Labels, b.Labels, c.Labels)
	}
	if v, _ := a.Labels.Get("login_status"); v != "OK" {
		t.Fatalf("login_status = %q", v)
	}
	if strings.Contains(a.Line, "LOGIN_STATUS") == false {
		t.Fatal("a promoted field must stay in the line")
	}
}

// TestPromotedLabelCacheTellsValuesApart: the label sets are cached by the promoted values of a
// row, which may hold any bytes (invalid UTF-8 included): rows whose values differ must never
// share a cached set, however the values' bytes line up.
func TestPromotedLabelCacheTellsValuesApart(t *testing.T) {
	rows := [][2]string{
		{"OK\xff", "web"},
		{"OK", "\xffweb"},
		{"OK\xffweb", ""},
		{"", "OK\xffweb"},
		{"\x02", "\x00"},
		{"", "\x01\x00"},
	}
	s := mustShaper(t, Options{Types: []TypeRule{{Type: "Login", Labels: []string{"STATUS", "APP"}}}})
	p := s.Plan(Schema{Source: "eventlogfile", Type: "Login", Fields: []string{"STATUS", "APP"}})
	var r Record
	for range 2 { // the second time from the cache
		for _, v := range rows {
			e, _ := p.Shape(row(&r, "STATUS", v[0], "APP", v[1]))
			for i, n := range []string{"status", "app"} {
				got, _ := e.Labels.Get(n)
				if want := strings.ToValidUTF8(v[i], "\ufffd"); got != want {
					t.Errorf("row %q: label %s = %q, want %q", v, n, got, want)
				}
			}
		}
	}
}

func TestEntriesDoNotShareBuffers(t *testing.T) {
	s := mustShaper(t, Options{Metadata: []string{"A"}})
	p := s.Plan(Schema{Source: "s", Type: "T", Fields: []string{"A"}})
	var r Record
	var entries []loki.Entry
	for i := range 3000 {
		e, _ := p.Shape(row(&r, "A", fmt.Sprint("v", i)))
		entries = append(entries, e)
	}
	for i, e := range entries {
		if want := fmt.Sprintf(`{"A":"v%d"}`, i); e.Line != want || e.Metadata[0].Value != fmt.Sprint("v", i) || len(e.Metadata) != 1 || cap(e.Metadata) != 1 {
			t.Fatalf("entry %d changed: %s %v", i, e.Line, e.Metadata)
		}
	}
}

// TestEntriesStayIntactAcrossChunks: lines are shaped into shared chunks; rows whose escapes
// outgrow the room reserved for them, and rows larger than a chunk, must leave every line
// handed out before them as it was.
func TestEntriesStayIntactAcrossChunks(t *testing.T) {
	s := mustShaper(t, Options{Metadata: []string{"B"}})
	p := s.Plan(Schema{Source: "s", Type: "T", Fields: []string{"A", "B"}})
	var r Record
	var entries []loki.Entry
	var want []string
	for i := range 2000 {
		a := fmt.Sprint("v", i)
		switch i % 7 {
		case 3:
			a = strings.Repeat("\x01", 500) // every byte escaped: six times its size
		case 5:
			a = strings.Repeat("x", lineChunkSize+i)
		}
		e, _ := p.Shape(row(&r, "A", a, "B", fmt.Sprint("b", i)))
		entries = append(entries, e)
		want = append(want, string(jsonenc.AppendString([]byte(`{"A":`), a, jsonenc.LiteralFFFD))+fmt.Sprintf(`,"B":"b%d"}`, i))
	}
	for i, e := range entries {
		if e.Line != want[i] || len(e.Metadata) != 1 || e.Metadata[0].Value != fmt.Sprint("b", i) {
			t.Fatalf("entry %d changed: %.80s… %v", i, e.Line, e.Metadata)
		}
	}
}

// TestPlainFieldsAfterTransforms: a value marked plain by its source is written as it is, and a
// transform that changes it drops the mark, so what it wrote is escaped like any value; the
// source's buffer the values were added from (Use) is never written.
func TestPlainFieldsAfterTransforms(t *testing.T) {
	s := mustShaper(t, Options{Transforms: []Transform{{Op: OpRegexReplace, Fields: []string{"B"}, Pattern: `x`, Replacement: `"\`}}})
	p := s.Plan(Schema{Source: "s", Type: "T", Fields: []string{"A", "B"}})
	var r Record
	for range 2 { // the second row reuses the buffers the first one grew
		src := []byte(`"plain/value:1","axb"`)
		r.Reset()
		r.Use(src)
		r.AddField("A", String, true, 1, 14)
		r.AddField("B", String, true, 17, 20)
		r.Time = time.Unix(1700000000, 0)
		e, _ := p.Shape(&r)
		if want := `{"A":"plain/value:1","B":"a\"\\b"}`; e.Line != want {
			t.Fatalf("line %s, want %s", e.Line, want)
		}
		if string(src) != `"plain/value:1","axb"` {
			t.Fatalf("the source's buffer was written: %s", src)
		}
	}
}

// TestMaskLeavingAValueUnchangedWritesNoRecordData: a mask that leaves a value as it is (mask ip
// of a value holding no address, any mask of a null) returns the record's own bytes; the next
// mask must still write only memory of the plan's. Were it to write where that value lies, it
// would write the source's buffer the values were added from (Use), which a record promises
// never to write, or the record's buffer, and a later field or row would ship partly '*'.
func TestMaskLeavingAValueUnchangedWritesNoRecordData(t *testing.T) {
	cases := []struct {
		name  string
		mode  MaskMode
		kind  Kind
		value string
	}{
		{"ip without an address", MaskIP, String, "Salesforce.com IP"},
		{"null", MaskFull, Null, "null-placeholder"},
	}
	for _, c := range cases {
		s := mustShaper(t, Options{Transforms: []Transform{
			{Op: OpMask, Mode: c.mode, Fields: []string{"A"}},
			{Op: OpMask, Mode: MaskFull, Fields: []string{"PW"}},
		}})
		const want = `{"NOTE":"kept-as-it-is","PW":"******"}`
		t.Run(c.name+"/source buffer", func(t *testing.T) {
			p := s.Plan(Schema{Source: "s", Type: "T", Fields: []string{"A", "PW"}})
			var r Record
			buf := make([]byte, 0, 256) // a source's read buffer, refilled in place for each row
			// use reads a row of two fields into buf, as a source does, and makes r index it.
			use := func(name string, kind Kind, value, pw string) {
				buf = append(append(buf[:0], value...), pw...)
				r.Reset()
				r.Use(buf)
				r.AddField(name, kind, true, 0, len(value))
				r.AddField("PW", String, true, len(value), len(buf))
			}
			use("A", c.kind, c.value, "pw")
			p.Shape(&r)
			if got := string(buf); got != c.value+"pw" {
				t.Errorf("row 1 wrote the source's buffer: %q", got)
			}
			use("NOTE", String, "kept-as-it-is", "secret")
			if e, _ := p.Shape(&r); e.Line != want {
				t.Errorf("row 2 line\n got %s\nwant %s", e.Line, want)
			}
			if got := string(buf); got != "kept-as-it-issecret" {
				t.Errorf("row 2 wrote the source's buffer: %q", got)
			}
		})
		t.Run(c.name+"/record buffer", func(t *testing.T) {
			p := s.Plan(Schema{Source: "s", Type: "T", Fields: []string{"A", "PW"}})
			var r Record
			// A large row first, as a record reused across a file grows to its largest row: the
			// rows after it are written where the first one was.
			r.Reset()
			r.Append("A", c.kind, []byte(strings.Repeat("x", 4096)))
			r.AppendString("PW", String, "p")
			p.Shape(&r)
			r.Reset()
			r.Append("A", c.kind, []byte(c.value))
			r.AppendString("PW", String, "pw")
			p.Shape(&r)
			if e, _ := p.Shape(row(&r, "NOTE", "kept-as-it-is", "PW", "secret")); e.Line != want {
				t.Errorf("line\n got %s\nwant %s", e.Line, want)
			}
		})
	}
}

func TestValidateNamesKeys(t *testing.T) {
	err := Validate(Options{
		Transforms: []Transform{
			{Op: OpHash, Fields: []string{"X"}},
			{Op: OpRegexReplace, Fields: []string{"U"}, Pattern: "(unclosed"},
			{Op: OpDropField, Fields: []string{"login_status"}, Types: []string{"Login"}},
			{Op: "shred", Fields: []string{"X"}},
			{Op: OpMask},
			{Op: OpDropRow, Match: map[string]string{"X": "[oops"}},
		},
		Types: []TypeRule{
			{Type: "Login", Labels: []string{"LOGIN_STATUS", "event_type"}, SampleRate: 2},
			{Type: "login", Labels: []string{"USER_*"}, Metadata: []string{"[bad"}},
		},
		Metadata: []string{""},
		Labels:   map[string]string{"source": "x"},
	})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("want ErrInvalid, got %v", err)
	}
	for _, want := range []string{
		"salt:", "transforms[1].pattern", "transforms[2].fields: drops field \"LOGIN_STATUS\"", "transforms[3].op",
		"transforms[4].fields", "transforms[5].match.X", "types[0].labels[1]", "types[0].sample_rate", "types[1].type", "labels.source",
		"types[1].labels[0]", "types[1].metadata[0]", "metadata[0]",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if _, err := New(Options{Transforms: []Transform{{Op: OpRegexReplace, Fields: []string{"U"}, Pattern: "("}}}); err == nil {
		t.Fatal("New accepted an invalid regex")
	}
}

// TestValidatePromotedLabelsLeaveRoomForBackfill: Validate lets a type promote only as many labels
// as fit, in the Loki client guard's count, beside every label sf2loki sets — backfill included,
// which sf2loki backfill adds to its own streams: a configuration it accepts must have its
// backfill streams accepted too, not every entry of the type refused.
func TestValidatePromotedLabelsLeaveRoomForBackfill(t *testing.T) {
	backfill := loki.Label{Name: "backfill", Value: "true"} // eventlogfile.BackfillLabel
	opts := func(n int) Options {
		var promoted []string
		for i := range n {
			promoted = append(promoted, fmt.Sprintf("F%d", i))
		}
		return Options{Labels: map[string]string{"environment": "prod"}, Types: []TypeRule{{Type: "Login", Labels: promoted}}}
	}
	// Every label sf2loki sets on a backfill's stream, with no field promoted.
	s := mustShaper(t, opts(0)).With(loki.Label{Name: "org", Value: "eu"})
	set := s.Plan(Schema{Source: "eventlogfile", Type: "Login", Labels: []loki.Label{{Name: "sf_org_id", Value: "00D000000000001"}}}).Labels().With(backfill)
	room := loki.MaxLabelNames - (set.Len() - 1) // service_name is not counted
	for _, n := range []int{room, room + 1} {
		o := opts(n)
		err := Validate(o)
		if n > room {
			if err == nil || !strings.Contains(err.Error(), "types[0].labels:") || !strings.Contains(err.Error(), "backfill") {
				t.Errorf("%d promoted labels: Validate = %v, want an error at types[0].labels naming backfill", n, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%d promoted labels: %v", n, err)
		}
		s := mustShaper(t, o).With(loki.Label{Name: "org", Value: "eu"})
		p := s.Plan(Schema{Source: "eventlogfile", Type: "Login", Fields: o.Types[0].Labels,
			Labels: []loki.Label{{Name: "sf_org_id", Value: "00D000000000001"}}})
		var r Record
		for _, f := range o.Types[0].Labels {
			r.AppendString(f, String, "v")
		}
		e, _ := p.Shape(&r)
		g, err := loki.NewLabelGuard(loki.LabelOptions{ExtraAllowed: s.PromotedLabelNames()})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []loki.Labels{e.Labels, e.Labels.With(backfill)} {
			if err := g.Check(l); err != nil {
				t.Errorf("Validate accepted %d promoted labels, but the guard refuses the stream %s: %v", n, l, err)
			}
		}
	}
}

// TestValidateRefusesPromotingAReservedLabel: a field may not be promoted to a label sf2loki sets
// itself — any of the Loki client's fixed allowlist, backfill included, or live entries of the
// type would pass for backfilled ones (and a backfill's would lose their own value).
func TestValidateRefusesPromotingAReservedLabel(t *testing.T) {
	fields := []string{"BACKFILL", "Backfill"}
	for _, n := range loki.AllowedLabelNames() {
		fields = append(fields, strings.ToUpper(n))
	}
	for _, f := range fields {
		err := Validate(Options{Types: []TypeRule{{Type: "Login", Labels: []string{f}}}})
		if err == nil || !strings.Contains(err.Error(), "types[0].labels[0]:") || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("promoting field %s: Validate = %v, want it refused as a reserved label", f, err)
		}
	}
}

func TestGlob(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"*", "", true},
		{"*", "anything/at all", true},
		{"a*c", "abbbc", true},
		{"a*c", "abbbd", false},
		{"/services/*/limits", "/services/data/v62.0/limits", true},
		{"?", "é", true},
		{"[a-c]x", "bx", true},
		{"[^a-c]x", "bx", false},
		{"[!a-c]x", "dx", true},
		{`\*`, "*", true},
		{`\*`, "a", false},
		{"", "", true},
		{"", "a", false},
		{"*@example.com", "a@example.com", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
	}
	for _, c := range cases {
		if got := globMatch(c.p, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.p, c.s, got)
		}
	}
	if checkGlob("[abc") == nil || checkGlob(`a\`) == nil || checkGlob("a[b]c*") != nil {
		t.Error("checkGlob")
	}
}

func TestCategory(t *testing.T) {
	for name, want := range map[string]string{
		"Login": "login", "LoginEvent": "login", "LoginHistory": "login", "/event/LoginEventStream": "login",
		"ApiEvent": "api", "API": "api", "ApiAnomalyEventStore": "apianomaly", "Lightning URI": "lightninguri",
		"LightningUriEvent": "lightninguri", "Event": "event", "SetupAuditTrail": "setupaudittrail",
	} {
		if got := Category(name, nil); got != want {
			t.Errorf("Category(%q) = %q, want %q", name, got, want)
		}
	}
	if got := Category("AuditTrail__c", map[string]string{"audittrail__c": "SetupAuditTrail"}); got != "setupaudittrail" {
		t.Errorf("extra alias: %q", got)
	}
}

func TestCheckOverlap(t *testing.T) {
	claims := []Claim{
		{Source: "soql", Name: "LoginEvent", Path: "sources.soql.objects[0]"},
		{Source: "soql", Name: "LoginHistory", Path: "sources.soql.objects[1]"},
		{Source: "eventlogfile", Name: "Login", Path: "sources.eventlogfile.event_types[0]"},
		{Source: "eventlogfile", Name: "API", Path: "sources.eventlogfile.event_types[1]"},
	}
	err := CheckOverlap(claims, nil)
	var oe *OverlapError
	if !errors.As(err, &oe) || oe.Category != "login" || oe.First.Name != "LoginEvent" || oe.Second.Name != "Login" {
		t.Fatalf("want the login overlap, got %v", err)
	}
	if !strings.Contains(err.Error(), `"login"`) || !strings.Contains(err.Error(), "LoginEvent") || strings.Contains(err.Error(), "api") {
		t.Fatalf("message: %v", err)
	}
	if err := CheckOverlap(claims[1:2], nil); err != nil {
		t.Fatalf("one source: %v", err)
	}
	wild := []Claim{{Source: "eventlogfile", Name: "*"}, {Source: "pubsub", Name: "*"}, {Source: "soql", Name: "LoginEvent"}}
	if err := CheckOverlap(wild, nil); !errors.As(err, &oe) || oe.Category != Wildcard {
		t.Fatalf("dual wildcard: %v", err)
	}
	if got := Owned(append(claims, wild...), "eventlogfile", nil); strings.Join(got, ",") != "login" {
		t.Fatalf("Owned = %v", got)
	}
}

// TestShapeToOverwritesTheWholeEntry: ShapeTo writes into an entry a source keeps and reuses
// row after row, so whatever the last row left there must not survive: a kept row's entry is
// exactly the one Shape returns (no metadata, reference or line of the row before), and a
// dropped row's entry is zero.
func TestShapeToOverwritesTheWholeEntry(t *testing.T) {
	s := mustShaper(t, Options{
		Metadata:   []string{"USER_ID"},
		Transforms: []Transform{{Op: OpDropRow, Name: "bots", Match: map[string]string{"USER_ID": "bot*"}}},
	})
	p := s.Plan(Schema{Source: "s", Type: "API", Fields: fields("USER_ID", "", "URI", "")})
	left := func() loki.Entry {
		return loki.Entry{Timestamp: time.Unix(1, 0), Labels: loki.NewLabels(loki.Label{Name: "stale", Value: "x"}),
			Line: "stale line", Metadata: []loki.Label{{Name: "stale", Value: "x"}}, Ref: 42}
	}
	same := func(a, b loki.Entry) bool {
		return a.Timestamp.Equal(b.Timestamp) && a.Timestamp.Location() == b.Timestamp.Location() &&
			a.Labels.String() == b.Labels.String() && a.Line == b.Line && a.Ref == b.Ref &&
			(a.Metadata == nil) == (b.Metadata == nil) && fmt.Sprint(a.Metadata) == fmt.Sprint(b.Metadata)
	}
	var r Record
	for _, tc := range []struct{ name, user, skip string }{
		{"kept, without metadata", "", ""},
		{"kept, with metadata", "005000000000001", ""},
		{"dropped", "bot-7", "drop_row:bots"},
	} {
		want, wantSkip := p.Shape(row(&r, "USER_ID", tc.user, "URI", "/x"))
		e := left()
		skip := p.ShapeTo(row(&r, "USER_ID", tc.user, "URI", "/x"), &e)
		if skip != tc.skip || wantSkip != tc.skip {
			t.Fatalf("%s: ShapeTo skip %q, Shape skip %q; want %q", tc.name, skip, wantSkip, tc.skip)
		}
		if tc.skip != "" {
			want = loki.Entry{}
		}
		if !same(e, want) {
			t.Errorf("%s: ShapeTo over a used entry gave %+v; want %+v", tc.name, e, want)
		}
	}
}
