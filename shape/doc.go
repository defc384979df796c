// Package shape turns source records into Loki entries, the same way for every source:
//
//  1. transforms, in the configured order: hash (salted SHA-256), mask (email and IP aware),
//     drop_field, regex_replace, drop_row (glob matches, named rules);
//  2. deterministic sampling per record type, keyed on a stable record id;
//  3. routing: stream labels from the fixed allowlist (job, service_name, source, event_type,
//     sf_org_id, environment, org) plus fields a type explicitly promotes, structured metadata
//     from configured field lists (global and per type), and every field in the JSON line.
//
// A Shaper holds the compiled configuration and is shared by every stream. A source describes
// the fields of what it reads once (a Schema: an EventLogFile's header, a SOQL field list) and
// gets a Plan, which resolves every rule to field positions up front; it then fills one reusable
// Record per row and calls Plan.Shape. Nothing on that path allocates except the entry's line
// and metadata, which the entry keeps.
//
// Because transforms run before routing, a hashed or masked field is hashed or masked
// everywhere it appears: the line, structured metadata and a promoted label; a hashed value is
// also replaced inside the other fields of the record that contain it. Cursors never contain
// field values, so they need no transform.
//
// The package also owns event categories and the startup overlap guard (Category,
// CheckOverlap): two sources must not feed the same category (LoginEvent through SOQL and Login
// through EventLogFile), since Loki would hold every event twice.
package shape
