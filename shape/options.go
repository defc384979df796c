package shape

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/loki"
)

// Op names a transform.
type Op string

// Transform operations.
const (
	// OpHash replaces each matched field's value by the hex HMAC-SHA256 of the value keyed with
	// Options.Salt ("salted SHA-256"). Empty values stay empty. The original value (at least
	// MinScrubBytes long) is also replaced by the hash wherever it appears inside another field
	// of the record (USER_ID inside USER_ID_DERIVED).
	OpHash Op = "hash"
	// OpMask hides each matched field's value according to Transform.Mode.
	OpMask Op = "mask"
	// OpDropField removes the matched fields from the line, metadata and labels.
	OpDropField Op = "drop_field"
	// OpRegexReplace rewrites each matched field's value with Pattern and Replacement (Go
	// regexp syntax, $1 / ${name} expansions).
	OpRegexReplace Op = "regex_replace"
	// OpDropRow drops the whole record when every condition of Match holds; the record still
	// advances its key's cursor (a Skip record with reason "drop_row:<Name>").
	OpDropRow Op = "drop_row"
)

// MaskMode selects how OpMask hides a value.
type MaskMode string

// Mask modes. A value that is not recognized as what the mode expects is masked in full, so a
// mask never leaks a value it did not understand — except that MaskIP leaves a value holding no
// IP address at all unchanged (an EventLogFile CLIENT_IP of "Salesforce.com IP").
const (
	// MaskAuto masks e-mail addresses as MaskEmail, IP addresses as MaskIP, anything else as
	// MaskFull. It is the default.
	MaskAuto MaskMode = "auto"
	// MaskEmail keeps the first character of the local part and the domain:
	// jane.doe@example.com → j***@example.com.
	MaskEmail MaskMode = "email"
	// MaskIP zeroes the host part: the last octet of an IPv4 address (10.1.2.3 → 10.1.2.0), all
	// but the first 48 bits of an IPv6 address (2001:db8:1:2::5 → 2001:db8:1::), and so of each
	// address of a comma- or space-separated list. A value without any address in it
	// ("Salesforce.com IP", "unknown") is not changed; other text holding an address is masked
	// in full.
	MaskIP MaskMode = "ip"
	// MaskFull replaces every character by '*', keeping the length in characters.
	MaskFull MaskMode = "full"
)

// Transform is one shaping rule. Which fields take part in it depends on Op.
type Transform struct {
	Op Op
	// Name names a drop_row rule in skip reasons and counters ("drop_row:<Name>"); default
	// "drop_row_<index>".
	Name string
	// Types limits the transform to these record types (EventLogFile event types, SOQL object
	// names; ASCII case-insensitive). Empty means every type.
	Types []string
	// Fields are field-name globs (case-insensitive; *, ? and [...] as in path.Match) naming the
	// fields a hash, mask, drop_field or regex_replace applies to. Required for those ops.
	Fields []string
	// Mode is the mask mode (default MaskAuto).
	Mode MaskMode
	// Pattern and Replacement are the regex_replace expression and its replacement.
	Pattern     string
	Replacement string
	// Match holds the drop_row conditions: field name → value glob (case-sensitive; *, ?, [...],
	// \ escapes). All must match; an absent field has the empty value. An empty Match drops
	// every record of the transform's types.
	Match map[string]string
}

// TypeRule holds the per-type settings of one record type.
type TypeRule struct {
	// Type is the event type or object name (ASCII case-insensitive).
	Type string
	// Labels are fields promoted to stream labels for this type (explicit opt-in). The label
	// name is the field name lower-cased with every character outside [a-z0-9_] replaced by
	// '_' (LOGIN_STATUS → login_status); see LabelName.
	Labels []string
	// Metadata are fields sent as structured metadata for this type, in addition to
	// Options.Metadata.
	Metadata []string
	// SampleRate keeps this fraction of the type's records, chosen deterministically from the
	// sample key, so a re-run keeps the same records. 0 means 1 (keep all); it must be in (0, 1].
	SampleRate float64
	// SampleField names the field whose value is the sample key; empty (or an empty value)
	// means the record's stable id (Record.ID).
	SampleField string
}

// Options configures a Shaper. The zero value ships every field in the line and nothing else.
type Options struct {
	// Salt keys the hash transform. Required (at least 16 bytes) when a hash transform exists;
	// keep it secret and stable, or hashed values stop matching across runs.
	Salt []byte
	// Transforms apply in order (drop_row rules are evaluated first, on the values as the source
	// read them; see Plan.Shape).
	Transforms []Transform
	// Metadata are fields sent as structured metadata for every type (field names,
	// case-insensitive; a field absent from a record is skipped).
	Metadata []string
	// Types are the per-type settings; at most one entry per type.
	Types []TypeRule
	// Labels are static stream labels added to every entry (operator labels, environment).
	// job and service_name default to DefaultJob when absent. Per-entry labels (source,
	// event_type, sf_org_id, org) come from the Schema and win over these.
	Labels map[string]string
	// OmitEmpty leaves fields with an empty value out of the JSON line.
	OmitEmpty bool
	// CategoryAliases extends the built-in category alias table (see Category).
	CategoryAliases map[string]string
}

