package eventlogfile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/job/jobtest"
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/source"
)

// TestE2EVictoriaLogsKeepsLinesWhole ships EventLogFile rows through the job to a real
// VictoriaLogs at the push URLs docs/running.md gives, and reads them back. With
// disable_message_parsing=1 every _msg is, byte for byte, the line sf2loki sent, and the labels
// are stream fields; with the receiver's default parsing and _msg_field naming a column, the
// line is split into fields and _msg is that column's value (the documented trade-off: the line
// is not kept).
func TestE2EVictoriaLogsKeepsLinesWhole(t *testing.T) {
	vl := testenv.StartVictoriaLogs(t)
	cases := []struct {
		name, query string
		whole       bool
	}{
		{"whole lines", "disable_message_parsing=1", true},
		{"parsed into fields", "_msg_field=USER_NAME", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, simsf.Options{})
			e.addFile(simsf.EventLogFileSpec{Body: readFixture(t, "login.csv"), CreatedDate: epoch.Add(-2 * time.Hour)})
			e.addFile(simsf.EventLogFileSpec{Rows: 200, CreatedDate: epoch.Add(-time.Hour)})
			run := fmt.Sprintf("vl-%d", time.Now().UnixNano())
			opts := Options{Labels: []loki.Label{{Name: "org", Value: run}}}

			// What sf2loki sends: the source's lines (shaping is deterministic, so the job sends
			// the same ones).
			var sent []string
			e.run(e.source(opts), map[string]json.RawMessage{}, 1000, func(_ string, rec source.Record) {
				if !rec.Skip {
					sent = append(sent, rec.Entry.Line)
				}
			})
			if len(sent) != 204 {
				t.Fatalf("the source produced %d lines, want 204", len(sent))
			}

			sink, err := loki.New(loki.Options{URL: vl.URL + "/insert/loki/api/v1/push?" + tc.query, Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			jopts := job.Options{MaxDuration: time.Minute, PushReserve: 10 * time.Second, CommitReserve: 5 * time.Second,
				ReleaseReserve: time.Second, Log: slog.New(slog.DiscardHandler), Now: e.clock.Now}
			rep := job.Run(context.Background(), job.Deps{Coordinator: jobtest.New(), Bindings: []job.Binding{{Source: e.source(opts)}}, Sink: sink}, jopts)
			if rep.Outcome != job.OutcomeOK || rep.Records != int64(len(sent)) {
				t.Fatalf("run: %s, %d records (%s %v)", rep.Outcome, rep.Records, rep.Error, rep.Errors)
			}

			rows := vl.Query(t, fmt.Sprintf(`{org=%q}`, run))
			if len(rows) != len(sent) {
				t.Fatalf("VictoriaLogs holds %d rows, want %d", len(rows), len(sent))
			}
			str := func(row map[string]any, k string) string { v, _ := row[k].(string); return v }
			var got []string
			for _, row := range rows {
				if str(row, "source") != Name || str(row, "event_type") != "Login" {
					t.Fatalf("row without its labels: %v", row)
				}
				if tc.whole {
					if _, parsed := row["USER_NAME"]; parsed {
						t.Fatalf("the line was parsed into fields: %v", row)
					}
					got = append(got, str(row, "_msg"))
					continue
				}
				var line map[string]any
				if err := json.Unmarshal([]byte(str(row, "_msg")), &line); err == nil {
					t.Fatalf("_msg %q is still the JSON line: parsing was off", str(row, "_msg"))
				}
				// The named column becomes _msg (and is no field of its own); the others are fields.
				if str(row, "LOGIN_TYPE") == "" || !strings.HasSuffix(str(row, "_msg"), "@acme.example.com") || row["USER_NAME"] != nil {
					t.Fatalf("parsed row: _msg %q, USER_NAME %v, LOGIN_TYPE %q", str(row, "_msg"), row["USER_NAME"], str(row, "LOGIN_TYPE"))
				}
			}
			if !tc.whole {
				return
			}
			// The query docs/running.md shows: columns unpacked at query time.
			failed := 0
			for _, l := range sent {
				if !strings.Contains(l, `"LOGIN_STATUS":"LOGIN_NO_ERROR"`) {
					failed++
				}
			}
			q := fmt.Sprintf(`{org=%q, source="eventlogfile", event_type="Login"} | unpack_json | filter NOT LOGIN_STATUS:=LOGIN_NO_ERROR`, run)
			if n := len(vl.Query(t, q)); failed == 0 || n != failed {
				t.Fatalf("the documented query found %d failed logins, want %d", n, failed)
			}
			sort.Strings(sent)
			sort.Strings(got)
			for i := range sent {
				if got[i] != sent[i] {
					t.Fatalf("_msg differs from the line sf2loki sent:\n got %s\nwant %s", got[i], sent[i])
				}
			}
		})
	}
}
