package pubsub

import (
	"fmt"
	"slices"

	"github.com/hamba/avro/v2"
)

// encode writes v as schemaless Avro binary of schema s, the way a Salesforce publisher does.
// Values are plain Go values: nil for null, bool, int/int32/int64, float32/float64, string,
// []byte, map[string]any for a record or a map, []any (or []string) for an array. A union takes
// the first branch that accepts the value, so a nullable field is given the plain value or nil.
func encode(s avro.Schema, v any) ([]byte, error) {
	w := avro.NewWriter(nil, 512)
	if err := encodeValue(w, s, v, ""); err != nil {
		return nil, err
	}
	if w.Error != nil {
		return nil, w.Error
	}
	return slices.Clone(w.Buffer()), nil
}

func encodeValue(w *avro.Writer, s avro.Schema, v any, path string) error {
	bad := func() error { return fmt.Errorf("%s: %T does not fit Avro %s", path, v, s.Type()) }
	switch s.Type() {
	case avro.Null:
		if v != nil {
			return bad()
		}
	case avro.Boolean:
		b, ok := v.(bool)
		if !ok {
			return bad()
		}
		w.WriteBool(b)
	case avro.Int, avro.Long:
		n, ok := asInt(v)
		if !ok {
			return bad()
		}
		if s.Type() == avro.Int {
			w.WriteInt(int32(n))
		} else {
			w.WriteLong(n)
		}
	case avro.Float, avro.Double:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case float32:
			f = float64(x)
		default:
			n, ok := asInt(v)
			if !ok {
				return bad()
			}
			f = float64(n)
		}
		if s.Type() == avro.Float {
			w.WriteFloat(float32(f))
		} else {
			w.WriteDouble(f)
		}
	case avro.String:
		str, ok := v.(string)
		if !ok {
			return bad()
		}
		w.WriteString(str)
	case avro.Bytes:
		b, ok := v.([]byte)
		if !ok {
			return bad()
		}
		w.WriteBytes(b)
	case avro.Fixed:
		b, ok := v.([]byte)
		if !ok || len(b) != s.(*avro.FixedSchema).Size() {
			return bad()
		}
		_, _ = w.Write(b)
	case avro.Enum:
		str, ok := v.(string)
		if !ok {
			return bad()
		}
		i := slices.Index(s.(*avro.EnumSchema).Symbols(), str)
		if i < 0 {
			return fmt.Errorf("%s: %q is not a symbol of the enum", path, str)
		}
		w.WriteInt(int32(i))
	case avro.Union:
		for i, b := range s.(*avro.UnionSchema).Types() {
			if !accepts(b, v) {
				continue
			}
			w.WriteLong(int64(i))
			return encodeValue(w, b, v, path)
		}
		return bad()
	case avro.Ref:
		return encodeValue(w, s.(*avro.RefSchema).Schema(), v, path)
	case avro.Record:
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		for _, f := range s.(*avro.RecordSchema).Fields() {
			fv, has := m[f.Name()]
			if !has && f.HasDefault() {
				fv = f.Default()
			}
			if err := encodeValue(w, f.Type(), fv, path+"."+f.Name()); err != nil {
				return err
			}
		}
	case avro.Array:
		items := toAnySlice(v)
		if items == nil && v != nil {
			return bad()
		}
		if len(items) > 0 {
			w.WriteBlockHeader(int64(len(items)), 0)
			for i, it := range items {
				if err := encodeValue(w, s.(*avro.ArraySchema).Items(), it, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
		w.WriteLong(0)
	case avro.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if len(keys) > 0 {
			w.WriteBlockHeader(int64(len(keys)), 0)
			for _, k := range keys {
				w.WriteString(k)
				if err := encodeValue(w, s.(*avro.MapSchema).Values(), m[k], path+"."+k); err != nil {
					return err
				}
			}
		}
		w.WriteLong(0)
	default:
		return bad()
	}
	return nil
}

// accepts reports whether a union branch takes v.
func accepts(s avro.Schema, v any) bool {
	switch s.Type() {
	case avro.Null:
		return v == nil
	case avro.Boolean:
		_, ok := v.(bool)
		return ok
	case avro.Int, avro.Long:
		_, ok := asInt(v)
		return ok
	case avro.Float, avro.Double:
		switch v.(type) {
		case float32, float64:
			return true
		}
		_, ok := asInt(v)
		return ok
	case avro.String, avro.Enum:
		_, ok := v.(string)
		return ok
	case avro.Bytes, avro.Fixed:
		_, ok := v.([]byte)
		return ok
	case avro.Record, avro.Map:
		_, ok := v.(map[string]any)
		return ok
	case avro.Array:
		return toAnySlice(v) != nil
	case avro.Ref:
		return accepts(s.(*avro.RefSchema).Schema(), v)
	}
	return false
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

func toAnySlice(v any) []any {
	switch x := v.(type) {
	case []any:
		if x == nil {
			return []any{}
		}
		return x
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	}
	return nil
}
