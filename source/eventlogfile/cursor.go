package eventlogfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
)

// cursorVersion is the version of Cursor.
const cursorVersion = 1

// Cursor is the checkpoint value of one event type (key "eventlogfile:<EventType>"):
//
//	{"v":1,"created":"2026-06-30T01:00:00.000Z","file_id":"0AT…","row":1234}
//	{"v":1,"created":"2026-06-30T01:00:00.000Z","file_id":"0AT…","row":5000,"done":true}
//	{"v":1,"created":"2026-06-30T02:00:00.000Z","file_id":"0AT…","row":9000,"done":true,"interval":"Daily"}
//	{"v":1,"created":"2026-06-30T03:00:00.000Z","file_id":"0AT…","row":700,"short_bytes":183421}
//
// Files are taken in (CreatedDate, Id) order, so (Created, FileID) is a keyset position:
// every file before it is done, and so is every file at Created whose Id is below FileID. That
// order is also the set of "ids done at the boundary CreatedDate" the Python original kept as a
// list: it needs no list, never grows, and never stalls when more than a page of files share one
// CreatedDate. Row counts the data rows of FileID already shipped or skipped; Done marks the
// whole file finished. A partly shipped file resumes at Row only while its Id and CreatedDate
// both still match; a Daily file regenerated in place (same Id, newer CreatedDate) appears again
// later in the order and is shipped again from row 0. Interval is "Daily" for a Daily file
// (absent for Hourly ones, and in cursors written before it existed): a type switched to Hourly
// then starts where the Daily files' coverage ended (see Source.Open), not at the Daily file's
// CreatedDate, which is hours after its day ended. ShortBytes holds a file open at Row after a
// body shorter than its LogFileLength, until a download of the same length (see package doc).
type Cursor struct {
	V        int    `json:"v"`
	Created  string `json:"created"`
	FileID   string `json:"file_id"`
	Row      int64  `json:"row"`
	Done     bool   `json:"done,omitempty"`
	Interval string `json:"interval,omitempty"`
	// ShortBytes is the length of FileID's body at its last download, when that body was shorter
	// than its LogFileLength: the file is held open at Row until a download of the same length
	// shows that nothing more is written to it (absent otherwise, and in cursors written before
	// it existed).
	ShortBytes *int64 `json:"short_bytes,omitempty"`

	created time.Time
}

// legacyCursor is the Python original's value: {"ids":[[id, created], …], "last_created": …};
// ids may also be bare strings (its releases before the pairs). Its checkpoint stores kept a flat
// map of strings, so the stored value is that object JSON-encoded in a JSON string:
//
//	"{\"ids\": [[\"0AT…\", \"2026-06-29T11:02:03.000+0000\"]], \"last_created\": \"2026-06-29T11:02:03.000+0000\"}"
type legacyCursor struct {
	IDs         []json.RawMessage `json:"ids"`
	LastCreated string            `json:"last_created"`
}

// decodeCursor reads a stored value. ok is false for an absent value. A legacy value (the
// Python string, or the object it holds) becomes a cursor at its last_created with the ids done
// there (skip); anything unusable is an error wrapping source.ErrCursor.
func decodeCursor(raw json.RawMessage) (c Cursor, skip map[string]bool, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Cursor{}, nil, false, nil
	}
	if raw[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err != nil {
			return Cursor{}, nil, false, errors.Join(source.ErrCursor, err)
		}
		return decodeLegacy(json.RawMessage(inner))
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) == nil {
		if _, legacy := probe["last_created"]; legacy {
			if _, versioned := probe["v"]; !versioned {
				return decodeLegacy(raw)
			}
		}
	}
	if ok, err = source.DecodeCursor(raw, cursorVersion, &c); err != nil || !ok {
		return Cursor{}, nil, ok, err
	}
	if err := c.validate(); err != nil {
		return Cursor{}, nil, false, errors.Join(source.ErrCursor, err)
	}
	return c, nil, true, nil
}