// DefaultJob is the default value of the job and service_name labels.
const DefaultJob = "sf2loki"

// MinSaltBytes is the shortest hash salt accepted.
const MinSaltBytes = 16

// ErrInvalid is wrapped by every *OptionError.
var ErrInvalid = errors.New("shape: invalid options")

// OptionError names one invalid option by its path relative to Options, in configuration
// spelling (transforms[2].pattern, types[0].labels), so the config layer can prefix its section.
type OptionError struct {
	Path    string
	Problem string
}

// Error implements error.
func (e *OptionError) Error() string { return e.Path + ": " + e.Problem }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *OptionError) Unwrap() error { return ErrInvalid }

// reservedLabels are the labels sf2loki sets itself (statically, per entry, or backfill on the
// streams of sf2loki backfill): the Loki client's fixed allowlist, beside which a promoted label is
// an extra (loki.LabelOptions.ExtraAllowed). A promoted field may not take their names.
var reservedLabels = loki.AllowedLabelNames()

// backfillLabel is the label sf2loki backfill adds to its own streams (eventlogfile.BackfillLabel).
const backfillLabel = "backfill"

// LabelName returns the stream label name a promoted field gets: lower-cased, every character
// outside [a-z0-9_] replaced by '_', and a leading digit prefixed with '_'.
func LabelName(field string) string {
	b := []byte(strings.ToLower(field))
	for i, c := range b {
		if c != '_' && (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	if len(b) > 0 && b[0] >= '0' && b[0] <= '9' {
		b = append([]byte{'_'}, b...)
	}
	return string(b)
}

// Validate checks opts and returns every problem found, each an *OptionError naming its path.
// New runs it too; the config layer calls it at load so a bad regex or a drop_field of a
// promoted label is a config error (exit 2), not a runtime one.
func Validate(opts Options) error {
	var errs []error
	add := func(path, format string, args ...any) {
		errs = append(errs, &OptionError{Path: path, Problem: fmt.Sprintf(format, args...)})
	}
	hasHash := false
	for i, t := range opts.Transforms {
		p := fmt.Sprintf("transforms[%d]", i)
		switch t.Op {
		case OpHash:
			hasHash = true
		case OpMask:
			switch t.Mode {
			case "", MaskAuto, MaskEmail, MaskIP, MaskFull:
			default:
				add(p+".mode", "%q is not one of auto, email, ip, full", t.Mode)
			}
		case OpDropField:
		case OpRegexReplace:
			if t.Pattern == "" {
				add(p+".pattern", "is required for regex_replace")
			} else if _, err := regexp.Compile(t.Pattern); err != nil {
				add(p+".pattern", "is not a valid regular expression: %v", err)
			}
		case OpDropRow:
			if len(t.Fields) > 0 {
				add(p+".fields", "drop_row matches on match: {FIELD: glob}, not on fields")
			}
			for f, g := range t.Match {
				if f == "" {
					add(p+".match", "has an empty field name")
				}
				if err := checkGlob(g); err != nil {
					add(p+".match."+f, "%v", err)
				}
			}
		case "":
			add(p+".op", "is required (hash, mask, drop_field, regex_replace or drop_row)")
		default:
			add(p+".op", "%q is not one of hash, mask, drop_field, regex_replace, drop_row", t.Op)
		}
		if t.Op != OpDropRow && t.Op != "" {
			if len(t.Fields) == 0 {
				add(p+".fields", "is required for %s (field names or globs)", t.Op)
			}
			if len(t.Match) > 0 {
				add(p+".match", "only drop_row takes match")
			}
		}
		for j, f := range t.Fields {
			if err := checkGlob(f); err != nil || f == "" {
				if err == nil {
					err = errors.New("is empty")
				}
				add(fmt.Sprintf("%s.fields[%d]", p, j), "%v", err)
			}
		}
		if t.Op != OpMask && t.Mode != "" {
			add(p+".mode", "only mask takes a mode")
		}
		if t.Op != OpRegexReplace && (t.Pattern != "" || t.Replacement != "") {
			add(p+".pattern", "only regex_replace takes pattern and replacement")
		}
	}
	for i, m := range opts.Metadata {
		if err := checkGlob(m); err != nil || m == "" {
			add(fmt.Sprintf("metadata[%d]", i), "%q is not a field name or glob", m)
		}
	}
	if hasHash && len(opts.Salt) < MinSaltBytes {
		add("salt", "a hash transform needs a salt of at least %d bytes (use salt_file)", MinSaltBytes)
	}
	seen := map[string]int{}
	for i, tr := range opts.Types {
		p := fmt.Sprintf("types[%d]", i)
		key := strings.ToLower(tr.Type)
		if tr.Type == "" {
			add(p+".type", "is required")
		} else {
			if j, dup := seen[key]; dup {
				add(p+".type", "%q is also types[%d]; merge the two entries", tr.Type, j)
			}
			seen[key] = i
		}
		if tr.SampleRate < 0 || tr.SampleRate > 1 {
			add(p+".sample_rate", "%v must be in (0, 1] (0 means 1, keep all)", tr.SampleRate)
		}
		for j, m := range tr.Metadata {
			if err := checkGlob(m); err != nil || m == "" {
				add(fmt.Sprintf("%s.metadata[%d]", p, j), "%q is not a field name or glob", m)
			}
		}
		names := map[string]string{}
		for j, f := range tr.Labels {
			lp := fmt.Sprintf("%s.labels[%d]", p, j)
			n := LabelName(f)
			switch {
			case f == "":
				add(lp, "is empty")
				continue
			case strings.ContainsAny(f, "*?[\\"):
				add(lp, "%q: promoted labels name fields exactly (no globs)", f)
			case slices.Contains(reservedLabels, n):
				add(lp, "field %q would become label %q, which is reserved (%s)", f, n, strings.Join(reservedLabels, ", "))
			case strings.HasPrefix(n, "__"):
				add(lp, "field %q would become label %q; names starting with __ are reserved by Loki", f, n)
			}
			if other, dup := names[n]; dup {
				add(lp, "field %q and field %q both become label %q", f, other, n)
			}
			names[n] = f
			for ti, t := range opts.Transforms {
				if t.Op == OpDropField && t.appliesTo(tr.Type) && matchAnyName(t.Fields, f) {
					add(fmt.Sprintf("transforms[%d].fields", ti), "drops field %q, which types[%d] promotes to label %q; remove one of the two", f, i, n)
				}
			}
		}
		if room := PromotedLabelRoom(0); len(tr.Labels) > room {
			set := everyStreamLabels()
			add(p+".labels", "%d promoted labels do not fit in Loki's %d labels per stream (service_name not counted) beside the %d sf2loki sets: %s, and %s on the streams of sf2loki backfill; promote at most %d",
				len(tr.Labels), loki.MaxLabelNames, len(set)+1, strings.Join(set, ", "), backfillLabel, room)
		}
	}
	for n := range opts.Labels {
		if n == "source" || n == "event_type" {
			add("labels."+n, "is set per entry and cannot be a static label")
		}
	}
	for k, v := range opts.CategoryAliases {
		if normalizeCategory(k) == "" || normalizeCategory(v) == "" {
			add("category_aliases."+k, "alias and category must both be non-empty names")
		}
	}
	return errors.Join(errs...)
}

// PromotedLabelRoom returns how many fields one type may promote to stream labels when each of its
// streams also carries extraStatic static labels beyond those sf2loki sets (names allowed by
// loki.LabelOptions.ExtraAllowed): what the Loki client's guard leaves of loki.MaxLabelNames
// (service_name not counted) beside them and every label sf2loki sets. One configuration ships
// the live streams and a backfill's, which carry backfill too: the promoted labels must fit
// beside both. Below zero, the static labels alone do not fit.
func PromotedLabelRoom(extraStatic int) int {
	return loki.MaxLabelNames - len(everyStreamLabels()) - 1 - extraStatic
}

// everyStreamLabels returns the labels sf2loki sets on every stream that Loki counts against its
// limit: the reserved ones but service_name, and backfill, set on a backfill's streams only.
func everyStreamLabels() []string {
	return slices.DeleteFunc(slices.Clone(reservedLabels), func(n string) bool { return n == "service_name" || n == backfillLabel })
}

// appliesTo reports whether the transform applies to records of type typ.
func (t *Transform) appliesTo(typ string) bool {
	if len(t.Types) == 0 {
		return true
	}
	for _, x := range t.Types {
		if strings.EqualFold(x, typ) {
			return true
		}
	}
	return false
}

// matchAnyName reports whether name matches one of the case-insensitive globs.
func matchAnyName(globs []string, name string) bool {
	lname := strings.ToLower(name)
	for _, g := range globs {
		if globMatch(strings.ToLower(g), lname) {
			return true
		}
	}
	return false
}
