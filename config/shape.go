package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sf2loki/sf2loki/shape"
)

// Shape configures how records become Loki entries: transforms, sampling, field routing. It
// applies to every source and org (package shape).
type Shape struct {
	Salt             Secret            `yaml:"salt" desc:"Deployment salt of the hash transform (HMAC-SHA256), at least 16 bytes; prefer salt_file. Changing it changes every hashed value."`
	Transforms       []ShapeTransform  `yaml:"transforms" desc:"Field transforms, applied in order to every record before sampling and routing (drop_row rules are evaluated first, on the values as Salesforce sent them)."`
	Metadata         []string          `yaml:"metadata" desc:"Fields sent as structured metadata for every type (names or globs, case-insensitive); every field is also in the JSON line."`
	Types            []ShapeType       `yaml:"types" desc:"Per-type settings (EventLogFile event type, SOQL object): promoted labels, structured metadata, sampling."`
	OmitEmpty        bool              `yaml:"omit_empty" desc:"Leave fields with an empty value out of the JSON line."`
	CategoryAliases  map[string]string `yaml:"category_aliases" desc:"Extra names for the overlap guard: name -> event category (built in: LoginHistory -> login; Event, EventStream and EventStore suffixes are ignored)."`
	LabelCardinality LabelCardinality  `yaml:"label_cardinality" desc:"A cap on the distinct values of the promoted labels per day, past which entries share one overflow value."`
}

// ShapeTransform is one entry of shape.transforms.
type ShapeTransform struct {
	Op          string            `yaml:"op" enum:"hash|mask|drop_field|regex_replace|drop_row" example:"hash" desc:"What to do: hash (salted SHA-256; the original value is also replaced inside other fields), mask, drop_field, regex_replace, or drop_row."`
	Name        string            `yaml:"name" desc:"Name of a drop_row rule, reported in skip reasons (drop_row:<name>)."`
	Types       []string          `yaml:"types" desc:"Limit to these event types / objects (empty = all)."`
	Fields      []string          `yaml:"fields" example:"[USER_ID, USER_NAME]" desc:"Fields the transform applies to (names or globs such as *_IP, case-insensitive); not for drop_row."`
	Mode        string            `yaml:"mode" desc:"mask only: auto (default: e-mail and IP aware), email, ip (each address of the value masked; a value holding no address, such as Salesforce.com IP, is left as it is) or full."`
	Pattern     string            `yaml:"pattern" desc:"regex_replace only: Go regular expression, checked at load."`
	Replacement string            `yaml:"replacement" desc:"regex_replace only: replacement ($1, ${name} expand groups)."`
	Match       map[string]string `yaml:"match" desc:"drop_row only: field -> value glob; the row is dropped when all match (an empty match drops every row of the types)."`
}

// ShapeType is one entry of shape.types.
type ShapeType struct {
	Type        string   `yaml:"type" example:"Login" desc:"Event type or object name (case-insensitive)."`
	Labels      []string `yaml:"labels" desc:"Fields promoted to stream labels for this type (label name: the field lower-cased, e.g. login_status), at most 8 per type, one fewer for each static label sink.loki.extra_labels allows; none may become a name sf2loki sets itself (job, service_name, source, event_type, sf_org_id, environment, org, backfill). Keep cardinality low."`
	Metadata    []string `yaml:"metadata" desc:"Fields sent as structured metadata for this type, besides shape.metadata."`
	SampleRate  float64  `yaml:"sample_rate" desc:"Keep this fraction of the type's records (0 < rate <= 1; 0 = keep all), chosen deterministically so a re-run keeps the same ones."`
	SampleField string   `yaml:"sample_field" desc:"Field whose value decides sampling (e.g. REQUEST_ID); empty = the record's stable id."`
}

// ShapeOptions returns the shape package's options for this section. The static labels
// (sink.loki.labels) are added by the caller.
func (s Shape) ShapeOptions() shape.Options {
	o := shape.Options{
		Salt:            []byte(s.Salt.Value()),
		Metadata:        s.Metadata,
		OmitEmpty:       s.OmitEmpty,
		CategoryAliases: s.CategoryAliases,
	}
	for _, t := range s.Transforms {
		o.Transforms = append(o.Transforms, shape.Transform{
			Op: shape.Op(t.Op), Name: t.Name, Types: t.Types, Fields: t.Fields, Mode: shape.MaskMode(t.Mode),
			Pattern: t.Pattern, Replacement: t.Replacement, Match: t.Match,
		})
	}
	for _, t := range s.Types {
		o.Types = append(o.Types, shape.TypeRule{
			Type: t.Type, Labels: t.Labels, Metadata: t.Metadata, SampleRate: t.SampleRate, SampleField: t.SampleField,
		})
	}
	return o
}

