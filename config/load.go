package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts every environment override: SF2LOKI_<SECTION>__<KEY>, path segments separated
// by a double underscore (SF2LOKI_SINK__LOKI__URL overrides sink.loki.url).
const EnvPrefix = "SF2LOKI_"

// FieldError is one problem with one configuration key.
type FieldError struct {
	Path string // dotted key path, e.g. sink.loki.url or orgs[1].name
	Msg  string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Errors is every problem found while loading a configuration. Loading never stops at the first.
type Errors []*FieldError

// Error lists the problems one per line, at most MaxPrintedErrors of them and then how many more
// there are: fixing the first ones usually clears many of the rest.
func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i == MaxPrintedErrors {
			fmt.Fprintf(&b, "\n… and %d more", len(es)-i)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func (es *Errors) add(path, format string, args ...any) {
	*es = append(*es, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// joined returns the errors err joins (errors.Join), err alone, or none for nil.
func joined(err error) []error {
	var list interface{ Unwrap() []error }
	switch {
	case err == nil:
		return nil
	case errors.As(err, &list):
		return list.Unwrap()
	}
	return []error{err}
}

// LoadOptions controls Load.
type LoadOptions struct {
	// Path of the YAML file; empty means defaults plus environment only.
	Path string
	// Environ is the environment (KEY=value); nil means os.Environ().
	Environ []string
	// Reference resolves ${scheme:ref}, a name with a colon, which no environment variable has
	// (the Lambda mode's ${secretsmanager:...} and ${ssm:...}); nil makes such a name an error.
	Reference func(ref string) (string, error)
	// Open opens the config file, secret files and the other files keys ending in _file name;
	// nil means os.Open. Reading stops past MaxFileBytes (the config file), MaxSecretFileBytes
	// (a secret file) or MaxNamedFileBytes (ca_file, credentials_file, ...).
	Open func(name string) (io.ReadCloser, error)
	// OnSecret, when set, receives every secret value as soon as it is known, before
	// validation, so the caller can scrub it from whatever it prints even when loading fails.
	OnSecret func(value string)
}

// Load reads, interpolates, decodes, overrides, resolves secrets and validates a configuration.
// Any problem is returned as Errors, each naming the key at fault.
func Load(opts LoadOptions) (*Config, error) {
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	if opts.Open == nil {
		opts.Open = openFile
	}
	l := &loader{env: envMap(opts.Environ), open: opts.Open, reference: opts.Reference, secretFiles: map[string]secretRef{}}
	cfg := Defaults()
	root := reflect.ValueOf(cfg).Elem()

	if opts.Path != "" {
		data, err := readCapped(opts.Open, opts.Path, MaxFileBytes)
		if errors.Is(err, errTooLarge) {
			return nil, Errors{{Msg: fmt.Sprintf("the config file %s is larger than %s, the most a configuration may hold; is it the right file?", opts.Path, ByteSize(MaxFileBytes))}}
		}
		if err != nil {
			return nil, Errors{{Msg: fmt.Sprintf("cannot read the config file: %v (pass an existing file with --config)", err)}}
		}
		if err := l.decodeYAML(data, root); err != nil {
			return nil, err
		}
	}
	if l.exhausted {
		announceSecrets(cfg, opts.OnSecret)
		return nil, l.errs // a half-decoded configuration would only add misleading problems
	}
	l.applyEnv(opts.Environ, root)
	l.resolveSecrets()
	l.checkNamedFiles(root, schema(), "")
	announceSecrets(cfg, opts.OnSecret)
	// Validate even after decoding problems (failed keys keep their defaults) so one run of
	// config check reports everything.
	if errs := append(l.errs, cfg.Validate()...); len(errs) > 0 {
		return nil, errs
	}
	return cfg, nil
}

type secretRef struct {
	file   string
	target reflect.Value
	origin string // where the _file key came from, for messages
}

type loader struct {
	env         map[string]string
	open        func(string) (io.ReadCloser, error)
	reference   func(string) (string, error)
	errs        Errors
	secretFiles map[string]secretRef // by secret key path

	scopes       []scope // the mappings being decoded, outermost first
	decoded      int     // YAML values decoded so far, aliases counted at every use
	exhausted    bool    // decoded passed MaxDecodedValues: decoding stopped
	interpolated int     // bytes built by ${NAME} interpolation so far
}

// spend counts one decoded YAML value. Past MaxDecodedValues it records why once and returns
// false, and every decoding step returns at once: nested aliases cannot expand without bound.
func (l *loader) spend(path string) bool {
	if l.exhausted {
		return false
	}
	l.decoded++
	if l.decoded > MaxDecodedValues {
		l.exhausted = true
		l.errs.add(path, "the configuration holds more than %d values (each use of a YAML alias counts the values it stands for again); decoding stopped here", MaxDecodedValues)
		return false
	}
	return true
}

// tooMany reports (once per list) a list or map of more entries than the field allows.
func (l *loader) tooMany(n *yaml.Node, f *field, path string) bool {
	entries := len(n.Content)
	if n.Kind == yaml.MappingNode {
		entries /= 2
	}
	if limit := f.maxEntries(); entries > limit {
		l.errs.add(path, "has %d entries; at most %d are allowed", entries, limit)
		return true
	}
	return false
}

func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func (l *loader) decodeYAML(data []byte, root reflect.Value) error {
	doc, err := parseYAML(data)
	if errors.Is(err, io.EOF) {
		return nil // an empty file is the defaults
	}
	if err != nil {
		return Errors{{Msg: fmt.Sprintf("the config file is not valid YAML: %v", err)}}
	}
	if len(doc.Content) == 0 {
		return nil
	}
	node := doc.Content[0]
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return nil
	}
	l.decodeStruct(node, root, schema(), "")
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a single value"
}

func (l *loader) decodeStruct(n *yaml.Node, v reflect.Value, fields []*field, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if !l.spend(path) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.errs.add(path, "expected a mapping of keys, got %s", nodeKind(n))
		return
	}
	l.scopes = append(l.scopes, scope{fields: fields, path: path})
	defer func() { l.scopes = l.scopes[:len(l.scopes)-1] }()
	byKey := make(map[string]*field, len(fields))
	var valid []string
	for _, f := range fields {
		byKey[f.key] = f
		valid = append(valid, f.key)
		if f.kind == kindSecret {
			valid = append(valid, f.key+"_file")
		}
	}
	seen := map[string]bool{}
	var unknown []unknownKey
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		key := kn.Value
		p := join(path, shortKey(key))
		if !l.spend(p) {
			return
		}
		if seen[key] {
			l.errs.add(p, "appears twice (line %d)", kn.Line)
			continue
		}
		seen[key] = true
		if f, ok := byKey[key]; ok {
			l.decodeField(vn, v.Field(f.index), f, p)
			continue
		}
		if base, ok := strings.CutSuffix(key, "_file"); ok {
			if f, ok := byKey[base]; ok && f.kind == kindSecret {
				file, ok := l.scalar(vn, p)
				if ok {
					l.secretFiles[join(path, base)] = secretRef{file: file, target: v.Field(f.index), origin: p}
				}
				continue
			}
		}
		unknown = append(unknown, unknownKey{key: key, line: kn.Line})
	}
	l.reportUnknown(n, fields, path, valid, unknown)
}

// scalar returns the interpolated string of a scalar node.
func (l *loader) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if !l.spend(path) {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		l.errs.add(path, "expected a single value, got %s", nodeKind(n))
		return "", false
	}
	s, err := interpolate(n.Value, l.env, l.reference)
	if err != nil {
		l.errs.add(path, "%v", err)
		return "", false
	}
	if s != n.Value {
		l.interpolated += len(s)
		if l.interpolated > MaxInterpolatedBytes {
			l.errs.add(path, "${NAME} interpolation has built more than %s of values; the configuration may hold at most that", ByteSize(MaxInterpolatedBytes))
			l.exhausted = true
			return "", false
		}
	}
	return s, true
}

