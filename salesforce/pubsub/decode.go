package pubsub

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sf2loki/sf2loki/internal/jsonenc"
)

// Field is one decoded Avro record field.
type Field struct {
	Name  string
	Value any
}

// Fields is a decoded Avro record: its fields in schema order, which is also their order in the
// JSON line (the order Salesforce's own samples and the Python original print them in).
//
// Values are what Avro delivered, with unions flattened to their branch value:
//
//	null → nil            boolean → bool          int → int32        long → int64
//	float → float32       double → float64        string, enum → string
//	bytes, fixed → []byte (base64 in JSON)         array → []any
//	record → Fields       map → Map (entries sorted by key)
//
// Logical types are not converted: a timestamp-millis (EventDate, CreatedDate,
// ChangeEventHeader.commitTimestamp) stays epoch milliseconds, exactly as delivered, so a
// replayed event yields a byte-identical line. Change Data Capture's bitmap fields
// (ChangeEventHeader.changedFields, nulledFields, diffFields) are likewise kept as delivered:
// arrays of hexadecimal strings ("0x400080", "3-0x01") over the schema's field positions,
// not expanded to field names.
type Fields []Field

// Map is a decoded Avro map: its entries sorted by key.
type Map []Field

// MarshalJSON encodes the map as a JSON object.
func (m Map) MarshalJSON() ([]byte, error) { return Fields(m).AppendJSON(nil), nil }

// AppendJSONValue appends one decoded value (see Fields for the types) as JSON.
func AppendJSONValue(dst []byte, v any) []byte { return appendJSONValue(dst, v) }

// Get returns the value of the field called name.
func (f Fields) Get(name string) (any, bool) {
	for _, fl := range f {
		if fl.Name == name {
			return fl.Value, true
		}
	}
	return nil, false
}

// MarshalJSON encodes the record as a JSON object in field order.
func (f Fields) MarshalJSON() ([]byte, error) { return f.AppendJSON(nil), nil }

// AppendJSON appends the record as a JSON object in field order (no HTML escaping).
func (f Fields) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	for i, fl := range f {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.AppendString(dst, fl.Name, jsonenc.EscapedFFFD)
		dst = append(dst, ':')
		dst = appendJSONValue(dst, fl.Value)
	}
	return append(dst, '}')
}

func appendJSONValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case int32:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float32:
		return appendJSONFloat(dst, float64(x), 32)
	case float64:
		return appendJSONFloat(dst, x, 64)
	case string:
		return jsonenc.AppendString(dst, x, jsonenc.EscapedFFFD)
	case []byte:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, x)
		return append(dst, '"')
	case Fields:
		return x.AppendJSON(dst)
	case Map:
		return Fields(x).AppendJSON(dst)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONValue(dst, e)
		}
		return append(dst, ']')
	}
	return jsonenc.AppendString(dst, fmt.Sprint(v), jsonenc.EscapedFFFD)
}

// appendJSONFloat formats like encoding/json; NaN and infinities, which JSON cannot carry, become
// the strings "NaN", "+Inf" and "-Inf".
func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return jsonenc.AppendString(dst, strconv.FormatFloat(f, 'g', -1, bits), jsonenc.EscapedFFFD)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	return strconv.AppendFloat(dst, f, format, -1, bits)
}

// maxDepth bounds the nesting of a decoded value (a recursive schema cannot loop forever).
const maxDepth = 64

// Decode decodes a schemaless Avro binary payload (what Salesforce puts in ProducerEvent.payload)
// with its writer schema, which must be a record. An error wraps ErrDecode.
func Decode(schema avro.Schema, payload []byte) (Fields, error) {
	rec, ok := schema.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%w: the schema is a %s, not a record", ErrDecode, schema.Type())
	}
	n := int64(len(payload))
	d := decoder{r: avro.NewReader(nil, 0).Reset(payload), size: n, items: n}
	out := d.record(rec, 0)
	if d.err == nil && d.r.Error != nil {
		d.err = d.r.Error
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecode, d.err)
	}
	return out, nil
}

type decoder struct {
	r    *avro.Reader
	size int64 // payload size in bytes
	// items is how many more array and map items the payload may claim: all of its blocks
	// together may not claim more items than it has bytes. An item can take no bytes (null, an
	// empty record, a fixed of size 0), so a count taken on trust would have the decoder loop,
	// and allocate, for as long as the count says.
	items int64
	err   error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) bad() bool { return d.err != nil || d.r.Error != nil }

