package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseTagReadsWhatReflectReads compares the one-pass tag parser with reflect's Lookup on
// every field of the configuration, for every key the schema reads.
func TestParseTagReadsWhatReflectReads(t *testing.T) {
	n := 0
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			sf := typ.Field(i)
			got := parseTag(typ, sf)
			for key, have := range map[string]string{
				"yaml": got.yaml, "desc": got.desc, "example": got.example, "default": got.def,
				"enum": got.enum, "min": got.min, "secret": got.secret, "max": got.max,
			} {
				want, ok := sf.Tag.Lookup(key)
				if have != want {
					t.Errorf("%s.%s: tag %s = %q, reflect reads %q", typ.Name(), sf.Name, key, have, want)
				}
				if key == "default" && got.hasDef != ok {
					t.Errorf("%s.%s: default present = %v, reflect says %v", typ.Name(), sf.Name, got.hasDef, ok)
				}
			}
			n++
			ft := sf.Type
			for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map || ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			key, _, _ := strings.Cut(got.yaml, ",")
			if ft.Kind() == reflect.Struct && ft.PkgPath() == typ.PkgPath() && key != "" && key != "-" {
				walk(ft)
			}
		}
	}
	walk(reflect.TypeOf(Config{}))
	if n < 100 {
		t.Fatalf("compared %d fields; the configuration has hundreds", n)
	}
}

func TestParseTagEdges(t *testing.T) {
	type probe struct {
		A int `yaml:"a,omitempty" desc:"a \"quoted\" word: and\ttab" default:"" other:"x"`
	}
	sf := reflect.TypeOf(probe{}).Field(0)
	got := parseTag(reflect.TypeOf(probe{}), sf)
	if got.yaml != "a,omitempty" || got.desc != "a \"quoted\" word: and\ttab" || !got.hasDef || got.def != "" {
		t.Fatalf("parseTag = %+v", got)
	}
	// Values that end in escaped backslashes, escaped quotes among them, and plain text after
	// an escaped one: parseTag reads what reflect reads.
	for _, tag := range []reflect.StructTag{`desc:"ends in \\" yaml:"b"`, `desc:"a \\\"b\\\\" yaml:"c"`,
		`desc:"\\\\\\" example:"plain, after"`, `desc:"é \u00e9" yaml:"d"`} {
		got := parseTag(reflect.TypeOf(probe{}), reflect.StructField{Name: "A", Tag: tag})
		for key, have := range map[string]string{"yaml": got.yaml, "desc": got.desc, "example": got.example} {
			if want := tag.Get(key); have != want {
				t.Errorf("tag %s: %s = %q, reflect reads %q", tag, key, have, want)
			}
		}
	}
	for _, bad := range []reflect.StructTag{`yaml:"a" yaml:"b"`, `yaml:"a`, `yaml "a"`, `:"a"`, `desc:"a \"`,
		"desc:\"two\nlines\""} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "probe.A") {
					t.Errorf("tag %q: panic %v, want one naming probe.A", bad, r)
				}
			}()
			parseTag(reflect.TypeOf(probe{}), reflect.StructField{Name: "A", Tag: bad})
		}()
	}
}
