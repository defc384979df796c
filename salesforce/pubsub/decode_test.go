package pubsub_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sf2loki/sf2loki/salesforce/pubsub"
)

const decodeSchema = `{"type":"record","name":"T","fields":[
  {"name":"s","type":["null","string"]},
  {"name":"n","type":["null","long"]},
  {"name":"d","type":"double"},
  {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
  {"name":"a","type":{"type":"array","items":"string"}},
  {"name":"m","type":{"type":"map","values":"int"}},
  {"name":"b","type":"bytes"},
  {"name":"r","type":{"type":"record","name":"R","fields":[{"name":"x","type":"boolean"}]}}
]}`

func TestDecodeRendersSchemaOrderedJSON(t *testing.T) {
	s := avro.MustParse(decodeSchema)
	payload, err := avro.Marshal(s, map[string]any{
		"s": "tab\there \"q\" <b>&\u2028", "n": nil, "d": 2.5, "e": "B",
		"a": []any{"x", "y"}, "m": map[string]any{"z": 1, "a": 2}, "b": []byte{0xff, 0},
		"r": map[string]any{"x": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := pubsub.Decode(s, payload)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"s":"tab\there \"q\" <b>&\u2028","n":null,"d":2.5,"e":"B","a":["x","y"],"m":{"a":2,"z":1},"b":"/wA=","r":{"x":true}}`
	if got := string(f.AppendJSON(nil)); got != want {
		t.Fatalf("JSON\n got %s\nwant %s", got, want)
	}
}

func TestDecodeRejectsTruncatedAndHostilePayloads(t *testing.T) {
	s := avro.MustParse(decodeSchema)
	payload, err := avro.Marshal(s, map[string]any{"s": "x", "n": int64(1), "d": 1.0, "e": "A", "a": []any{}, "m": map[string]any{}, "b": []byte{}, "r": map[string]any{"x": false}})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string][]byte{
		"truncated":   payload[:len(payload)-3],
		"bad union":   {0x08},
		"huge array":  append([]byte{0x02, 0x02, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, 0xfe, 0xff, 0xff, 0xff, 0x0f),
		"empty input": {},
	} {
		if _, err := pubsub.Decode(s, p); !errors.Is(err, pubsub.ErrDecode) {
			t.Errorf("%s: err = %v, want ErrDecode", name, err)
		}
	}
}

func TestEventTimePrecedence(t *testing.T) {
	ms := int64(1714172795000)
	at := time.UnixMilli(ms).UTC()
	cases := []struct {
		name  string
		f     pubsub.Fields
		field string
	}{
		{"EventDate first", pubsub.Fields{{Name: "CreatedDate", Value: ms + 5}, {Name: "EventDate", Value: ms}}, "EventDate"},
		{"CreatedDate", pubsub.Fields{{Name: "EventDate", Value: nil}, {Name: "CreatedDate", Value: ms}}, "CreatedDate"},
		{"CDC commitTimestamp", pubsub.Fields{{Name: "ChangeEventHeader", Value: pubsub.Fields{{Name: "commitTimestamp", Value: ms}}}}, "ChangeEventHeader.commitTimestamp"},
		{"none", pubsub.Fields{{Name: "Name", Value: "x"}}, ""},
	}
	for _, tc := range cases {
		got, field, ok := pubsub.EventTime(tc.f)
		if field != tc.field || ok != (tc.field != "") || (ok && !got.Equal(at)) {
			t.Errorf("%s: EventTime = %v %q %v", tc.name, got, field, ok)
		}
	}
}

func TestFloatsAndNonFiniteValues(t *testing.T) {
	f := pubsub.Fields{{Name: "a", Value: 3.0}, {Name: "b", Value: 1e21}, {Name: "c", Value: math.NaN()}, {Name: "d", Value: float32(0.1)}}
	want := `{"a":3,"b":1e+21,"c":"NaN","d":0.1}`
	if got := string(f.AppendJSON(nil)); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// TestDecodeRejectsCountsBeyondThePayload: a count or size that claims more than the payload
// holds is ErrDecode, found before the decoder loops or allocates by it. Items that take no
// bytes (null, an empty record) never run the payload short, so without the check a count
// would be believed: a second block of math.MaxInt64 items once wrapped the running total
// negative, past the guard, and the decode appended items until memory ran out.
func TestDecodeRejectsCountsBeyondThePayload(t *testing.T) {
	const (
		arrayOfNull  = `{"type":"record","name":"T","fields":[{"name":"a","type":{"type":"array","items":"null"}}]}`
		arrayOfEmpty = `{"type":"record","name":"T","fields":[{"name":"a","type":{"type":"array","items":{"type":"record","name":"E","fields":[]}}}]}`
		mapOfNull    = `{"type":"record","name":"T","fields":[{"name":"m","type":{"type":"map","values":"null"}}]}`
		nestedArrays = `{"type":"record","name":"T","fields":[{"name":"a","type":{"type":"array","items":{"type":"array","items":"null"}}}]}`
		hugeFixed    = `{"type":"record","name":"T","fields":[{"name":"f","type":{"type":"fixed","name":"F","size":4611686018427387904}}]}`
	)
	long := func(vs ...int64) []byte { // Avro longs: zigzag varints
		var b []byte
		for _, v := range vs {
			b = binary.AppendVarint(b, v)
		}
		return b
	}
	// Eight inner arrays, each claiming as many nulls as the whole payload has bytes (18).
	nested := long(8)
	for range 8 {
		nested = append(nested, long(18, 0)...)
	}
	nested = append(nested, long(0)...)
	tests := []struct {
		name    string
		schema  string
		payload []byte
	}{
		{"a second block wraps the item total", arrayOfNull, long(1, math.MaxInt64, 0)},
		{"a second block of empty records wraps the item total", arrayOfEmpty, long(1, math.MaxInt64, 0)},
		{"a map's second block wraps the item total", mapOfNull, append(long(1, 1), append([]byte("k"), long(math.MaxInt64, 0)...)...)},
		{"a sized block of math.MaxInt64 items", arrayOfNull, long(-math.MaxInt64, 0, 0)},
		{"a sized block of math.MinInt64 items", arrayOfNull, long(math.MinInt64, 0, 0)},
		{"nested arrays claim more items than bytes", nestedArrays, nested},
		{"a fixed larger than the payload", hugeFixed, make([]byte, 8)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeBounded(t, avro.MustParse(tt.schema), tt.payload); !errors.Is(err, pubsub.ErrDecode) {
				t.Fatalf("Decode of %d bytes: err = %v, want ErrDecode", len(tt.payload), err)
			}
		})
	}
}

// decodeBounded is pubsub.Decode under a watchdog. A decode that believes a hostile count
// allocates gigabytes a second, long before the test binary's timeout: the watchdog aborts the
// binary once the heap has grown by 256 MiB, or after a minute. A panic fails the test.
func decodeBounded(t *testing.T, s avro.Schema, payload []byte) (pubsub.Fields, error) {
	t.Helper()
	type result struct {
		fields   pubsub.Fields
		err      error
		panicked any
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{panicked: p}
			}
		}()
		f, err := pubsub.Decode(s, payload)
		done <- result{fields: f, err: err}
	}()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, start := ms.HeapAlloc, time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			if r.panicked != nil {
				t.Fatalf("Decode of %d bytes panicked: %v", len(payload), r.panicked)
			}
			return r.fields, r.err
		case <-tick.C:
			runtime.ReadMemStats(&ms)
			if grown := int64(ms.HeapAlloc) - int64(base); grown > 256<<20 || time.Since(start) > time.Minute {
				panic(fmt.Sprintf("Decode of %d bytes is still running after %v, the heap %d MiB larger: it believes a count the payload cannot hold",
					len(payload), time.Since(start).Round(time.Millisecond), grown>>20))
			}
		}
	}
}