func (l *loader) decodeField(n *yaml.Node, v reflect.Value, f *field, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if l.exhausted {
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // "key:" with no value keeps the default
	}
	if (n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode) && len(n.Content) == 0 && f.kind != kindStruct {
		return // [] and {} are the (empty) default
	}
	switch f.kind {
	case kindStruct:
		l.decodeStruct(n, v, f.children, path)
	case kindStructList:
		if n.Kind != yaml.SequenceNode {
			l.errs.add(path, "expected a list, got %s", nodeKind(n))
			return
		}
		if l.tooMany(n, f, path) {
			return
		}
		list := reflect.MakeSlice(f.typ, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			elem := list.Index(i)
			applyDefaults(elem, f.children)
			l.decodeStruct(item, elem, f.children, fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(list)
	case kindStringList:
		if n.Kind != yaml.SequenceNode {
			l.errs.add(path, "expected a list of strings, got %s", nodeKind(n))
			return
		}
		if l.tooMany(n, f, path) {
			return
		}
		items := make([]string, 0, len(n.Content))
		for i, item := range n.Content {
			if s, ok := l.scalar(item, fmt.Sprintf("%s[%d]", path, i)); ok {
				items = append(items, s)
			}
		}
		v.Set(reflect.ValueOf(items))
	case kindStringMap:
		if n.Kind != yaml.MappingNode {
			l.errs.add(path, "expected a mapping of strings, got %s", nodeKind(n))
			return
		}
		if l.tooMany(n, f, path) {
			return
		}
		m := make(map[string]string, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if s, ok := l.scalar(n.Content[i+1], join(path, k)); ok {
				m[k] = s
			}
		}
		v.Set(reflect.ValueOf(m))
	default:
		s, ok := l.scalar(n, path)
		if !ok {
			return
		}
		if err := setScalar(v, f, s); err != nil {
			l.errs.add(path, "%v", err)
			return
		}
		if f.kind == kindSecret {
			delete(l.secretFiles, path) // an inline value in the same file wins over nothing; env may still override
		}
	}
}

// interpolate replaces ${NAME} with the environment variable NAME and ${scheme:ref} with what
// reference resolves; "$${" stays a literal "${".
func interpolate(s string, env map[string]string, reference func(string) (string, error)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ in %q", s)
		}
		name := s[i+2 : i+end]
		val, ok := env[name]
		if strings.Contains(name, ":") {
			if reference == nil {
				return "", fmt.Errorf("${%s} is a secret reference, resolved only when sf2loki runs as an AWS Lambda function", name)
			}
			v, err := reference(name)
			if err != nil {
				return "", err
			}
			val, ok = v, true
		}
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set (used as ${%s}); set it or write the value", name, name)
		}
		b.WriteString(s[:i])
		b.WriteString(val)
		s = s[i+end+1:]
		if b.Len() > MaxInterpolatedBytes {
			return "", fmt.Errorf("${NAME} interpolation builds a value of more than %s", ByteSize(MaxInterpolatedBytes))
		}
	}
}

