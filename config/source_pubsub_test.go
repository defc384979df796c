package config

import (
	"testing"

	"github.com/sf2loki/sf2loki/shape"
)

func TestPubSubConfig(t *testing.T) {
	cfg := mustLoad(t, sfCreds+"sources:\n  pubsub:\n    enabled: true\n    topics: ['/event/LoginEventStream', /data/AccountChangeEvent]\n")
	p := cfg.Sources.PubSub
	if p.Endpoint != "api.pubsub.salesforce.com:7443" || p.MaxEvents != 1000 || p.NumRequested != 100 || p.Idle.D().Seconds() != 5 ||
		p.RefreshAfter.D().Hours() != 24 || p.AgeWarning.D().Hours() != 48 || p.ReplayLost != "fail" || p.Start != "earliest" {
		t.Errorf("defaults = %+v", p)
	}
	_, err := load(t, sfCreds+"sources:\n  pubsub:\n    enabled: true\n    replay_lost: skip\n    num_requested: 500\n    refresh_after: 80h\n    endpoint: nohost\n")
	wantErrors(t, err, "sources.pubsub.topics: is required", "sources.pubsub.replay_lost", "sources.pubsub.num_requested", "sources.pubsub.refresh_after", "sources.pubsub.endpoint")
	_, err = load(t, sfCreds+"sources:\n  pubsub:\n    enabled: true\n    topics: [LoginEventStream, /event/X__e, /event/X__e]\n    plaintext: true\n")
	wantErrors(t, err, "sources.pubsub.topics[0]", `sources.pubsub.topics[2]: "/event/X__e" is listed twice`, "sources.pubsub.plaintext")
	_, err = load(t, sfCreds+"sources:\n  pubsub:\n    enabled: true\n    topics: ['*']\n    endpoint: 127.0.0.1:7443\n    plaintext: true\n    refresh_after: 0s\n")
	if err != nil {
		t.Fatalf("loopback plaintext and refresh_after 0: %v", err)
	}
}

func TestClaimsOfPubSub(t *testing.T) {
	s := Sources{PubSub: PubSubSource{Enabled: true, Topics: []string{"/event/LoginEventStream", "*"}}}
	got := s.Claims("sources")
	if len(got) != 2 || got[0] != (shape.Claim{Source: "pubsub", Name: "/event/LoginEventStream", Path: "sources.pubsub.topics[0]"}) || got[1].Name != "*" {
		t.Fatalf("claims = %+v", got)
	}
	if err := shape.CheckOverlap(append(got, shape.Claim{Source: "eventlogfile", Name: "Login", Path: "x"}), nil); err == nil {
		t.Fatal("LoginEventStream and the Login EventLogFile must overlap")
	}
}
