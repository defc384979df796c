package loki

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// allowedLabelNames is the fixed stream-label allowlist (docs/configuration.md): anything
// else belongs in structured metadata or the line, to keep stream cardinality
// low.
var allowedLabelNames = []string{"backfill", "environment", "event_type", "job", "org", "service_name", "sf_org_id", "source"}

// reservedStaticLabels carry per-entry identity; as static labels they would
// stamp every entry with one value and collapse all streams into one. backfill
// is set by sf2loki backfill on its own streams (bounded: one value).
var reservedStaticLabels = []string{"backfill", "event_type", "source"}

const (
	// MaxLabelNames is the most labels a stream may carry, not counting
	// service_name (Loki's max_label_names_per_series default).
	MaxLabelNames = 15
	// DefaultMaxLabelValueBytes is the default cap on a label value's length
	// (Loki's max_label_value_length default).
	DefaultMaxLabelValueBytes = 2048
	maxLabelNameBytes         = 1024
)

// ErrInvalidLabel is the sentinel wrapped by every [LabelError].
var ErrInvalidLabel = errors.New("invalid label")

// LabelError describes a label set the guard refuses.
type LabelError struct {
	// Name is the offending label, empty for a problem of the whole set.
	Name string
	// Problem says what is wrong, for humans.
	Problem string
	// reason is Loki's name for the problem (invalid_labels when empty).
	reason Reason
}

// Reason is Loki's reason for refusing a stream with this problem.
func (e *LabelError) Reason() Reason {
	if e.reason == "" {
		return ReasonInvalidLabels
	}
	return e.reason
}

// Error implements error.
func (e *LabelError) Error() string {
	if e.Name == "" {
		return "invalid label set: " + e.Problem
	}
	return fmt.Sprintf("invalid label %q: %s", e.Name, e.Problem)
}

// Unwrap makes errors.Is(err, ErrInvalidLabel) true.
func (e *LabelError) Unwrap() error { return ErrInvalidLabel }

// LabelOptions configures the label guard. The zero value is the default.
type LabelOptions struct {
	// ExtraAllowed lists label names allowed in addition to the fixed
	// allowlist, AllowedLabelNames (for example a per-type promoted field).
	// Each must pass CheckLabelName.
	ExtraAllowed []string
	// MaxValueBytes caps a label value's length in bytes; 0 means
	// DefaultMaxLabelValueBytes.
	MaxValueBytes int
}

// AllowedLabelNames returns the fixed allowlist of stream label names.
func AllowedLabelNames() []string { return slices.Clone(allowedLabelNames) }

// LabelGuard checks stream label sets against the allowlist and Loki's label
// rules. It is safe for concurrent use.
type LabelGuard struct {
	allowed  map[string]struct{}
	maxValue int
}

// NewLabelGuard returns a guard for opts, or an error wrapping ErrInvalidLabel
// naming an extra allowed name that is not a valid Loki label name.
func NewLabelGuard(opts LabelOptions) (*LabelGuard, error) {
	g := &LabelGuard{allowed: make(map[string]struct{}, len(allowedLabelNames)+len(opts.ExtraAllowed)), maxValue: opts.MaxValueBytes}
	if g.maxValue <= 0 {
		g.maxValue = DefaultMaxLabelValueBytes
	}
	for _, n := range allowedLabelNames {
		g.allowed[n] = struct{}{}
	}
	for _, n := range opts.ExtraAllowed {
		if p := nameProblem(n); p != "" {
			return nil, &LabelError{Name: n, Problem: "extra allowed label name " + p}
		}
		g.allowed[n] = struct{}{}
	}
	return g, nil
}

// Check returns nil if l may be sent as a stream label set, else a
// *LabelError: an empty set, a name outside the allowlist or not matching
// [a-zA-Z_][a-zA-Z0-9_]* (or starting with "__"), more than MaxLabelNames
// labels (service_name not counted), or a value that is too long or not valid
// UTF-8.
func (g *LabelGuard) Check(l Labels) error {
	if l.Len() == 0 {
		return &LabelError{Problem: "at least one label with a non-empty value is required", reason: ReasonMissingLabels}
	}
	n := 0
	for _, p := range l.pairs() {
		if err := g.checkPair(p.Name, p.Value); err != nil {
			return err
		}
		if p.Name != "service_name" {
			n++
		}
	}
	if n > MaxLabelNames {
		return &LabelError{Problem: fmt.Sprintf("%d label names, at most %d allowed (service_name not counted)", n, MaxLabelNames), reason: ReasonMaxLabelNames}
	}
	return nil
}

func (g *LabelGuard) checkPair(name, value string) error {
	if p := nameProblem(name); p != "" {
		e := &LabelError{Name: name, Problem: p}
		if len(name) > maxLabelNameBytes {
			e.reason = ReasonLabelNameTooLong
		}
		return e
	}
	if _, ok := g.allowed[name]; !ok {
		return &LabelError{Name: name, Problem: "not in the label allowlist (" + strings.Join(allowedLabelNames, ", ") + ", plus explicitly allowed extras); put it in structured metadata"}
	}
	if len(value) > g.maxValue {
		return &LabelError{Name: name, Problem: fmt.Sprintf("value is %d bytes, at most %d allowed", len(value), g.maxValue), reason: ReasonLabelValueTooLong}
	}
	if !utf8.ValidString(value) {
		return &LabelError{Name: name, Problem: "value is not valid UTF-8"}
	}
	return nil
}

// ValidateStaticLabels checks the operator's static labels at startup: every
// name must pass the guard for opts, no value may be empty, and the per-entry
// identity labels source and event_type may not be static. The error joins one
// *LabelError per offending label, each naming it.
func ValidateStaticLabels(static map[string]string, opts LabelOptions) error {
	g, err := NewLabelGuard(opts)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(static))
	for n := range static {
		names = append(names, n)
	}
	slices.Sort(names)
	var errs []error
	counted := 0
	for _, n := range names {
		v := static[n]
		switch {
		case slices.Contains(reservedStaticLabels, n):
			errs = append(errs, &LabelError{Name: n, Problem: "is set per entry by the source and cannot be a static label"})
		case v == "":
			errs = append(errs, &LabelError{Name: n, Problem: "value is empty"})
		default:
			if err := g.checkPair(n, v); err != nil {
				errs = append(errs, err)
			}
		}
		if n != "service_name" {
			counted++
		}
	}
	if counted > MaxLabelNames {
		errs = append(errs, &LabelError{Problem: fmt.Sprintf("%d static label names, at most %d allowed", counted, MaxLabelNames)})
	}
	return errors.Join(errs...)
}

// CheckLabelName returns a *LabelError naming name if it is not a label name
// the client sends: [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (Loki's
// own), at most 1024 bytes.
func CheckLabelName(name string) error {
	if p := nameProblem(name); p != "" {
		return &LabelError{Name: name, Problem: p}
	}
	return nil
}

// nameProblem returns why name is not a valid client label name, or "".
func nameProblem(name string) string {
	if name == "" {
		return "name is empty"
	}
	if len(name) > maxLabelNameBytes {
		return fmt.Sprintf("name is longer than %d bytes", maxLabelNameBytes)
	}
	if strings.HasPrefix(name, "__") {
		return `names starting with "__" are reserved by Loki`
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return "name must match [a-zA-Z_][a-zA-Z0-9_]*"
		}
	}
	return ""
}
