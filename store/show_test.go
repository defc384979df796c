package store

import (
	"strings"
	"testing"
	"time"
)

func TestParseValue(t *testing.T) {
	for in, want := range map[string]string{
		`{"v":1,"id":"x"}`:             `{"v":1,"id":"x"}`,
		` 42 `:                         `42`,
		`2026-11-01T00:00:00.000+0000`: `"2026-11-01T00:00:00.000+0000"`, // a Python cursor: a string
	} {
		got, err := ParseValue(in)
		if err != nil || string(got) != want {
			t.Errorf("ParseValue(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{`{"v":1,`, `["a"`, `"unterminated`} {
		if _, err := ParseValue(bad); err == nil || !strings.Contains(err.Error(), "does not parse") {
			t.Errorf("ParseValue(%q): %v, want a refusal", bad, err)
		}
	}
}

// A value that is not valid UTF-8 is refused: JSON would store it byte for byte and leave a
// document no read accepts, and as a string it would be stored with U+FFFD, not as given.
func TestParseValueRefusesInvalidUTF8(t *testing.T) {
	for _, bad := range []string{"{\"cursor\":\"\xff\"}", "\"\xfe\"", "2026-11-01\xff"} {
		if v, err := ParseValue(bad); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("ParseValue(%q) = %s, %v; want a refusal naming invalid UTF-8", bad, v, err)
		}
	}
}

func TestViewFiltersCheckpointsAndMissingEmpty(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	doc := &Document{Schema: 2, Fence: &Fence{Epoch: 7, Holder: "h", ClaimedAt: now.Add(-time.Minute)}, Checkpoints: map[string]Checkpoint{
		"eventlogfile:Login": {Value: StringValue("a"), Epoch: 7, UpdatedAt: now.Add(-time.Second)},
		"soql:LoginHistory":  {Value: []byte(`{"v": 1}`), Epoch: 6, UpdatedAt: now.Add(-time.Hour)},
	}}
	v := Snapshot{Doc: doc, Size: 123}.View("doc.json", func(k string) bool { return strings.HasPrefix(k, "soql:") })
	if len(v.Checkpoints) != 1 || v.Fence.Epoch != 7 || v.Bytes != 123 {
		t.Fatalf("view %+v", v)
	}
	var b strings.Builder
	if err := v.WriteText(&b, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, `soql:LoginHistory  1h0m0s ago  6      {"v":1}`) || strings.Contains(out, "eventlogfile:Login") ||
		!strings.Contains(out, "fence:       epoch 7, holder h, lease -, claimed 1m0s ago") {
		t.Fatalf("table:\n%s", out)
	}
	if m := doc.Missing([]string{"eventlogfile:Login", "x"}); len(m) != 1 || m[0] != "x" {
		t.Fatalf("missing %v", m)
	}
	var none *Document
	if !none.Empty() || doc.Empty() || len(none.Missing([]string{"a"})) != 1 {
		t.Fatal("nil document: empty, every key missing")
	}
}