func (c *Cursor) validate() error {
	t, err := salesforce.ParseDateTime(c.Created)
	if err != nil {
		return fmt.Errorf("created: %w", err)
	}
	if err := salesforce.ValidateID(c.FileID); err != nil {
		return fmt.Errorf("file_id: %w", err)
	}
	if c.Row < 0 {
		return fmt.Errorf("row %d is negative", c.Row)
	}
	if c.ShortBytes != nil && *c.ShortBytes < 0 {
		return fmt.Errorf("short_bytes %d is negative", *c.ShortBytes)
	}
	c.created = t
	c.Created = salesforce.FormatDateTime(t)
	if c.Interval != IntervalDaily {
		c.Interval = "" // only a Daily cursor says which interval wrote it
	}
	if c.Done {
		c.ShortBytes = nil // only an open file is held
	}
	return nil
}

func decodeLegacy(raw json.RawMessage) (Cursor, map[string]bool, bool, error) {
	var l legacyCursor
	if err := json.Unmarshal(raw, &l); err != nil {
		return Cursor{}, nil, false, errors.Join(source.ErrCursor, fmt.Errorf("legacy value: %w", err))
	}
	t, err := salesforce.ParseDateTime(l.LastCreated)
	if err != nil {
		return Cursor{}, nil, false, errors.Join(source.ErrCursor, fmt.Errorf("legacy last_created: %w", err))
	}
	skip := map[string]bool{}
	for _, e := range l.IDs {
		var id string
		var pair []string
		switch {
		case json.Unmarshal(e, &id) == nil:
		case json.Unmarshal(e, &pair) == nil && len(pair) == 2:
			// Only ids recorded at last_created matter: older ones are before the listing.
			if pt, err := salesforce.ParseDateTime(pair[1]); err != nil || !pt.Equal(t) {
				continue
			}
			id = pair[0]
		default:
			continue
		}
		if salesforce.ValidateID(id) == nil {
			skip[id] = true
		}
	}
	// A legacy cursor is a position *at* last_created with no file done yet in the keyset
	// sense: list from last_created inclusive and skip the ids it names.
	return Cursor{V: cursorVersion, Created: salesforce.FormatDateTime(t), created: t}, skip, true, nil
}

// appendCursor appends the JSON of a cursor (the field order is fixed, so equal cursors are
// equal bytes). short is the cursor's ShortBytes.
func appendCursor(dst []byte, created, fileID string, row int64, done, daily bool, short *int64) []byte {
	dst = append(dst, `{"v":1,"created":"`...)
	dst = append(dst, created...)
	dst = append(dst, `","file_id":"`...)
	dst = append(dst, fileID...)
	dst = append(dst, `","row":`...)
	dst = strconv.AppendInt(dst, row, 10)
	if done {
		dst = append(dst, `,"done":true`...)
	}
	if daily {
		dst = append(dst, `,"interval":"Daily"`...)
	}
	if short != nil {
		dst = append(dst, `,"short_bytes":`...)
		dst = strconv.AppendInt(dst, *short, 10)
	}
	return append(dst, '}')
}

// filePos is what the positions in one file share: the file as listed, and the interval.
type filePos struct {
	info  fileInfo
	daily bool
}

// rowPos is the position after a row of a file, or after the whole file (done). The job commits
// a key's position once per push, so the JSON is written only for the few positions committed
// (source.LazyCursor), not for every row: 24 bytes per row instead of a cursor's ~90, and no
// number formatting per row. A rowPos is never written again once handed out.
type rowPos struct {
	file *filePos
	row  int64
	done bool
}

// EncodeCursor writes the position's stored form.
func (p *rowPos) EncodeCursor() json.RawMessage {
	return appendCursor(make([]byte, 0, 128), p.file.info.Created, p.file.info.ID, p.row, p.done, p.file.daily, nil)
}

// positions hands out rowPos values carved from blocks, so the per-row positions (kept by the
// job until their push is committed) cost one allocation per block instead of one per row. A
// block stays alive as long as any position in it does.
type positions struct{ block []rowPos }

const positionBlock = 1024

// at returns the position after row of file (done: after the whole file).
func (ps *positions) at(file *filePos, row int64, done bool) *rowPos {
	if len(ps.block) == cap(ps.block) {
		ps.block = make([]rowPos, 0, positionBlock)
	}
	ps.block = append(ps.block, rowPos{file: file, row: row, done: done})
	return &ps.block[len(ps.block)-1]
}
