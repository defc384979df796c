// Package soql is the SOQL source: it ships the rows of queryable sObjects that carry an
// increasing timestamp field (LoginHistory on LoginTime, SetupAuditTrail on CreatedDate, custom
// objects, the Threat-Detection *EventStore objects) and of Real-Time Event Monitoring Big
// Objects (LoginEvent, ApiEvent, … on EventDate), one Loki entry per row.
//
// # Keys and cursors
//
// Each configured object is one checkpoint key, "soql:<Object>" (for example soql:LoginHistory),
// and one stream. Its cursor is versioned JSON:
//
//	{"v":1,"field":"LoginTime","ts":"2026-06-30T01:00:00.000Z","last_id":"0Ya…",
//	 "from_ts":"2026-06-30T00:55:00.000Z","from_id":"0Ya…","seen":"<base64url>","max_id":"0Ya…"}
//
// ts and last_id are the position, the last row delivered in (timestamp, key) order. The key
// is the row's Id, or its EventIdentifier for Big Objects ("by":"EventIdentifier"). The other
// members are the overlap window's and the late-row probe's, described in package keyset.
//
// A missing cursor starts at now − lookback. A cursor that cannot be used (not JSON, another
// version, another timestamp field or key field, an unparseable timestamp or id) is logged as a
// warning, counted as "cursor_reset" and replaced by now − lookback: the key never wedges on it.
//
// # Standard objects: keyset pagination
//
// Rows are read with an explicit field list from describe (pages of up to 2000 rows, where
// FIELDS(ALL) would allow 200) and a keyset condition, never a growing Id NOT IN list:
//
//	WHERE (ts > X OR (ts = X AND Id > 'last')) ORDER BY ts ASC, Id ASC LIMIT n
//
// so any number of rows sharing one timestamp is paged through exactly, and every query has the
// same length whatever the tie. Each run issues one query per page size (2000) of rows read;
// describe is cached per client, so one per object per run.
//
// # Overlap window and late rows
//
// Rows that become visible after newer rows were read are found again by the overlap window
// (Object.Overlap, its memory bounded by MaxOverlapIDs) and, for standard objects, by the
// late-row probe (unless Object.NoLateProbe), both described in package keyset: counted as
// "late_rows_recovered", "late_rows" and "overlap_shrunk". Big Objects cannot be filtered on
// Id, so for them a row older than the window is lost by design: size the window (or use
// Settle) for the persistence lag.
//
// Settle, when set, bounds every query above by now − Settle (Salesforce's clock), so rows
// younger than that are left for a later run.
//
// # Big Objects
//
// Big Objects (Object.BigObject) accept only ORDER BY EventDate DESC, filters on EventDate and
// on EventIdentifier after an EventDate equality, no nextRecordsUrl and at most 200 rows per
// query. They are read in windows of EventDate ascending; each window is drained newest-first
// with a ratcheting upper bound (the smallest EventDate of a full page, inclusive, rows at that
// boundary being re-read) and re-sorted oldest-first before it is emitted. A full page whose
// rows all share one EventDate is a tie group: it is paged separately, in EventIdentifier order,
// with EventDate = T AND EventIdentifier > 'last', so a tie of any size neither stalls nor
// repeats. The window span adapts to the row density so a window holds about BufferRows rows;
// at most BufferRows rows are held in memory (the newest are given back and re-read later).
// Rows are keyed on EventIdentifier.
//
// This relies on the index order inside one EventDate being EventIdentifier ascending (as the
// simulated org has it; unverified against a real org). A full tie page that comes back in
// another order stops the key with an error instead of skipping rows.
//
// # Entries
//
// Every selected field becomes a field of a shape.Record (relationship paths flattened as
// LogUser.Username), shaped by the shape package (transforms, sampling, routing) with
// source="soql" and event_type=<Object>. The entry timestamp is the row's timestamp field, read
// before any transform. Rows dropped or sampled out by shaping are Skip records: their cursor
// still advances.
package soql
