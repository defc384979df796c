package eventlogfile

import (
	"errors"
	"io"
	"log/slog"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
)

// Body describes an EventLogFile body as its EventLogFile record does: the event type and the
// LogFileFieldNames and LogFileFieldTypes it lists (empty: every value is shaped as a string).
type Body struct {
	EventType  string
	FieldNames string
	FieldTypes string
}

// ReadEntries turns an EventLogFile CSV body into shaped entries exactly as the source does
// (header, CSV quirks, timestamps, values typed by the listed field types, shaping), without
// Salesforce, cursors being committed or a job: the no-network ceiling of the EventLogFile
// pipeline for benchmarks, and a way to preview what a file becomes. Rows the shaper drops are
// not passed to each. each receives an entry's line memory with it: release it once nothing
// refers to the entry (later rows are then shaped into it), or leave it to the collector. It
// returns the number of data rows read.
func ReadEntries(r io.Reader, body Body, sh *shape.Shaper, each func(loki.Entry, shape.Lines) error) (int64, error) {
	src := &Source{opts: Options{Shaper: sh, TimestampColumn: DefaultTimestampColumn, MaxRowBytes: DefaultMaxRowBytes, Log: slog.New(slog.DiscardHandler)}}
	st := &stream{src: src, typ: body.EventType, key: Key(body.EventType), log: src.opts.Log, count: func(string, int64) {}}
	f := fileInfo{ID: "0AT000000000000AAA", Created: "1970-01-01T00:00:00.000Z", names: body.FieldNames, types: body.FieldTypes}
	of := st.newOpenFile(f, io.NopCloser(nil), newCSVReader(r, DefaultMaxRowBytes))
	st.file = of
	switch err := of.csv.Read(); {
	case errors.Is(err, io.EOF):
		return 0, nil
	case err != nil:
		return 0, err
	}
	st.header(of)
	var rec source.Record
	for st.file != nil {
		ok, err := st.nextRow(&rec)
		if err != nil {
			return of.row, err
		}
		if ok && !rec.Skip {
			if err := each(rec.Entry, rec.Lines); err != nil {
				return of.row, err
			}
		}
	}
	return of.row, nil
}
