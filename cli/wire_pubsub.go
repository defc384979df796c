package cli

import (
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/sf2loki/sf2loki/loki"
	sfpubsub "github.com/sf2loki/sf2loki/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source"
	"github.com/sf2loki/sf2loki/source/pubsub"
)

// pubSubSource builds the Pub/Sub source of one org (sources.pubsub or orgs[i].sources.pubsub).
// It opens its own gRPC client per invocation (authenticated with the org's shared Salesforce
// session) and closes it when the run has closed every topic's stream. Keys are unprefixed
// ("pubsub:<topic>"); the job adds the org prefix.
func pubSubSource(env orgEnv, sh *shape.Shaper) (source.Source, error) {
	org, path, ok := findOrg(env.Config, env.Name)
	if !ok {
		return nil, fmt.Errorf("%w the pubsub source: no org named %q", errWiring, env.Name)
	}
	c := org.Sources.PubSub
	client, err := sfpubsub.New(env.Client, sfpubsub.Options{
		Endpoint: c.Endpoint, Plaintext: c.Plaintext, TLSCAFile: c.TLS.CAFile, TLSServerName: c.TLS.ServerName,
		TLSInsecureSkipVerify: c.TLS.InsecureSkipVerify, Logger: env.Log, Now: env.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("%w the pubsub source (%s.pubsub): %w", errWiring, path, err)
	}
	// Discovery (*) skips the categories the org's other sources ship.
	owned := shape.Owned(org.Sources.Claims(path), pubsub.Name, env.Config.Shape.CategoryAliases)
	refresh := c.RefreshAfter.D()
	if refresh == 0 {
		refresh = -1 // the option's zero means its default; the key's 0 means never
	}
	var labels []loki.Label
	if org.Salesforce.OrgID != "" {
		labels = append(labels, loki.Label{Name: "sf_org_id", Value: org.Salesforce.OrgID})
	}
	if env.Name != "" {
		labels = append(labels, loki.Label{Name: "org", Value: env.Name})
	}
	src, err := pubsub.New(client, env.Client, pubsub.Options{
		Topics: c.Topics, MaxEvents: c.MaxEvents, NumRequested: c.NumRequested, Idle: c.Idle.D(),
		RefreshAfter: refresh, AgeWarning: c.AgeWarning.D(), ReplayLost: pubsub.ReplayLost(c.ReplayLost), Start: pubsub.Start(c.Start),
		SkipDiscovered: func(topic string) bool { return slices.Contains(owned, sh.Category(topic)) },
		NewShaper: func(topic, eventType string) pubsub.Shaper {
			return &pubSubShaper{plan: sh.Plan(shape.Schema{Source: pubsub.Name, Type: eventType, Labels: labels}), typ: eventType}
		},
		Closer: client, Log: env.Log, Now: env.Now,
	})
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("%w the pubsub source (%s.pubsub): %w", errWiring, path, err)
	}
	return src, nil
}

// pubSubShaper applies the shape section to decoded Pub/Sub events: the same transforms,
// sampling and routing as every source, on the event's fields. A nested record (CDC's
// ChangeEventHeader, a compound address) is flattened into dotted names
// (ChangeEventHeader.changeType), as SOQL relationship fields are; an array or map is one field
// holding its JSON text. The sampling key is the event's id (stable across replays).
type pubSubShaper struct {
	plan *shape.Plan
	typ  string
	rec  shape.Record
	num  []byte
}

func (p *pubSubShaper) Shape(ev *pubsub.Event) (loki.Entry, string) {
	p.rec.Reset()
	p.rec.Type, p.rec.Time = p.typ, ev.Time
	if ev.ID != "" {
		p.rec.ID = append(p.rec.ID, ev.ID...)
	} else {
		p.rec.ID = base64.StdEncoding.AppendEncode(p.rec.ID, ev.ReplayID)
	}
	p.appendFields("", ev.Fields)
	return p.plan.Shape(&p.rec)
}

func (p *pubSubShaper) appendFields(prefix string, fs sfpubsub.Fields) {
	for _, f := range fs {
		name := prefix + f.Name
		switch v := f.Value.(type) {
		case nil:
			p.rec.Append(name, shape.Null, nil)
		case bool:
			p.rec.AppendString(name, shape.Bool, strconv.FormatBool(v))
		case int32:
			p.num = strconv.AppendInt(p.num[:0], int64(v), 10)
			p.rec.Append(name, shape.Number, p.num)
		case int64:
			p.num = strconv.AppendInt(p.num[:0], v, 10)
			p.rec.Append(name, shape.Number, p.num)
		case float32:
			p.appendFloat(name, float64(v), 32)
		case float64:
			p.appendFloat(name, v, 64)
		case string:
			p.rec.AppendString(name, shape.String, v)
		case []byte:
			p.rec.AppendString(name, shape.String, base64.StdEncoding.EncodeToString(v))
		case sfpubsub.Fields:
			p.appendFields(name+".", v)
		default: // an array or a map: its JSON text
			p.num = sfpubsub.AppendJSONValue(p.num[:0], v)
			p.rec.Append(name, shape.String, p.num)
		}
	}
}

func (p *pubSubShaper) appendFloat(name string, f float64, bits int) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		p.rec.AppendString(name, shape.String, strconv.FormatFloat(f, 'g', -1, bits))
		return
	}
	p.num = strconv.AppendFloat(p.num[:0], f, 'g', -1, bits)
	p.rec.Append(name, shape.Number, p.num)
}
