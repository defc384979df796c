// Package eventlogfile is the EventLogFile source: it lists the
// EventLogFile records of each configured event type and interval, streams each file's CSV and
// turns every row into one Loki entry through package shape.
//
// # Keys and cursors
//
// One checkpoint key per event type, "eventlogfile:<EventType>" (see Key and Cursor). Files are
// taken in (CreatedDate, Id) order with a keyset listing
//
//	SELECT Id, EventType, Interval, LogDate, CreatedDate, LogFileLength, Sequence,
//	       LogFileFieldNames, LogFileFieldTypes
//	FROM EventLogFile
//	WHERE EventType = 'Login' AND Interval = 'Hourly'
//	  AND (CreatedDate > C OR (CreatedDate = C AND Id > 'F'))   -- >= 'F' to resume F mid-file
//	  AND CreatedDate <= now - settle_window
//	ORDER BY CreatedDate, Id LIMIT page_size
//
// so any number of files sharing one CreatedDate is shipped without stalling, and a run makes
// one listing query per type (another only when it uses up a full page), one download per file,
// and one more download to resume a file it left mid-way. Every row's record carries the cursor
// after it; a budget that ends inside a file makes the next run download it again, skip the
// shipped rows without decoding them and go on at the next one. A file is resumed only when its
// Id and CreatedDate both match the cursor: a Daily file regenerated in place (same Id, newer
// CreatedDate) is counted (file_regenerated) and shipped again from row 0 when the order reaches
// its new CreatedDate, never resumed at a row number that may mean another row.
//
// A type switched from Daily to Hourly does not continue at the last Daily file's CreatedDate,
// which is hours after the day it covers ended (the Hourly files of those hours were created
// before it and would be skipped): the cursor of a Daily file says "interval":"Daily", and the
// first Hourly run lists from the end of that file's day (one query for its LogDate, counted
// interval_switched).
//
// A stored value that is not a usable cursor (garbage, an unknown version, an id or date that
// would not be a safe SOQL literal) is reported (warning, cursor_reset) and the type starts from
// the lookback. The Python original's {"ids": [...], "last_created": ...} is read and migrated,
// as it stored it (that object JSON-encoded in a JSON string) or as the object.
//
// # Files
//
// A download that fails (404 "not ready", 5xx, a broken stream, an HTML page answered in place
// of the CSV) stops the type for the run without advancing past the file; once the file is older than
// download_max_age it is abandoned instead: error log, file_abandoned counter, and a Skip record
// that moves the cursor past it. A throttled org (REQUEST_LIMIT_EXCEEDED) is never a reason to
// abandon.
//
// LogFileLength is evidence, not a gate: a body shorter than it is confirmed by a second
// download. Such a body is either still being written (Salesforce lists a file before it is
// completely written, and a transfer may end early without an error) or complete with a
// LogFileLength that says more, and wherever it ends — right after a line break, inside a row,
// right after a comma, inside the header, inside a row over max_row_bytes — the bytes do not
// tell which. Its whole rows, those before its last line break, ship; the file is not finished:
// the cursor stays at the next row and remembers the body's length ("short_bytes"; warning,
// file_incomplete), and the type stops there for the run, waiting for a later one
// (source.ErrWaiting: the run is not caught up, and its report names the file and why; a backfill
// is not finished until it is run again). The next run downloads the file again
// and resumes at that row. A body that grew goes on as any (held again while it is still short);
// a body of the same length again is no longer being written and is taken as it is — a last
// record without a line break is a record like any: a row (its last field empty when cut right
// after a comma), the header, a row over max_row_bytes — and the file is finished (warning,
// file_short). A file older than download_max_age is taken as it is at once.
//
// # Rows
//
// The CSV reader handles the quirks of Salesforce's CSV: the first record is the header and names the
// columns (trimmed; LogFileFieldNames is only used to match LogFileFieldTypes to them by name),
// quoted fields with commas, quotes and line breaks, \n or \r\n, a UTF-8 BOM,
// blank lines, ragged rows (missing cells are empty, extra cells go to the field "_extra"
// joined by commas) and rows over max_row_bytes (skipped, counted row_too_large). Each row
// becomes a JSON object with the columns in file order. Values are strings, except that columns
// typed Number or Boolean in LogFileFieldTypes are written as JSON numbers and booleans when
// they parse as such, a Boolean column's 1 and 0 as true and false (Options.StringValues
// turns that off). The entry time is the row's TIMESTAMP_DERIVED (configurable), else TIMESTAMP, else the file's LogDate (counted
// timestamp_fallback). Rows the shaper drops or samples out become Skip records, so the cursor
// still advances over them.
package eventlogfile
