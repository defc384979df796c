package pubsub_test

import (
	"errors"
	"math"
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
