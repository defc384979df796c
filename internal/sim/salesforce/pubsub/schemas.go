package pubsub

import (
	"fmt"
	"time"
)

// LoginEventStreamSchema is an Avro schema shaped like Salesforce's Real-Time Event Monitoring
// LoginEventStream (a subset of its fields; nullable unions as Salesforce declares them). As in
// the schemas Salesforce serves for platform events, CreatedDate is a plain long whose doc
// names its Salesforce type, CreatedById's doc names a reference, and the record carries a
// top-level "uuid" property.
const LoginEventStreamSchema = `{
  "type": "record", "name": "LoginEventStream", "namespace": "com.sforce.eventbus",
  "fields": [
    {"name": "EventDate", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": null},
    {"name": "EventIdentifier", "type": ["null", "string"], "default": null},
    {"name": "UserId", "type": ["null", "string"], "default": null},
    {"name": "Username", "type": ["null", "string"], "default": null},
    {"name": "SourceIp", "type": ["null", "string"], "default": null},
    {"name": "LoginType", "type": ["null", "string"], "default": null},
    {"name": "Status", "type": ["null", "string"], "default": null},
    {"name": "CreatedDate", "type": "long", "doc": "CreatedDate:DateTime"},
    {"name": "CreatedById", "type": "string", "doc": "CreatedBy:EntityId"}
  ],
  "uuid": "fDLqkR3sRy6S2bBi0VpDnQ"
}`

// LoginEvent returns the n-th synthetic LoginEventStream event at time at (deterministic).
func LoginEvent(n int, at time.Time) map[string]any {
	ms := at.UnixMilli()
	return map[string]any{
		"EventDate":       ms,
		"EventIdentifier": fmt.Sprintf("ev-%08d", n),
		"UserId":          "005000000000001AAA",
		"Username":        fmt.Sprintf("user%d@example.com", n%7),
		"SourceIp":        fmt.Sprintf("10.0.%d.%d", n/250%250, n%250),
		"LoginType":       "Application",
		"Status":          []string{"Success", "Success", "Failed"}[n%3],
		"CreatedDate":     ms,
		"CreatedById":     "005000000000001AAA",
	}
}
