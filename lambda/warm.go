package lambda

import (
	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/store"
)

// Warm keeps the clients a Lambda execution environment reuses across warm invocations: the
// store's backend (its S3 client), the Loki client, the Salesforce clients (connection pools and
// token caches) and the S3 client of the dead letters. The lease, the claim, the sources and the
// job are built afresh for every invocation. A nil *Warm builds every client for one invocation
// (run-once, schedule).
type Warm struct {
	st   *store.Store
	sink *loki.Client
	sf   map[string]*salesforce.Client // by the org's config path
	dead DeadLetters
}

// Store returns the store build makes, built on the first call; later calls get a store over the
// same backend with this invocation's options (its logger).
func (w *Warm) Store(build func() (*store.Store, error), o store.Options) (*store.Store, error) {
	if w == nil {
		return build()
	}
	if w.st == nil {
		st, err := build()
		if err != nil {
			return nil, err
		}
		w.st = st
		return st, nil
	}
	return store.New(w.st.Backend(), o), nil
}

// Loki returns the push client, built with o on the first call.
func (w *Warm) Loki(o loki.Options) (*loki.Client, error) {
	if w == nil {
		return loki.New(o)
	}
	if w.sink == nil {
		c, err := loki.New(o)
		if err != nil {
			return nil, err
		}
		w.sink = c
	}
	return w.sink, nil
}

// Salesforce returns the client of the org at key (its configuration path), built with o on the
// first call for it.
func (w *Warm) Salesforce(key string, o salesforce.Options) (*salesforce.Client, error) {
	if w == nil {
		return salesforce.New(o)
	}
	if c, ok := w.sf[key]; ok {
		return c, nil
	}
	c, err := salesforce.New(o)
	if err != nil {
		return nil, err
	}
	if w.sf == nil {
		w.sf = map[string]*salesforce.Client{}
	}
	w.sf[key] = c
	return c, nil
}

// DeadLetters returns the environment's dead letters (nil for a nil *Warm: a client per
// invocation).
func (w *Warm) DeadLetters() *DeadLetters {
	if w == nil {
		return nil
	}
	return &w.dead
}
