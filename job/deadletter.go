package job

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
)

// DeadLetter is one dropped entry as written to the dead-letter file (one JSON object a line):
// the entry as it was pushed, the key it belongs to, and Loki's reason for refusing it.
type DeadLetter struct {
	Time time.Time `json:"time"`
	Key  string    `json:"key"`
	// Destination names the destination the entry was refused by (Destination.Name; empty for
	// the default destination without a name, and in lines written before it was recorded).
	Destination string            `json:"destination,omitempty"`
	Reason      loki.Reason       `json:"reason"`
	Status      int               `json:"status,omitempty"`
	Detail      string            `json:"detail,omitempty"`
	Timestamp   time.Time         `json:"timestamp"`
	Labels      string            `json:"labels"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Line        string            `json:"line"`
}

// deadLetterWriter writes the dead letters of one run so that each begins a line of its own:
// after a write that stopped part way (a full disk), or into a file that ends in part of a line
// (such a write in an earlier run), the next dead letter begins with a line break. The fragment
// is then one unreadable line that a replay skips, and never takes the next dead letter with it.
type deadLetterWriter struct {
	w        io.Writer
	checked  bool // the file's end was looked at
	midLine  bool // the last byte written is not a line break
	unsynced bool // bytes were written since the last sync
}

func (d *deadLetterWriter) write(it item, rej loki.Rejection, dest string) error {
	dl := DeadLetter{
		Time: time.Now().UTC(), Key: it.ks.key, Destination: dest, Reason: rej.Reason, Status: rej.Status, Detail: rej.Detail,
		Timestamp: it.rec.Entry.Timestamp, Labels: it.rec.Entry.Labels.String(), Line: it.rec.Entry.Line,
	}
	if len(it.rec.Entry.Metadata) > 0 {
		dl.Metadata = map[string]string{}
		for _, m := range it.rec.Entry.Metadata {
			dl.Metadata[m.Name] = m.Value
		}
	}
	if !d.checked {
		d.checked, d.midLine = true, endsMidLine(d.w)
	}
	b, err := json.Marshal(dl)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if d.midLine {
		b = append([]byte{'\n'}, b...)
	}
	// One write: appends of whole writes do not interleave with another writer's.
	n, err := d.w.Write(b)
	if n > 0 {
		d.midLine, d.unsynced = b[n-1] != '\n', true
	}
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// sync makes what was written since the last sync durable, when the writer can be synced (a
// file, or anything with a Sync method; an S3 dead letter is stored by each write). A file
// that cannot be synced (a pipe, a terminal) has nothing on disk to make durable. The caller
// calls it only when unsynced is set.
func (d *deadLetterWriter) sync() error {
	// Whatever the result: after a failed sync, nothing may rely on the bytes written before it
	// (the caller takes back what did), and a retry's success would not prove them written.
	d.unsynced = false
	s, ok := d.w.(interface{ Sync() error })
	if !ok {
		return nil
	}
	if err := s.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("syncing the dead-letter file: %w", err)
	}
	return nil
}

// endsMidLine reports whether w is a file whose last byte is not a line break. A file that
// cannot be read back counts as one: a line break too many is an empty line, which a replay
// passes, while one too few glues the next dead letter to a fragment.
func endsMidLine(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		return false
	}
	r, err := os.Open(f.Name()) // the dead letter is open for writing only
	if err != nil {
		return true
	}
	defer r.Close()
	var last [1]byte
	if _, err := r.ReadAt(last[:], st.Size()-1); err != nil {
		return true
	}
	return last[0] != '\n'
}

// Entry rebuilds the entry to ship again: at its own time when an earlier re-stamp kept it in
// event_time (the job decides anew whether it must move), metadata sorted by name.
func (d *DeadLetter) Entry() (loki.Entry, error) {
	l, err := loki.ParseLabels(d.Labels)
	if err != nil {
		return loki.Entry{}, err
	}
	e := loki.Entry{Timestamp: d.Timestamp, Labels: l, Line: d.Line}
	for name, v := range d.Metadata {
		if name == EventTimeMetadata {
			if own, err := time.Parse(time.RFC3339Nano, v); err == nil {
				e.Timestamp = own
				continue
			}
		}
		e.Metadata = append(e.Metadata, loki.Label{Name: name, Value: v})
	}
	slices.SortFunc(e.Metadata, func(a, b loki.Label) int { return strings.Compare(a.Name, b.Name) })
	return e, nil
}

// DeadLetterSource re-ships the entries of a dead-letter file (sf2loki deadletter replay). Its
// one key, "deadletter:<id>", names the file by a hash of its first line, and its cursor is the
// byte offset of the next line, so a replay interrupted anywhere resumes where it stopped and a
// finished one ships nothing twice. Only the lines present when the replay opens the file are
// read: entries refused again and appended to the same file wait for the next replay, and so
// does a last line still being written (the file ends without its line break).
//
// With several destinations, one source per destination replays the file: each replays only
// the lines written for its destination, so an entry never reaches a tenant it was not
// written for.
type DeadLetterSource struct {
	// Path is the dead-letter file.
	Path string
	// Destination is the name of the destination this source replays to (its binding's): lines
	// written for another destination are skipped (reason other_destination).
	Destination string
	// Default marks the source of the default destination: it also replays lines without a
	// destination (written before destinations were recorded), keeps the key
	// "deadletter:<id>", and reports lines for a destination not in Known (reason
	// unknown_destination), which no source replays. The others' keys are
	// "deadletter:<id>@<Destination>".
	Default bool
	// Known names every destination replayed at once. A source with neither Destination, Default
	// nor Known replays every line (a file of one destination).
	Known []string
}

// ReplayBindings are the bindings of a replay of the dead-letter file path: the default
// destination's source (def names it; its binding has no Destination), then one per other
// destination of dests (nil entries and repeats skipped), each replaying the lines written for
// it to it.
func ReplayBindings(path, def string, dests []*Destination) []Binding {
	known := []string{def}
	out := []Binding{{Source: &DeadLetterSource{Path: path, Destination: def, Default: true}}}
	for _, d := range dests {
		if d != nil && !slices.Contains(known, d.Name) {
			known = append(known, d.Name)
			out = append(out, Binding{Source: &DeadLetterSource{Path: path, Destination: d.Name}, Destination: d})
		}
	}
	for _, b := range out {
		b.Source.(*DeadLetterSource).Known = known
	}
	return out
}

// mine reports whether a line written for dest is this source's to replay, and whether dest
// is a destination no source replays.
func (s *DeadLetterSource) mine(dest string) (ok, unknown bool) {
	switch {
	case s.Destination == "" && !s.Default && s.Known == nil:
		return true, false
	case dest == s.Destination, dest == "" && s.Default:
		return true, false
	case dest == "":
		return false, false
	}
	return false, s.Default && !slices.Contains(s.Known, dest)
}

// Name implements source.Source.
func (s *DeadLetterSource) Name() string { return "deadletter" }

// Calls implements source.Source: a replay calls no Salesforce API.
func (s *DeadLetterSource) Calls() map[string]int64 { return nil }

// CursorTime implements source.Source: a replay's cursor is a byte offset, it names no time.
func (s *DeadLetterSource) CursorTime(key string, raw json.RawMessage) (time.Time, error) {
	if !strings.HasPrefix(key, "deadletter:") {
		return time.Time{}, fmt.Errorf("%w: %q", source.ErrNotMyKey, key)
	}
	var c deadLetterCursor
	_, err := source.DecodeCursor(raw, 1, &c)
	return time.Time{}, err
}

// deadLetterCursor is the replay's position: the offset of the next line.
type deadLetterCursor struct {
	V      int   `json:"v"`
	Offset int64 `json:"offset"`
}

// Open implements source.Source.
func (s *DeadLetterSource) Open(_ context.Context, req source.OpenRequest) ([]source.Stream, error) {
	f, err := os.Open(s.Path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(f, 64<<10)
	first, err := br.ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		_ = f.Close()
		return nil, err
	}
	sum := sha256.Sum256(first)
	key := "deadletter:" + hex.EncodeToString(sum[:8])
	if !s.Default && s.Destination != "" {
		key += "@" + s.Destination
	}
	var cur deadLetterCursor
	if ok, err := source.DecodeCursor(req.Cursors[key], 1, &cur); err != nil || !ok || cur.Offset < 0 || cur.Offset > st.Size() {
		if err != nil {
			req.Log.Warn("unusable dead-letter cursor: replaying the file from its start", "key", key, "err", err)
		}
		cur = deadLetterCursor{V: 1}
	}
	if _, err := f.Seek(cur.Offset, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, err
	}
	return []source.Stream{&deadLetterStream{src: s, f: f, r: bufio.NewReaderSize(io.LimitReader(f, st.Size()-cur.Offset), 64<<10),
		key: key, offset: cur.Offset, log: req}}, nil
}

type deadLetterStream struct {
	src    *DeadLetterSource
	f      *os.File
	r      *bufio.Reader
	key    string
	offset int64
	log    source.OpenRequest
}

func (s *deadLetterStream) Key() string  { return s.key }
func (s *deadLetterStream) Close() error { return s.f.Close() }

// Next fills rec with the next dead letter's entry. A line that is not a dead letter is skipped
// (reason unreadable_dead_letter) with a warning, so one damaged line never blocks the rest; an
// empty line carries nothing and is passed silently. The file's end is the end of its last line
// break: what follows is not a line yet.
func (s *deadLetterStream) Next(ctx context.Context, rec *source.Record) error {
	r, err := s.nextRecord(ctx)
	return source.Fill(rec, r, err)
}

// nextRecord returns the next record, for Next to fill in.
func (s *deadLetterStream) nextRecord(ctx context.Context) (source.Record, error) {
	var line []byte
	for {
		if err := ctx.Err(); err != nil {
			return source.Record{}, err
		}
		var err error
		line, err = s.r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				// Not a line yet: another writer (a backfill, another job group sharing the
				// file) may be appending it. The replay stops before it and the next one reads
				// it whole.
				s.log.Log.Info("the dead-letter file ends in part of a line: the replay stops before it", "offset", s.offset)
			}
			return source.Record{}, io.EOF
		}
		if err != nil {
			return source.Record{}, err
		}
		s.offset += int64(len(line))
		// An empty line is no damage: a run that could not read the file's last byte begins
		// its dead letter with a line break, in case the file ended in part of a line.
		if len(bytes.TrimSpace(line)) > 0 {
			break
		}
	}
	b, _ := json.Marshal(deadLetterCursor{V: 1, Offset: s.offset})
	rec := source.Record{Cursor: source.CursorJSON(b)}
	var dl DeadLetter
	if err := json.Unmarshal(line, &dl); err != nil {
		return s.skip(rec, fmt.Errorf("not a dead letter: %w", err))
	}
	switch mine, unknown := s.src.mine(dl.Destination); {
	case unknown:
		s.log.Log.Warn("skipping a dead-letter line of a destination no longer configured: it is not sent to another one",
			"offset", s.offset, "destination", dl.Destination)
		s.log.Count("unknown_destination", 1)
		rec.Skip, rec.SkipReason = true, "unknown_destination"
		return rec, nil
	case !mine:
		rec.Skip, rec.SkipReason = true, "other_destination"
		return rec, nil
	}
	e, err := dl.Entry()
	if err != nil {
		return s.skip(rec, err)
	}
	rec.Entry = e
	return rec, nil
}

func (s *deadLetterStream) skip(rec source.Record, why error) (source.Record, error) {
	s.log.Log.Warn("skipping a dead-letter line that cannot be replayed", "offset", s.offset, "err", why)
	s.log.Count("unreadable_dead_letter", 1)
	rec.Skip, rec.SkipReason = true, "unreadable_dead_letter"
	return rec, nil
}