func (c *Config) validateShape(errs *Errors) {
	if err := shape.Validate(c.Shape.ShapeOptions()); err != nil {
		addShapeErrors(err, "shape", errs)
	}
	for i, t := range c.Shape.Transforms {
		if t.Op == "hash" && c.Shape.Salt == "" {
			errs.add("shape.salt_file", "is required by the hash transform shape.transforms[%d] (a secret of at least %d bytes)", i, shape.MinSaltBytes)
			break
		}
	}
	c.validateAliasOverlap(errs)
	c.validateLabelRoom(errs)
	c.validatePromotedStatic(errs)
	c.validateLabelCardinality(errs)
}

// addShapeErrors turns the shape package's *OptionErrors into key-named config errors.
func addShapeErrors(err error, prefix string, errs *Errors) {
	for _, e := range joined(err) {
		var oe *shape.OptionError
		switch {
		case errors.As(e, &oe) && (oe.Path == "salt" || strings.HasSuffix(oe.Path, "].op")):
			// The salt is reported by validateShape with the key to set, op by its enum tag.
		case errors.As(e, &oe):
			errs.add(prefix+"."+oe.Path, "%s", oe.Problem)
		default:
			errs.add(prefix, "%v", e)
		}
	}
}

// categoryClaimer is implemented by the source sections that feed event categories: it lists
// the configured names (event types, objects, topics) with their config paths, for the overlap
// guard. A section without it claims nothing.
type categoryClaimer interface {
	claims(path string) []shape.Claim
}

// Claims returns the event-category claims of every enabled source of one org, in config
// order; path is the org's sources path (sources or orgs[i].sources).
func (s Sources) Claims(path string) []shape.Claim {
	var out []shape.Claim
	sections := []struct {
		key string
		v   any
	}{{"eventlogfile", s.EventLogFile}, {"soql", s.SOQL}, {"apexlog", s.ApexLog}, {"pubsub", s.PubSub}}
	for _, sec := range sections {
		if c, ok := sec.v.(categoryClaimer); ok {
			out = append(out, c.claims(path+"."+sec.key)...)
		}
	}
	return out
}

// validateOverlap is the startup guard refusing two sources that feed one event category (for
// example LoginEvent through soql and Login through eventlogfile), unless allow_overlap is set.
// It uses the built-in alias table; validateShape adds what shape.category_aliases reveals.
func validateOverlap(s Sources, path string, errs *Errors) {
	for _, oe := range overlaps(s, path, nil) {
		addOverlap(oe, path, errs)
	}
}

// validateAliasOverlap reports the overlaps that only the configured category aliases reveal.
func (c *Config) validateAliasOverlap(errs *Errors) {
	if len(c.Shape.CategoryAliases) == 0 {
		return
	}
	for _, o := range c.OrgList() {
		path := sourcesPath(c, o)
		for _, oe := range overlaps(o.Sources, path, c.Shape.CategoryAliases) {
			if shape.CheckOverlap([]shape.Claim{oe.First, oe.Second}, nil) == nil {
				addOverlap(oe, path, errs)
			}
		}
	}
}

// sourcesPath is the config path of an org's sources section.
func sourcesPath(c *Config, o OrgEntry) string {
	if o.Name != "" || len(c.Orgs) > 0 {
		return o.Path[:len(o.Path)-len(".salesforce")] + ".sources"
	}
	return "sources"
}

func overlaps(s Sources, path string, aliases map[string]string) []*shape.OverlapError {
	if s.AllowOverlap {
		return nil
	}
	var out []*shape.OverlapError
	for _, e := range joined(shape.CheckOverlap(s.Claims(path), aliases)) {
		var oe *shape.OverlapError
		if errors.As(e, &oe) {
			out = append(out, oe)
		}
	}
	return out
}

func addOverlap(oe *shape.OverlapError, path string, errs *Errors) {
	errs.add(oe.Second.Path, "%s", fmt.Sprintf("%v (%s.allow_overlap)", oe, path))
}
