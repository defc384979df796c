package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// kind is how the loader treats a field's value.
type kind int

const (
	kindString kind = iota
	kindBool
	kindInt
	kindFloat
	kindDuration
	kindByteSize
	kindSecret
	kindTime
	kindStringList
	kindStringMap
	kindStruct
	kindStructList
)

// field describes one configuration key, derived once from the struct tags.
type field struct {
	key      string // YAML key
	goName   string
	index    int
	typ      reflect.Type
	kind     kind
	def      string
	hasDef   bool
	desc     string
	enum     []string
	min      *int64
	maxItems int  // entries a list or map may hold (max tag); 0 = MaxEntries
	secret   bool // a Secret, or a map whose values are secrets (secret tag)
	example  string
	children []*field // struct fields, or the element's fields for a struct list
}

var (
	durationType = reflect.TypeOf(Duration(0))
	byteSizeType = reflect.TypeOf(ByteSize(0))
	secretType   = reflect.TypeOf(Secret(""))
	timeType     = reflect.TypeOf(Time(""))
	// pubsubStartType is a string key whose JSON Schema allows earliest, latest or a time.
	pubsubStartType = reflect.TypeOf(PubSubStart(""))
	// environmentType is a string key whose JSON Schema lists its values (it may be empty, so it
	// has no enum tag).
	environmentType = reflect.TypeOf(Environment(""))
)

var (
	schemaOnce sync.Once
	rootFields []*field
)

// schema returns the fields of Config, derived from its tags.
func schema() []*field {
	schemaOnce.Do(func() { rootFields = fieldsOf(reflect.TypeOf(Config{})) })
	return rootFields
}

func fieldsOf(t reflect.Type) []*field {
	var out []*field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := parseTag(t, sf)
		key, _, _ := strings.Cut(tag.yaml, ",")
		if key == "" || key == "-" {
			continue
		}
		f := &field{key: key, goName: sf.Name, index: i, typ: sf.Type, desc: tag.desc, example: tag.example}
		f.def, f.hasDef = tag.def, tag.hasDef
		if e := tag.enum; e != "" {
			f.enum = strings.Split(e, "|")
		}
		if m := tag.min; m != "" {
			n, err := strconv.ParseInt(m, 10, 64)
			if err != nil {
				panic(fmt.Sprintf("config: bad min tag on %s.%s", t.Name(), sf.Name))
			}
			f.min = &n
		}
		f.kind = kindOf(sf.Type)
		f.secret = f.kind == kindSecret
		if tag.secret == "values" {
			if f.kind != kindStringMap {
				panic(fmt.Sprintf("config: secret:\"values\" on %s.%s, which is not a map of strings", t.Name(), sf.Name))
			}
			f.secret = true
		}
		if m := tag.max; m != "" {
			n, err := strconv.Atoi(m)
			if err != nil || n <= 0 || n > MaxEntries || !f.isCollection() {
				panic(fmt.Sprintf("config: bad max tag on %s.%s (entries of a list or map, 1..%d)", t.Name(), sf.Name, MaxEntries))
			}
			f.maxItems = n
		}
		switch f.kind {
		case kindStruct:
			f.children = fieldsOf(sf.Type)
		case kindStructList:
			f.children = fieldsOf(sf.Type.Elem())
		}
		out = append(out, f)
	}
	return out
}

// structTag holds the keys of a field's tag that the schema reads.
type structTag struct {
	yaml, desc, example, def, enum, min, secret, max string
	hasDef                                           bool
}

// parseTag reads a field's tag in one pass, with reflect.StructTag's grammar (key:"value" pairs
// separated by spaces, values Go-quoted). reflect.StructTag.Lookup scans the whole tag for each
// key it is asked, and a desc runs to hundreds of bytes: eight lookups per field of the schema
// took about 0.7 ms of every run's start. A malformed tag is a programming error and panics, as
// the schema's other tag errors do.
func parseTag(t reflect.Type, sf reflect.StructField) structTag {
	var st structTag
	keys := [...]struct {
		name string
		dst  *string
	}{
		{"yaml", &st.yaml}, {"desc", &st.desc}, {"example", &st.example}, {"default", &st.def},
		{"enum", &st.enum}, {"min", &st.min}, {"secret", &st.secret}, {"max", &st.max},
	}
	var seen uint // bit k: keys[k] was read
	tag := string(sf.Tag)
	for {
		tag = strings.TrimLeft(tag, " ")
		if tag == "" {
			return st
		}
		i := 0
		for i < len(tag) && tag[i] > ' ' && tag[i] != ':' && tag[i] != '"' && tag[i] != 0x7f {
			i++
		}
		if i == 0 || i+1 >= len(tag) || tag[i] != ':' || tag[i+1] != '"' {
			panic(fmt.Sprintf("config: malformed tag on %s.%s", t.Name(), sf.Name))
		}
		name := tag[:i]
		tag = tag[i+1:]
		// The closing quote is the first one not escaped. A desc runs to hundreds of bytes, so
		// the quote is found with IndexByte, and only a value with an escape or a line break
		// goes through strconv.Unquote (which rejects what reflect.StructTag would).
		i = 1 // past the opening quote
		for {
			j := strings.IndexByte(tag[i:], '"')
			if j < 0 {
				panic(fmt.Sprintf("config: malformed tag on %s.%s", t.Name(), sf.Name))
			}
			i += j
			backslashes := 0
			for k := i - 1; k > 0 && tag[k] == '\\'; k-- {
				backslashes++
			}
			if backslashes%2 == 0 {
				break
			}
			i++
		}
		value := tag[1:i]
		if strings.IndexByte(value, '\\') >= 0 || strings.IndexByte(value, '\n') >= 0 {
			var err error
			if value, err = strconv.Unquote(tag[:i+1]); err != nil {
				panic(fmt.Sprintf("config: malformed tag on %s.%s: %v", t.Name(), sf.Name, err))
			}
		}
		tag = tag[i+1:]
		for k, f := range keys {
			if f.name != name {
				continue
			}
			if seen&(1<<k) != 0 { // reflect would read the first; a repeat is a mistake
				panic(fmt.Sprintf("config: tag key %q repeated on %s.%s", name, t.Name(), sf.Name))
			}
			seen |= 1 << k
			*f.dst = value
			st.hasDef = st.hasDef || name == "default"
		}
	}
}

