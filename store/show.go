package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/sf2loki/sf2loki/internal/human"
)

// View is what `sf2loki state show` prints of a document (its JSON form with --json): the
// fence, the last writer, the counters, the claim history and the checkpoints a filter keeps.
type View struct {
	Object       string                `json:"object"`
	Absent       bool                  `json:"absent,omitempty"`
	Legacy       bool                  `json:"legacy,omitempty"`
	Bytes        int                   `json:"bytes,omitempty"`
	Fence        *Fence                `json:"fence,omitempty"`
	Writer       *Stamp                `json:"writer,omitempty"`
	LastCommitAt time.Time             `json:"last_commit_at,omitzero"`
	Checkpoints  map[string]Checkpoint `json:"checkpoints"`
	Counters     map[string]Counter    `json:"counters,omitempty"`
	History      []ClaimRecord         `json:"history,omitempty"`
}

// View returns the snapshot of object as shown, with the checkpoints whose keys match.
func (s Snapshot) View(object string, match func(key string) bool) View {
	v := View{Object: object, Absent: s.Absent, Legacy: s.Legacy, Bytes: s.Size, Checkpoints: map[string]Checkpoint{}}
	if d := s.Doc; d != nil {
		v.Fence, v.Writer, v.LastCommitAt, v.Counters, v.History = d.Fence, d.Writer, d.LastCommitAt, d.Counters, d.History
		for k, cp := range d.Checkpoints {
			if match(k) {
				v.Checkpoints[k] = cp
			}
		}
	}
	return v
}

// WriteText writes the view as a table, ages relative to now.
func (v View) WriteText(w io.Writer, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "document:    %s\n", v.Object)
	if v.Absent {
		b.WriteString("             does not exist (the first run creates it)\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "size:        %d bytes\n", v.Bytes)
	if v.Legacy {
		b.WriteString("format:      legacy Python key map (the first claim migrates it)\n")
	}
	if f := v.Fence; f != nil {
		fmt.Fprintf(&b, "fence:       epoch %d, holder %s, lease %s", f.Epoch, human.Dash(f.Holder), human.Dash(f.Lease.String()))
		if f.LeaseUID != "" {
			fmt.Fprintf(&b, " uid %s", f.LeaseUID)
		}
		fmt.Fprintf(&b, ", claimed %s\n", human.Ago(now, f.ClaimedAt))
		if !f.RenewedAt.IsZero() {
			state := "held"
			if f.Released {
				state = "released"
			}
			fmt.Fprintf(&b, "store lease: %s, renewed %s, duration %s\n", state, human.Ago(now, f.RenewedAt), time.Duration(f.Duration))
		}
	} else {
		b.WriteString("fence:       none\n")
	}
	if s := v.Writer; s != nil {
		fmt.Fprintf(&b, "last writer: epoch %d, invocation %s, seq %d, host %s, %s\n", s.Epoch, s.Invocation, s.Seq, human.Dash(s.Host), human.Ago(now, s.WrittenAt))
	}
	fmt.Fprintf(&b, "last commit: %s\n\n", human.Ago(now, v.LastCommitAt))
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tUPDATED\tEPOCH\tVALUE")
	for _, k := range slices.Sorted(maps.Keys(v.Checkpoints)) {
		cp := v.Checkpoints[k]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", k, human.Ago(now, cp.UpdatedAt), cp.Epoch, human.Clip(Compact(cp.Value), 120))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.Counters) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "COUNTER\tVALUE\tWINDOW\tUPDATED")
		for _, n := range slices.Sorted(maps.Keys(v.Counters)) {
			ct := v.Counters[n]
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", n, ct.Value, human.Dash(ct.Window), human.Ago(now, ct.UpdatedAt))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Compact returns a checkpoint value as one line of JSON (as stored when it does not parse).
func Compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// ParseValue reads a checkpoint value given by an operator: valid JSON as it is, anything else
// as a JSON string (the Python original's cursors are strings). Text that looks like JSON but
// does not parse is refused rather than silently stored as a string, and so is text that is not
// valid UTF-8 (the document is UTF-8 JSON: it could hold such a value neither as given nor
// unchanged).
func ParseValue(arg string) (json.RawMessage, error) {
	if !utf8.ValidString(arg) {
		return nil, fmt.Errorf("%q is not valid UTF-8", human.Clip(arg, 80))
	}
	trimmed := strings.TrimSpace(arg)
	if json.Valid([]byte(trimmed)) {
		return json.RawMessage(trimmed), nil
	}
	if strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") || strings.HasPrefix(trimmed, `"`) {
		return nil, fmt.Errorf("%q looks like JSON but does not parse", human.Clip(arg, 80))
	}
	return StringValue(arg), nil
}

// Missing returns the keys the document holds no checkpoint for (all of them when doc is nil).
func (d *Document) Missing(keys []string) []string {
	var out []string
	for _, k := range keys {
		if _, ok := d.checkpoint(k); !ok {
			out = append(out, k)
		}
	}
	return out
}

func (d *Document) checkpoint(key string) (Checkpoint, bool) {
	if d == nil {
		return Checkpoint{}, false
	}
	cp, ok := d.Checkpoints[key]
	return cp, ok
}

// Empty reports a document without checkpoints and counters (true when doc is nil): the only
// kind an import goes into.
func (d *Document) Empty() bool {
	return d == nil || (len(d.Checkpoints) == 0 && len(d.Counters) == 0)
}
