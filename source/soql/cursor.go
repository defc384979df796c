package soql

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/keyset"
)

// cursorVersion is the version of the cursor format documented in the package comment.
const cursorVersion = 1

// cursorJSON is the stored form (see the package comment).
type cursorJSON struct {
	V      int    `json:"v"`
	Field  string `json:"field"`
	By     string `json:"by,omitempty"`
	TS     string `json:"ts"`
	LastID string `json:"last_id"`
	keyset.Members
}

// cursorLayout is how the cursors of an object on field, keyed by kind, are written.
func cursorLayout(field string, kind keyset.Kind) *keyset.Layout {
	if kind == keyset.ByEventIdentifier {
		return keyset.NewLayout(kind, cursorVersion, "ts", "field", field, "by", EventIdentifier)
	}
	return keyset.NewLayout(kind, cursorVersion, "ts", "field", field)
}

// decodeCursor reads a stored cursor; ok is false when there is none. Errors wrap
// source.ErrCursor.
func decodeCursor(raw json.RawMessage, field string, kind keyset.Kind) (st keyset.State, ok bool, err error) {
	var c cursorJSON
	ok, err = source.DecodeCursor(raw, cursorVersion, &c)
	if err != nil || !ok {
		return keyset.State{}, ok, err
	}
	bad := func(format string, args ...any) (keyset.State, bool, error) {
		return keyset.State{}, false, errors.Join(source.ErrCursor, fmt.Errorf(format, args...))
	}
	if !strings.EqualFold(c.Field, field) {
		return bad("cursor follows field %q, the object is configured on %q", c.Field, field)
	}
	by := ""
	if kind == keyset.ByEventIdentifier {
		by = EventIdentifier
	}
	if c.By != by {
		return bad("cursor is keyed on %q, the object on %q", c.By, kind.Field())
	}
	st, err = cursorLayout(field, kind).Decode(c.Members, c.TS, c.LastID)
	if err != nil {
		return keyset.State{}, false, err
	}
	return st, true, nil
}