func kindOf(t reflect.Type) kind {
	switch t {
	case durationType:
		return kindDuration
	case byteSizeType:
		return kindByteSize
	case secretType:
		return kindSecret
	case timeType:
		return kindTime
	}
	switch t.Kind() {
	case reflect.String:
		return kindString
	case reflect.Bool:
		return kindBool
	case reflect.Int, reflect.Int64, reflect.Int32:
		return kindInt
	case reflect.Float64:
		return kindFloat
	case reflect.Struct:
		return kindStruct
	case reflect.Slice:
		switch t.Elem().Kind() {
		case reflect.String:
			return kindStringList
		case reflect.Struct:
			return kindStructList
		}
	case reflect.Map:
		if t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String {
			return kindStringMap
		}
	}
	panic("config: unsupported field type " + t.String())
}

// isCollection reports whether the field is a list or a map.
func (f *field) isCollection() bool {
	return f.kind == kindStringList || f.kind == kindStringMap || f.kind == kindStructList
}

// maxEntries is how many entries the list or map f may hold.
func (f *field) maxEntries() int {
	if f.maxItems > 0 {
		return f.maxItems
	}
	return MaxEntries
}

// typeName is the user-facing name of a field's type.
func (f *field) typeName() string {
	switch f.kind {
	case kindString:
		return "string"
	case kindBool:
		return "bool"
	case kindInt:
		return "integer"
	case kindFloat:
		return "number"
	case kindDuration:
		return "duration"
	case kindByteSize:
		return "size"
	case kindSecret:
		return "secret"
	case kindTime:
		return "time"
	case kindStringList:
		return "list of strings"
	case kindStringMap:
		return "map of strings"
	case kindStruct:
		return "section"
	case kindStructList:
		return "list"
	}
	return "?"
}

// setScalar parses s into v according to f. It is the one parser used for YAML scalars,
// environment overrides and defaults, so all three accept exactly the same spellings.
func setScalar(v reflect.Value, f *field, s string) error {
	switch f.kind {
	case kindString, kindSecret:
		v.SetString(s)
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a boolean (use true or false)", s)
		}
		v.SetBool(b)
	case kindInt:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		v.SetInt(n)
	case kindFloat:
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		v.SetFloat(x)
	case kindDuration:
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
	case kindByteSize:
		b, err := parseByteSize(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(b))
	case kindTime:
		t, err := parseTime(s)
		if err != nil {
			return err
		}
		v.SetString(string(t))
	case kindStringList:
		var items []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				items = append(items, p)
			}
		}
		v.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("expected a %s, not a single value", f.typeName())
	}
	return nil
}

// applyDefaults sets every defaulted field of the struct value v (recursively).
func applyDefaults(v reflect.Value, fields []*field) {
	for _, f := range fields {
		fv := v.Field(f.index)
		switch {
		case f.kind == kindStruct:
			applyDefaults(fv, f.children)
		case f.hasDef:
			if err := setScalar(fv, f, f.def); err != nil {
				panic(fmt.Sprintf("config: default of %s: %v", f.key, err))
			}
		}
	}
}

// Defaults returns a configuration with every default applied and nothing else.
func Defaults() *Config {
	c := &Config{}
	applyDefaults(reflect.ValueOf(c).Elem(), schema())
	return c
}

// credentialName matches the entries of a secret:"values" map that carry credentials
// (Authorization, X-API-Key, X-Auth-Token, Cookie, ...); an entry such as X-Scope-OrgID: prod is
// not scrubbed from every line that says prod.
var credentialName = regexp.MustCompile(`(?i)auth|token|key|secret|pass|cookie|session|credential|signature`)

// Secrets returns every secret value set in the configuration (Secret fields and the credential
// entries of maps tagged secret:"values"), for redaction.
func (c *Config) Secrets() []string {
	var out []string
	var walk func(v reflect.Value, fields []*field)
	walk = func(v reflect.Value, fields []*field) {
		for _, f := range fields {
			fv := v.Field(f.index)
			switch {
			case f.kind == kindSecret:
				if s := fv.String(); s != "" {
					out = append(out, s)
				}
			case f.kind == kindStringMap && f.secret:
				for _, k := range fv.MapKeys() {
					if s := fv.MapIndex(k).String(); s != "" && credentialName.MatchString(k.String()) {
						out = append(out, s)
					}
				}
			case f.kind == kindStruct:
				walk(fv, f.children)
			case f.kind == kindStructList:
				for i := 0; i < fv.Len(); i++ {
					walk(fv.Index(i), f.children)
				}
			}
		}
	}
	walk(reflect.ValueOf(c).Elem(), schema())
	return out
}

// ApplyDefaults sets the tag defaults of every field of the struct v points to (a list entry
// such as an SOQLObject built in code gets the same defaults as one read from YAML).
func ApplyDefaults(v any) {
	rv := reflect.ValueOf(v).Elem()
	applyDefaults(rv, fieldsOf(rv.Type()))
}