func (d *decoder) record(s *avro.RecordSchema, depth int) Fields {
	fs := s.Fields()
	out := make(Fields, 0, len(fs))
	for _, f := range fs {
		v := d.value(f.Type(), depth+1)
		if d.bad() {
			return nil
		}
		out = append(out, Field{Name: f.Name(), Value: v})
	}
	return out
}

func (d *decoder) value(s avro.Schema, depth int) any {
	if depth > maxDepth {
		d.fail(errors.New("value nested too deeply"))
		return nil
	}
	switch s.Type() {
	case avro.Null:
		return nil
	case avro.Boolean:
		return d.r.ReadBool()
	case avro.Int:
		return d.r.ReadInt()
	case avro.Long:
		return d.r.ReadLong()
	case avro.Float:
		return d.r.ReadFloat()
	case avro.Double:
		return d.r.ReadDouble()
	case avro.String:
		return d.r.ReadString()
	case avro.Bytes:
		return d.r.ReadBytes()
	case avro.Fixed:
		// The size comes from the schema, which the server sends too: a size beyond the payload
		// would be allocated before the read found it short.
		n := s.(*avro.FixedSchema).Size()
		if int64(n) > d.size {
			d.fail(fmt.Errorf("fixed of %d bytes in a %d-byte payload", n, d.size))
			return nil
		}
		b := make([]byte, n)
		d.r.Read(b)
		return b
	case avro.Enum:
		syms := s.(*avro.EnumSchema).Symbols()
		i := d.r.ReadInt()
		if i < 0 || int(i) >= len(syms) {
			d.fail(fmt.Errorf("enum index %d out of range", i))
			return nil
		}
		return syms[i]
	case avro.Union:
		types := s.(*avro.UnionSchema).Types()
		i := d.r.ReadLong()
		if i < 0 || i >= int64(len(types)) {
			d.fail(fmt.Errorf("union branch %d out of range", i))
			return nil
		}
		return d.value(types[i], depth)
	case avro.Record:
		return d.record(s.(*avro.RecordSchema), depth)
	case avro.Ref:
		return d.value(s.(*avro.RefSchema).Schema(), depth)
	case avro.Array:
		items := s.(*avro.ArraySchema).Items()
		out := []any{}
		d.blocks(func() {
			out = append(out, d.value(items, depth+1))
		})
		return out
	case avro.Map:
		values := s.(*avro.MapSchema).Values()
		out := Map{}
		d.blocks(func() {
			k := d.r.ReadString()
			out = append(out, Field{Name: k, Value: d.value(values, depth+1)})
		})
		slices.SortStableFunc(out, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
		return out
	}
	d.fail(fmt.Errorf("unsupported schema type %s", s.Type()))
	return nil
}

// blocks reads the blocks of an array or map, calling item once per item. Each block's count
// is taken from the payload's item budget (d.items) before any item is read.
func (d *decoder) blocks(item func()) {
	for !d.bad() {
		n, _ := d.r.ReadBlockHeader()
		if n == 0 || d.bad() {
			return
		}
		// n is compared with what is left rather than added to a total, which hostile counts
		// could wrap negative. n < 0 is a count of math.MinInt64, which negation leaves negative.
		if n < 0 || n > d.items {
			d.fail(fmt.Errorf("block of %d items after %d others: more items than the %d-byte payload has bytes",
				n, d.size-d.items, d.size))
			return
		}
		d.items -= n
		for range n {
			item()
			if d.bad() {
				return
			}
		}
	}
}

// EventTime returns the event's time and the field it came from: EventDate (Real-Time Event
// Monitoring), else CreatedDate (platform events), else ChangeEventHeader.commitTimestamp
// (Change Data Capture). ok is false when none holds a timestamp.
func EventTime(f Fields) (t time.Time, field string, ok bool) {
	for _, name := range []string{"EventDate", "CreatedDate"} {
		if v, found := f.Get(name); found {
			if t, ok := epochMillis(v); ok {
				return t, name, true
			}
		}
	}
	if h, found := f.Get("ChangeEventHeader"); found {
		if hf, isRec := h.(Fields); isRec {
			if v, found := hf.Get("commitTimestamp"); found {
				if t, ok := epochMillis(v); ok {
					return t, "ChangeEventHeader.commitTimestamp", true
				}
			}
		}
	}
	return time.Time{}, "", false
}

func epochMillis(v any) (time.Time, bool) {
	switch x := v.(type) {
	case int64:
		if x > 0 {
			return time.UnixMilli(x).UTC(), true
		}
	case string: // a datetime declared as string in an older schema
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t.UTC(), true
		}
		if t, err := time.Parse("2006-01-02T15:04:05.000-0700", x); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}