// applyEnv applies SF2LOKI_<SECTION>__<KEY> overrides; an override naming no key is an error.
func (l *loader) applyEnv(environ []string, root reflect.Value) {
	var names []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, EnvPrefix) && strings.Contains(k, "__") {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		segs := strings.Split(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), "__")
		l.applyEnvPath(name, l.env[name], segs, root, schema(), "")
	}
}

func (l *loader) applyEnvPath(name, val string, segs []string, v reflect.Value, fields []*field, path string) {
	seg := segs[0]
	var f *field
	var valid []string
	for _, c := range fields {
		valid = append(valid, c.key)
		if c.key == seg {
			f = c
		}
	}
	p := join(path, seg)
	if f == nil {
		if base, ok := strings.CutSuffix(seg, "_file"); ok && len(segs) == 1 {
			for _, c := range fields {
				if c.key == base && c.kind == kindSecret {
					l.secretFiles[join(path, base)] = secretRef{file: val, target: v.Field(c.index), origin: "env " + name}
					return
				}
			}
		}
		msg := "environment override " + name + " names no configuration key"
		if s := suggest(seg, valid); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		l.errs.add(p, "%s", msg)
		return
	}
	fv := v.Field(f.index)
	rest := segs[1:]
	switch f.kind {
	case kindStruct:
		if len(rest) == 0 {
			l.errs.add(p, "environment override %s names a section; name a key inside it", name)
			return
		}
		l.applyEnvPath(name, val, rest, fv, f.children, p)
	case kindStructList:
		if len(rest) < 2 {
			l.errs.add(p, "environment override %s must name an index and a key, e.g. %s0__NAME", name, name+"__")
			return
		}
		i, err := strconv.Atoi(rest[0])
		if err != nil || i < 0 || i > fv.Len() {
			l.errs.add(p, "environment override %s: index %q is not an existing position (0..%d)", name, rest[0], fv.Len())
			return
		}
		if i == fv.Len() {
			elem := reflect.New(f.typ.Elem()).Elem()
			applyDefaults(elem, f.children)
			fv.Set(reflect.Append(fv, elem))
		}
		l.applyEnvPath(name, val, rest[1:], fv.Index(i), f.children, fmt.Sprintf("%s[%d]", p, i))
	case kindStringMap:
		if len(rest) != 1 {
			l.errs.add(p, "environment override %s must name one map key, e.g. %s__KEY", name, name)
			return
		}
		if fv.IsNil() {
			fv.Set(reflect.MakeMap(f.typ))
		}
		fv.SetMapIndex(reflect.ValueOf(rest[0]), reflect.ValueOf(val))
	default:
		if len(rest) != 0 {
			l.errs.add(p, "environment override %s goes below a single value", name)
			return
		}
		if err := setScalar(fv, f, val); err != nil {
			l.errs.add(p, "%v (from env %s)", err, name)
			return
		}
		if f.kind == kindSecret {
			delete(l.secretFiles, p) // the env value wins over a _file from YAML
		}
	}
}

