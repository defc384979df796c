// Package grafana ships sf2loki's Grafana dashboard and alert rules (Prometheus rule format) for
// one job, embedded so that tools and tests can read them. The files next to this one are what
// operators import: sf2loki-dashboard.json and sf2loki-alerts.yaml. Every metric they query is
// an instrument of package obs (checked by this package's test); docs/metrics.md lists them.
//
// content/ is the Salesforce content pack: dashboards and LogQL rules on the Salesforce data
// itself (content.go; docs/dashboards.md). Every label and field they use is checked against
// what sf2loki ships from the demo's data set (cli's TestContentPackUsesOnlyWhatSf2lokiShips).
package grafana

import _ "embed"

// Dashboard is the Grafana dashboard (JSON model) of one sf2loki job.
//
//go:embed sf2loki-dashboard.json
var Dashboard []byte

// Alerts are the alert rules (a Prometheus rule file).
//
//go:embed sf2loki-alerts.yaml
var Alerts []byte
