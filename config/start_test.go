package config

import (
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/source/pubsub"
)

func TestStartKeys(t *testing.T) {
	cfg := mustLoad(t, sfCreds+`sources:
  eventlogfile:
    enabled: true
    event_types: [API]
    start: 2024-06-01T00:00:00Z
  soql:
    enabled: true
    objects:
      - name: LoginHistory
        start: "2024-06-01T02:00:00+02:00"
  apexlog:
    enabled: true
  pubsub:
    enabled: true
    topics: [/event/Order_Event__e]
    start: 2024-06-01T00:00:00.5Z
`, "SF2LOKI_SOURCES__APEXLOG__START=2024-06-02T00:00:00Z")
	want := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	s := cfg.Sources
	if !s.EventLogFile.Start.T().Equal(want) || !s.SOQL.Objects[0].SourceObject().Start.Equal(want) ||
		!s.ApexLog.ApexLogOptions().Start.Equal(want.Add(24*time.Hour)) {
		t.Errorf("starts: eventlogfile %v, soql %v, apexlog %v", s.EventLogFile.Start.T(), s.SOQL.Objects[0].SourceObject().Start, s.ApexLog.ApexLogOptions().Start)
	}
	if p, at := s.PubSub.Start.Preset(); p != pubsub.StartEarliest || !at.Equal(want.Add(500*time.Millisecond)) {
		t.Errorf("pubsub start = %s, %v", p, at)
	}
	for in, want := range map[PubSubStart]pubsub.Start{"earliest": pubsub.StartEarliest, "latest": pubsub.StartLatest} {
		if p, at := in.Preset(); p != want || !at.IsZero() {
			t.Errorf("%s: %s %v", in, p, at)
		}
	}
	if (SOQLObject{}).SourceObject().Start.IsZero() != true || Defaults().Sources.EventLogFile.Start.T() != (time.Time{}) {
		t.Error("an unset start must be the zero time (lookback applies)")
	}

	_, err := load(t, sfCreds+`sources:
  eventlogfile:
    start: 2024-06-01
  soql:
    objects:
      - name: X
        start: yesterday
  pubsub:
    start: earlist
`)
	wantErrors(t, err, `sources.eventlogfile.start: "2024-06-01" is not an RFC 3339 time`, "sources.soql.objects[0].start",
		`sources.pubsub.start: "earlist" is not earliest, latest or an RFC 3339 time`, `did you mean "earliest"?`)
}
