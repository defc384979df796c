package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/config"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	simpubsub "github.com/sf2loki/sf2loki/internal/sim/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source"
)

const cdcSchema = `{"type":"record","name":"AccountChangeEvent","fields":[
  {"name":"ChangeEventHeader","type":{"type":"record","name":"ChangeEventHeader","fields":[
    {"name":"entityName","type":"string"},
    {"name":"changeType","type":"string"},
    {"name":"commitTimestamp","type":"long"},
    {"name":"changedFields","type":{"type":"array","items":"string"}}]}},
  {"name":"Name","type":["null","string"],"default":null},
  {"name":"Fax","type":["null","string"],"default":null},
  {"name":"AnnualRevenue","type":["null","double"],"default":null}]}`

func TestPubSubSourceShapesDecodedEvents(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	now := time.Now().UTC().Truncate(time.Millisecond)
	org := simsf.New(simsf.Options{Seed: 3, Logger: log})
	org.AddUser("int@example.com", simsf.AllPermissions())
	kp, err := simsf.NewKeyPair(now)
	if err != nil {
		t.Fatal(err)
	}
	if err := org.AddJWTApp("cid", kp.Certificate, "int@example.com"); err != nil {
		t.Fatal(err)
	}
	orgSrv, err := org.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer orgSrv.Close()
	ps := simpubsub.New(simpubsub.Options{Authenticate: simpubsub.HandlerAuthenticator(org.Handler(), org.OrgID()), Logger: log})
	if _, err := ps.AddTopic("/data/AccountChangeEvent", cdcSchema); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.Publish("/data/AccountChangeEvent", map[string]any{
		"ChangeEventHeader": map[string]any{"entityName": "Account", "changeType": "UPDATE", "commitTimestamp": now.UnixMilli(), "changedFields": []any{"0x06"}},
		"Name":              "Acme", "Fax": "4155551212", "AnnualRevenue": 1.5e6,
	}); err != nil {
		t.Fatal(err)
	}
	l, err := ps.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	cfg := config.Defaults()
	p := &cfg.Sources.PubSub
	p.Enabled, p.Topics, p.Endpoint, p.Plaintext, p.Idle = true, []string{"/data/AccountChangeEvent"}, l.Addr, true, config.Duration(time.Second)
	cfg.Shape.Transforms = []config.ShapeTransform{
		{Op: "drop_field", Fields: []string{"ChangeEventHeader.changedFields"}},
		{Op: "mask", Fields: []string{"Fax"}, Mode: "full"},
	}
	cfg.Shape.Metadata = []string{"ChangeEventHeader.changeType"}
	sh, err := buildShaper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sf, err := salesforce.New(salesforce.Options{LoginURL: orgSrv.URL, ClientID: "cid", Username: "int@example.com", PrivateKeyPEM: kp.KeyPEM, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	bindings, err := orgBindings(cfg, cfg.OrgList()[0], sf, sh, log)
	if err != nil || len(bindings) != 1 {
		t.Fatalf("%d bindings (%v), want the pubsub source", len(bindings), err)
	}
	src := bindings[0].Source
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	streams, err := src.Open(ctx, source.OpenRequest{Log: log, Count: func(string, int64) {}, Note: func(string) {}})
	if err != nil || len(streams) != 1 || streams[0].Key() != "pubsub:/data/AccountChangeEvent" {
		t.Fatalf("streams %v, err %v", streams, err)
	}
	var rec source.Record
	err = streams[0].Next(ctx, &rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := streams[0].Next(ctx, new(source.Record)); !errors.Is(err, io.EOF) {
		t.Fatalf("second Next: %v, want the end", err)
	}
	_ = streams[0].Close()

	var line map[string]any
	if err := json.Unmarshal([]byte(rec.Entry.Line), &line); err != nil {
		t.Fatalf("line %q: %v", rec.Entry.Line, err)
	}
	if line["ChangeEventHeader.entityName"] != "Account" || line["AnnualRevenue"] != 1.5e6 || line["Name"] != "Acme" {
		t.Fatalf("line %s: want the flattened, typed fields", rec.Entry.Line)
	}
	if _, has := line["ChangeEventHeader.changedFields"]; has || strings.Contains(rec.Entry.Line, "4155551212") {
		t.Fatalf("line %s: the transforms were not applied", rec.Entry.Line)
	}
	md := map[string]string{}
	for _, m := range rec.Entry.Metadata {
		md[m.Name] = m.Value
	}
	if md["ChangeEventHeader_changeType"] != "UPDATE" || md["replay_id"] == "" {
		t.Fatalf("metadata %v", md)
	}
	if v, _ := rec.Entry.Labels.Get("event_type"); v != "AccountChangeEvent" {
		t.Fatalf("labels %s", rec.Entry.Labels)
	}
	if !rec.Entry.Timestamp.Equal(now) {
		t.Fatalf("timestamp %s, want the commitTimestamp %s", rec.Entry.Timestamp, now)
	}
}