// resolveSecrets reads every <secret>_file. A missing, unreadable or empty file is an error.
func (l *loader) resolveSecrets() {
	paths := make([]string, 0, len(l.secretFiles))
	for p := range l.secretFiles {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		ref := l.secretFiles[p]
		key := p + "_file"
		if ref.file == "" {
			l.errs.add(key, "is empty; give the path of the file holding the secret")
			continue
		}
		data, err := readCapped(l.open, ref.file, MaxSecretFileBytes)
		if errors.Is(err, errTooLarge) {
			l.errs.add(key, "secret file %s is larger than %s, the most a secret file may hold", ref.file, ByteSize(MaxSecretFileBytes))
			continue
		}
		if err != nil {
			l.errs.add(key, "cannot read secret file: %v", err)
			continue
		}
		s := strings.TrimRight(string(data), "\r\n")
		if strings.TrimSpace(s) == "" {
			l.errs.add(key, "secret file %s is empty", ref.file)
			continue
		}
		ref.target.SetString(s)
	}
}

// checkNamedFiles reads, up to MaxNamedFileBytes, every file that a plain key ending in _file
// names (ca_file, cert_file, key_file, credentials_file), as the clients will read it whole:
// /dev/zero or a runaway file is refused here, at once, by config check and run-once alike,
// instead of being read until memory runs out. A missing or unreadable file is refused too.
func (l *loader) checkNamedFiles(v reflect.Value, fields []*field, path string) {
	for _, f := range fields {
		fv, p := v.Field(f.index), join(path, f.key)
		switch f.kind {
		case kindString:
			name := fv.String()
			if !strings.HasSuffix(f.key, "_file") || name == "" {
				continue
			}
			_, err := readCapped(l.open, name, MaxNamedFileBytes)
			if errors.Is(err, errTooLarge) {
				l.errs.add(p, "file %s is larger than %s, the most a certificate, key or credentials file may hold", name, ByteSize(MaxNamedFileBytes))
			} else if err != nil {
				l.errs.add(p, "cannot read the file: %v", err)
			}
		case kindStruct:
			l.checkNamedFiles(fv, f.children, p)
		case kindStructList:
			for i := 0; i < fv.Len(); i++ {
				l.checkNamedFiles(fv.Index(i), f.children, fmt.Sprintf("%s[%d]", p, i))
			}
		}
	}
}

// announceSecrets hands every secret value of cfg to onSecret.
func announceSecrets(cfg *Config, onSecret func(string)) {
	if onSecret == nil {
		return
	}
	for _, v := range cfg.Secrets() {
		onSecret(v)
	}
}
