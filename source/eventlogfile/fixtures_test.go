package eventlogfile

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
)

// listingFixture is the part of a testdata/salesforce/eventlogfile/*.listing.json row the
// test needs.
type listingFixture struct {
	Records []struct {
		LogFileFieldNames string
		LogFileFieldTypes string
	}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "salesforce", "eventlogfile", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFixturesShipWithTheirJSONTypes ships the Login and ApexCallout files written from
// Salesforce's documentation (testdata/README.md), in LF and CRLF forms, with their documented
// LogFileFieldTypes and an ip mask on the address columns, and compares the JSON type of every
// field of every line: Number columns are numbers (an empty one stays ""), ApexCallout's Boolean
// SUCCESS written 1/0 is true/false, everything else a string; "Salesforce.com IP" passes the ip
// mask unchanged while addresses are masked; a TIMESTAMP without milliseconds times its row.
func TestFixturesShipWithTheirJSONTypes(t *testing.T) {
	sh, err := shape.New(shape.Options{Transforms: []shape.Transform{
		{Op: shape.OpMask, Mode: shape.MaskIP, Fields: []string{"CLIENT_IP", "SOURCE_IP", "FORWARDED_FOR_IP"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		typ, file, tsColumn string
		firstTime           time.Time
		values              []map[string]any // per row: fields whose value is checked
	}{
		{
			typ: "Login", file: "login", tsColumn: "TIMESTAMP_DERIVED", firstTime: time.Date(2026, 6, 29, 8, 15, 2, 117e6, time.UTC),
			values: []map[string]any{
				{"CLIENT_IP": "198.51.100.0", "SOURCE_IP": "198.51.100.0", "LOGIN_TYPE": "A", "RUN_TIME": 212.0, "DB_TOTAL_TIME": 48211930.0},
				{"RUN_TIME": "", "CPU_TIME": 0.0, "LOGIN_SUB_TYPE": "OAuth Refresh Token", "FORWARDED_FOR_IP": "203.0.113.0, 10.20.0.0"},
				{"CLIENT_IP": "Salesforce.com IP", "SOURCE_IP": "", "LOGIN_TYPE": "7"},
				{"CLIENT_IP": "2001:db8:4::", "BROWSER_TYPE": `Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0, "embedded"`},
			},
		},
		{
			typ: "ApexCallout", file: "apexcallout", tsColumn: "TIMESTAMP", firstTime: time.Date(2026, 6, 29, 14, 5, 1, 0, time.UTC),
			values: []map[string]any{
				{"SUCCESS": true, "STATUS_CODE": 201.0, "CLIENT_IP": "Salesforce.com IP", "RUN_TIME": ""},
				{"SUCCESS": false, "STATUS_CODE": 503.0, "TIME": 10002.0},
			},
		},
	}
	for _, tc := range cases {
		var listing listingFixture
		if err := json.Unmarshal(readFixture(t, tc.file+".listing.json"), &listing); err != nil || len(listing.Records) != 1 {
			t.Fatalf("%s listing: %v", tc.file, err)
		}
		names := strings.Split(listing.Records[0].LogFileFieldNames, ",")
		types := strings.Split(listing.Records[0].LogFileFieldTypes, ",")
		lf := readFixture(t, tc.file+".csv")
		for form, body := range map[string][]byte{"lf": lf, "crlf": bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n"))} {
			t.Run(tc.typ+"/"+form, func(t *testing.T) {
				e := newEnv(t, simsf.Options{})
				e.addFile(simsf.EventLogFileSpec{EventType: tc.typ, Body: body, FieldTypes: listing.Records[0].LogFileFieldTypes, CreatedDate: epoch.Add(-time.Hour)})
				var lines []map[string]any
				var times []time.Time
				res := e.run(e.source(Options{EventTypes: []string{tc.typ}, Shaper: sh, TimestampColumn: tc.tsColumn}), map[string]json.RawMessage{}, 100,
					func(_ string, rec source.Record) {
						var m map[string]any
						if err := json.Unmarshal([]byte(rec.Entry.Line), &m); err != nil {
							t.Fatalf("line is not JSON: %v: %s", err, rec.Entry.Line)
						}
						lines = append(lines, m)
						times = append(times, rec.Entry.Timestamp)
					})
				if len(res.errs) > 0 || len(lines) != len(tc.values) {
					t.Fatalf("%d lines, errors %v; want %d", len(lines), res.errs, len(tc.values))
				}
				for i, line := range lines {
					if len(line) != len(names) {
						t.Fatalf("line %d has %d fields, the file %d", i, len(line), len(names))
					}
					for j, name := range names {
						v, ok := line[name]
						if !ok {
							t.Fatalf("line %d lacks %s", i, name)
						}
						var want string
						switch {
						case v == "":
							want = "string" // an empty cell stays "", whatever its type
						case types[j] == "Number":
							want = "number"
						case types[j] == "Boolean":
							want = "boolean"
						default:
							want = "string"
						}
						if got := jsonType(v); got != want {
							t.Errorf("line %d %s (%s) = %#v: JSON %s, want %s", i, name, types[j], v, got, want)
						}
					}
					for name, want := range tc.values[i] {
						if line[name] != want {
							t.Errorf("line %d %s = %#v, want %#v", i, name, line[name], want)
						}
					}
				}
				if !times[0].Equal(tc.firstTime) {
					t.Errorf("first entry at %v, want %v (from %s)", times[0], tc.firstTime, tc.tsColumn)
				}
			})
		}
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case float64:
		return "number"
	case bool:
		return "boolean"
	case string:
		return "string"
	case nil:
		return "null"
	}
	return "other"
}
