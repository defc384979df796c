package salesforce

import (
	"encoding/json"
	"net/http"
	"strings"
)

func (c *execCtx) visible(obj *object) bool {
	return obj.onSurface(c.tooling) && c.user.perms.canRead(obj)
}

func (c *execCtx) objectURLs(obj *object) map[string]string {
	prefix := "/services/data/v" + c.version
	if c.tooling {
		prefix += "/tooling"
	}
	base := prefix + "/sobjects/" + obj.name
	return map[string]string{"sobject": base, "describe": base + "/describe", "rowTemplate": base + "/{ID}"}
}

func (c *execCtx) globalEntry(obj *object) map[string]any {
	q := obj.queryable()
	return map[string]any{
		"activateable": false, "createable": obj.def.Kind == kindPlatformEvent || obj.def.Kind == kindCustom,
		"custom": obj.custom(), "customSetting": false, "deletable": obj.def.Kind == kindCustom,
		"deprecatedAndHidden": false, "feedEnabled": false, "hasSubtypes": false, "isSubtype": false,
		"keyPrefix": obj.def.Prefix, "label": obj.def.Label, "labelPlural": obj.def.Label + "s",
		"layoutable": obj.def.Kind == kindCustom, "mergeable": false, "mruEnabled": false,
		"name": obj.name, "queryable": q, "replicateable": q && !obj.isBig(), "retrieveable": q,
		"searchable": obj.def.Kind == kindCustom, "triggerable": obj.def.Kind == kindPlatformEvent,
		"undeletable": false, "updateable": obj.def.Kind == kindCustom, "urls": c.objectURLs(obj),
	}
}

func (o *Org) describeGlobal(c *execCtx) ([]byte, *apiError) {
	var list []map[string]any
	for _, obj := range o.objectOrder {
		if c.visible(obj) {
			list = append(list, c.globalEntry(obj))
		}
	}
	b, _ := json.Marshal(map[string]any{"encoding": "UTF-8", "maxBatchSize": 200, "sobjects": list})
	return b, nil
}

var picklists = map[string][]string{
	"EventLogFile.EventType": {"API", "ApexCallout", "ApexExecution", "ApexUnexpectedException", "ApiTotalUsage",
		"Login", "Logout", "Report", "ReportExport", "RestApi", "URI", "LightningPageView", "VisualforceRequest"},
	"EventLogFile.Interval": {"Daily", "Hourly"},
	"ApexLog.Location":      {"Monitoring", "SystemLog", "Preserved"},
	"ApexLog.Request":       {"API", "Application"},
}

func notFound() *apiError {
	return newAPIError(http.StatusNotFound, CodeNotFound, "The requested resource does not exist")
}

func (o *Org) describe(c *execCtx, name string, basic bool) ([]byte, *apiError) {
	obj := o.objectByName(name)
	if obj == nil || !c.visible(obj) {
		return nil, notFound()
	}
	if basic {
		b, _ := json.Marshal(map[string]any{"objectDescribe": c.globalEntry(obj), "recentItems": []any{}})
		return b, nil
	}
	d := c.globalEntry(obj)
	fields := make([]map[string]any, 0, len(obj.fields))
	for _, f := range obj.fields {
		if !c.user.perms.canSee(obj, f) {
			continue
		}
		ref := []string{}
		if f.RefTo != "" {
			ref = []string{f.RefTo}
		}
		var rel any
		if f.RelName != "" {
			rel = f.RelName
		}
		pv := []map[string]any{}
		for _, v := range picklists[obj.name+"."+f.Name] {
			pv = append(pv, map[string]any{"active": true, "defaultValue": false, "label": v, "value": v, "validFor": nil})
		}
		fields = append(fields, map[string]any{
			"name": f.Name, "label": labelFor(f.Name), "type": f.Type.describeName(), "soapType": f.Type.soapType(),
			"length": f.Length, "byteLength": f.Length * 3, "precision": 0, "scale": 0, "digits": 0,
			"nillable": f.Name != "Id", "filterable": f.Type.filterable(), "sortable": f.Type.sortable(),
			"groupable": f.Type.groupable(), "aggregatable": f.Type.sortable(), "custom": f.Custom,
			"createable": obj.def.Kind == kindCustom && f.Name != "Id", "updateable": obj.def.Kind == kindCustom && f.Name != "Id",
			"calculated": false, "idLookup": f.Name == "Id", "unique": false, "externalId": false,
			"referenceTo": ref, "relationshipName": rel, "picklistValues": pv, "defaultedOnCreate": false,
		})
	}
	d["fields"] = fields
	d["childRelationships"] = []any{}
	d["recordTypeInfos"] = []any{}
	b, _ := json.Marshal(d)
	return b, nil
}

