package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source/soql"
)

// SOQLSource configures SOQL polling of event objects and Big Objects.
type SOQLSource struct {
	Enabled bool         `yaml:"enabled" desc:"Poll the configured objects."`
	Objects []SOQLObject `yaml:"objects" desc:"The objects polled, one checkpoint key soql:<name> each; required when enabled."`
}

// SOQLObject is one polled sObject.
type SOQLObject struct {
	Name             string   `yaml:"name" example:"LoginHistory" desc:"sObject API name (LoginHistory, SetupAuditTrail, Audit_Event__c, LoginEvent, ApiAnomalyEventStore, ...)."`
	TimestampField   string   `yaml:"timestamp_field" example:"LoginTime" desc:"Increasing datetime field the cursor follows; empty: EventDate for big objects, LoginTime for LoginHistory, CreatedDate otherwise."`
	Fields           []string `yaml:"fields" desc:"Fields to select (relationship paths such as CreatedBy.Username allowed); empty: every field of describe."`
	Where            string   `yaml:"where" desc:"Extra SOQL condition ANDed to every query, e.g. Status = 'Success' (not for big objects)."`
	BigObject        bool     `yaml:"big_object" desc:"A Real-Time Event Monitoring Big Object (LoginEvent, ApiEvent, ...): read newest-first on EventDate, keyed on EventIdentifier, at most 200 rows per query."`
	Lookback         Duration `yaml:"lookback" default:"1h" desc:"How far back an object with no checkpoint starts."`
	Start            Time     `yaml:"start" example:"2024-06-01T00:00:00Z" desc:"Instead of lookback: the RFC 3339 time (by the timestamp field) an object with no checkpoint starts from; ignored once it has one."`
	Overlap          Duration `yaml:"overlap" default:"5m" desc:"Window re-read every run for rows that became visible late, de-duplicated against remembered ids (0 = off)."`
	MaxOverlapIDs    int      `yaml:"max_overlap_ids" default:"500" min:"1" desc:"Ids remembered in the overlap window (kept in the checkpoint, 8 bytes each); with more rows in the window it shrinks to the newest, with a warning."`
	Settle           Duration `yaml:"settle" default:"0s" desc:"Rows younger than this (Salesforce's clock) wait for a later run; an alternative to overlap for slow persistence (0 = off)."`
	LateProbe        bool     `yaml:"late_probe" default:"true" desc:"Standard objects: each query also fetches rows older than the overlap window with an Id above every Id read (inserted late); they are delivered, logged and counted as late_rows. Off: such rows are missed silently."`
	PageSize         int      `yaml:"page_size" default:"200" min:"1" desc:"Big objects: rows per query (at most 200). Standard objects are paged by salesforce.batch_size."`
	BufferRows       int      `yaml:"buffer_rows" default:"2000" min:"200" desc:"Big objects: rows held in memory while a window is drained newest-first."`
	MaxRecordsPerRun int      `yaml:"max_records_per_run" default:"0" min:"0" desc:"Rows one run takes from this object (0 = only batch.max_records). Stopped there, the object's key leaves the run not caught_up: it is listed under waiting in the run report, and the next run goes on after the last row shipped."`
}

// SourceObject returns the source options of one configured object.
func (o SOQLObject) SourceObject() soql.Object {
	overlap := o.Overlap.D()
	if overlap == 0 {
		overlap = -1 // off; the option's zero value means the default
	}
	return soql.Object{
		Name: o.Name, TimestampField: o.TimestampField, Fields: o.Fields, Where: o.Where, BigObject: o.BigObject,
		Lookback: o.Lookback.D(), Start: o.Start.T(), Overlap: overlap, MaxOverlapIDs: o.MaxOverlapIDs, Settle: o.Settle.D(), NoLateProbe: !o.LateProbe,
		PageSize: o.PageSize, BufferRows: o.BufferRows, MaxRecordsPerRun: o.MaxRecordsPerRun,
	}
}

// soqlObjectKeys maps soql.Object field names (in *soql.ObjectError) to config keys.
var soqlObjectKeys = map[string]string{
	"Name": "name", "TimestampField": "timestamp_field", "Fields": "fields", "Where": "where",
	"PageSize": "page_size", "MaxRecordsPerRun": "max_records_per_run", "Lookback": "lookback",
}

func validateSOQL(s SOQLSource, path string, errs *Errors) {
	if !s.Enabled {
		return
	}
	if len(s.Objects) == 0 {
		errs.add(path+".objects", "is required: list the objects to poll (name: LoginHistory, ...)")
	}
	seen := map[string]int{}
	for i, o := range s.Objects {
		p := fmt.Sprintf("%s.objects[%d]", path, i)
		if o.Name == "" {
			errs.add(p+".name", "is required")
			continue
		}
		if j, dup := seen[strings.ToLower(o.Name)]; dup {
			errs.add(p+".name", "%q is also objects[%d]: each object is one checkpoint key", o.Name, j)
		}
		seen[strings.ToLower(o.Name)] = i
		if o.PageSize > soql.BigObjectPageSize {
			errs.add(p+".page_size", "%d is above %d, the most rows a big object query returns", o.PageSize, soql.BigObjectPageSize)
		}
		if o.Lookback == 0 {
			errs.add(p+".lookback", "must be positive")
		}
		for _, e := range joined(o.SourceObject().Validate()) {
			var oe *soql.ObjectError
			if !errors.As(e, &oe) {
				continue
			}
			key, idx, _ := strings.Cut(oe.Field, "[")
			k := soqlObjectKeys[key]
			if k == "" {
				k = strings.ToLower(key)
			}
			if idx != "" {
				k += "[" + idx
			}
			if key == "PageSize" {
				continue // reported above with the key's own wording
			}
			errs.add(p+"."+k, "%s", oe.Msg)
		}
	}
}

// claims lists the objects for the overlap guard.
func (s SOQLSource) claims(path string) []shape.Claim {
	if !s.Enabled {
		return nil
	}
	out := make([]shape.Claim, 0, len(s.Objects))
	for i, o := range s.Objects {
		out = append(out, shape.Claim{Source: soql.Name, Name: o.Name, Path: fmt.Sprintf("%s.objects[%d].name", path, i)})
	}
	return out
}
