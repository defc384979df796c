package logql

import (
	"reflect"
	"strings"
	"testing"
)

func refNames(q Query) []string {
	var out []string
	for _, s := range q.Selectors {
		for _, r := range s.Refs {
			out = append(out, r.Where+":"+r.Name)
		}
	}
	return out
}

func TestParseReadsTheSubset(t *testing.T) {
	cases := []struct {
		expr string
		refs []string
	}{
		{`{source="eventlogfile", event_type="Login", org=~"$org"} | json | LOGIN_STATUS != "LOGIN_NO_ERROR" | line_format "{{.USER_NAME}} from {{ .SOURCE_IP }}"`,
			[]string{"filter:LOGIN_STATUS", "line_format:USER_NAME", "line_format:SOURCE_IP"}},
		{`topk(10, sum by (USER_NAME, SOURCE_IP) (count_over_time({event_type="Login"} |= "ERROR" != "x" | json | LOGIN_STATUS != "LOGIN_NO_ERROR" and __error__="" [$__interval])))`,
			[]string{"filter:LOGIN_STATUS", "filter:__error__", "by:USER_NAME", "by:SOURCE_IP"}},
		{`quantile_over_time(0.95, {source="eventlogfile", event_type="ApexExecution"} | json | EXEC_TIME > 1.5 | unwrap EXEC_TIME [5m]) by (ENTRY_POINT)`,
			[]string{"filter:EXEC_TIME", "unwrap:EXEC_TIME", "by:ENTRY_POINT"}},
		{`sum by (org) (count_over_time({source="apexlog"} | Status != "Success" | label_format who=LogUserId [1h]))`,
			[]string{"filter:Status", "label_format:LogUserId", "by:org"}},
	}
	for _, c := range cases {
		q, err := Parse(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if got := refNames(q); !reflect.DeepEqual(got, c.refs) {
			t.Errorf("%s:\n refs %v\n want %v", c.expr, got, c.refs)
		}
	}
}

func TestParseRefusesWhatItDoesNotRead(t *testing.T) {
	for _, expr := range []string{
		`{source="x"} | logfmt | a="b"`,
		`{source="x"} | json user="USER_NAME"`,
		`{source="x"} | regexp "(?P<a>.*)"`,
		`{source="x"} | json | USER_NAME`,
		`{source="x"} | json | "USER"="x"`,
		`{source=x}`,
		`{source="x", org=~"$customer"}`,
		`sum(rate([5m]))`,
	} {
		if _, err := Parse(expr); err == nil {
			t.Errorf("%s: accepted", expr)
		}
	}
}

func TestCheckNamesWhatAStreamLacks(t *testing.T) {
	login := Stream{Labels: map[string]string{"source": "eventlogfile", "event_type": "Login", "org": "prod"}, Fields: map[string]bool{}}
	if !JSONFields(`{"USER_NAME":"a","LOGIN_STATUS":"x","CreatedBy.Username":"b","nested":{"a-b":1},"list":[1]}`, login.Fields) {
		t.Fatal("not a JSON object")
	}
	apex := Stream{Labels: map[string]string{"source": "apexlog", "event_type": "ApexLog"}, Metadata: map[string]bool{"Status": true}}
	streams := []Stream{login, apex}
	for expr, want := range map[string]string{
		`{event_type="Login"} | json | LOGIN_STATUS != "" | line_format "{{.CreatedBy_Username}} {{.nested_a_b}}"`: "",
		`sum by (org, USER_NAME) (count_over_time({event_type="Login"} | json [5m]))`:                              "",
		`{source="apexlog"} | Status != "Success"`:                                                                 "",
		`{event_type="Login"} | USER_NAME = "a"`:                                                                   `filter "USER_NAME" is not in stream`,
		`{event_type="Login"} | json | LOGIN_STATE != ""`:                                                          `filter "LOGIN_STATE" is not in stream`,
		`{event_type="Logout"} | json`:                                                                             "selects no stream",
		`{source=~".+"} | json | USER_NAME = "a"`:                                                                  `filter "USER_NAME" is not in stream {event_type="ApexLog", source="apexlog"}`,
		`{event_type="Login"} | json | list = "1"`:                                                                 `filter "list" is not in stream`,
	} {
		q, err := Parse(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		got := strings.Join(Check(q, streams), "; ")
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("%s: problems %q, want %q", expr, got, want)
		}
	}
}