func labelFor(name string) string {
	name = strings.TrimSuffix(name, "__c")
	var b strings.Builder
	for i, r := range name {
		if r == '_' {
			b.WriteByte(' ')
			continue
		}
		if i > 0 && r >= 'A' && r <= 'Z' && name[i-1] >= 'a' && name[i-1] <= 'z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (o *Org) retrieve(c *execCtx, name, id, fieldsParam string) ([]byte, *apiError) {
	o.applyDue(c.now)
	o.mu.RLock()
	defer o.mu.RUnlock()
	obj := o.objectByName(name)
	if obj == nil || !c.visible(obj) || !obj.queryable() {
		return nil, notFound()
	}
	r := o.byID[to15(id)]
	if r == nil || r.obj != obj || (!r.visibleAt.IsZero() && r.visibleAt.After(c.now)) {
		return nil, notFound()
	}
	p := &plan{obj: obj}
	if fieldsParam == "" {
		for _, f := range obj.fields {
			if c.user.perms.canSee(obj, f) {
				p.addCol(&resolved{f: f, big: obj.isBig()})
			}
		}
	} else {
		for _, fn := range strings.Split(fieldsParam, ",") {
			f := obj.byLower[strings.ToLower(strings.TrimSpace(fn))]
			if f == nil || !c.user.perms.canSee(obj, f) {
				return nil, newAPIError(http.StatusBadRequest, CodeInvalidField, "No such column '"+strings.TrimSpace(fn)+"' on sobject of type "+obj.name)
			}
			p.addCol(&resolved{f: f, big: obj.isBig()})
		}
	}
	return c.appendRecord(nil, p, r), nil
}

// limits renders /limits. Sub-limits per connected app are nested the way
// Salesforce does, so clients must skip non-numeric extras.
func (o *Org) limits() []byte {
	used, limit := o.APIUsage()
	rem := limit - used
	if rem < 0 {
		rem = 0
	}
	l := func(m, r int) map[string]any { return map[string]any{"Max": m, "Remaining": r} }
	daily := l(limit, rem)
	daily["sf2loki"] = l(0, 0)
	perm := l(1500, 1490)
	perm["CreateCustom"] = l(1000, 990)
	b, _ := json.Marshal(map[string]any{
		"ConcurrentAsyncGetReportInstances": l(200, 200),
		"ConcurrentSyncReportRuns":          l(20, 20),
		"DailyApiRequests":                  daily,
		"DailyAsyncApexExecutions":          l(250000, 250000),
		"DailyBulkApiBatches":               l(15000, 15000),
		"DailyBulkV2QueryJobs":              l(10000, 10000),
		"DailyDeliveredPlatformEvents":      l(50000, 50000),
		"DailyStreamingApiEvents":           l(1000000, 1000000),
		"DataStorageMB":                     l(1024, 1000),
		"FileStorageMB":                     l(2048, 2040),
		"HourlyPublishedPlatformEvents":     l(250000, 250000),
		"PermissionSets":                    perm,
		"SingleEmail":                       l(5000, 5000),
	})
	return b
}
