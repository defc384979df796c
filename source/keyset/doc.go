// Package keyset reads a Salesforce object in (timestamp, key) order across runs, so that every
// row is delivered once although rows become visible late: the keyset queries, the overlap
// window that reads the recent past again, the late-row probe that finds rows older than the
// window, and the cursor members that carry them from one run to the next. The SOQL source
// (standard objects and Big Objects) and the ApexLog source use it; each sends the queries
// itself and decodes the members of its cursor that are its own.
//
// # Cursor members
//
// A cursor holds the position, the last row delivered in (timestamp, key) order (its timestamp
// member is the source's; the key is last_id), and the window's members (Members):
//
//   - from_ts, from_id: where the overlap window starts (inclusive; from_id empty means every
//     row at from_ts). Absent when the window is off or empty.
//   - seen: 48-bit hashes (8 base64url characters each) of every row delivered or skipped whose
//     (timestamp, key) lies in [from, position], oldest first.
//   - max_id: where the late-row probe starts (rows keyed on Id): the highest Id read, such that
//     no row the probe asks for with a lower Id is left unread.
//
// A cursor without them (an older one) resumes just after its position and builds the window
// from there.
//
// # Keyset queries
//
// Rows are read with a keyset condition, never a growing Id NOT IN list:
//
//	WHERE (ts > X OR (ts = X AND Id > 'last')) ORDER BY ts ASC, Id ASC
//
// so any number of rows sharing one timestamp is paged through exactly, and every query has the
// same length whatever the tie (Pager).
//
// # Overlap window and late rows
//
// Rows can become visible after newer rows were already read (commit skew, asynchronous
// persistence, a debug log written when its transaction ends but listed by when it began).
// With an overlap window W, each run starts reading not at the position but at from =
// position.ts − W, and de-duplicates the re-read rows against the seen hashes. A row whose
// (timestamp, key) is at or before the position but that is not in seen arrived late and is
// delivered then (counted as "late_rows_recovered"); the position does not move for it.
//
// The seen set is bounded by a maximum number of ids. When more rows than that fall inside the
// window, the oldest are dropped and the window start moves up to the oldest kept row (the
// window shrinks for as long as the density lasts); this is logged once per run as a warning
// and counted as "overlap_shrunk".
//
// A row that arrives later than the window reaches back cannot be found by re-reading. For rows
// keyed on Id every query can also carry a probe arm, (before the window) AND Id > max_id:
// Salesforce allocates ids in increasing order, so a row inserted after everything read so far
// has a higher Id whatever its timestamp. Such a row is reported as late: counted as
// "late_rows", logged as a warning with its Id and timestamp, and still delivered (its
// timestamp may be older than Loki accepts; the job's rejection policy then applies). Probe rows
// are delivered in Id order, never in the timestamp order of the query that finds them: when its
// first row is one, they are read again with (before the window) AND Id > max_id ORDER BY Id
// ASC, max_id following each row delivered, and then the query is sent again. A run may thus end
// after any probe row without its cursor's max_id passing one not yet delivered; a run without
// late rows costs no further query. This relies on ids increasing with insertion, which holds
// for the ids of one org but is not a documented guarantee; a late row with a lower id is
// missed.
package keyset
