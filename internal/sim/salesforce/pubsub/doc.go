// Package pubsub is the simulated Salesforce Pub/Sub API (gRPC eventbus.v1) for tests,
// benchmarks and `sf2loki demo`. It serves Subscribe, GetSchema and GetTopic with Salesforce's
// behavior as Salesforce documents it:
//
//   - topics with Avro schemas (schema ids are fingerprints), a Go publisher (Publish,
//     PublishPayload) and monotonic, opaque replay ids;
//   - LATEST / EARLIEST / CUSTOM start positions; a retention horizon (default 72h on the
//     injected clock) past which events are purged and a replay id is refused with
//     INVALID_ARGUMENT and the error-code trailer ...fetch.replayid.corrupted, as is an id from
//     before ResetStream (an org migration) or one the topic never issued;
//   - flow control: never more events in flight than the credits granted, at most 100
//     outstanding per call (more is treated as 100), num_requested <= 0 refused;
//   - keepalives: an empty FetchResponse with latest_replay_id every KeepaliveInterval while
//     credits are pending and nothing flows (Salesforce: about 270s); the id is freshly minted,
//     so a quiet topic's position can be refreshed;
//   - UNAUTHENTICATED (trailer ...service.auth.error) when the call's session is, or becomes,
//     invalid: the metadata accesstoken / tenantid is checked by Options.Authenticate on every
//     call and again before every response of an open stream.
//
// It mirrors Salesforce, not sf2loki's client, and never imports the client package. Importers
// alias it simpubsub:
//
//	ps := simpubsub.New(simpubsub.Options{Authenticate: simpubsub.HandlerAuthenticator(org.Handler(), org.OrgID())})
//	ps.AddTopic("/event/LoginEventStream", simpubsub.LoginEventStreamSchema)
//	l, _ := ps.Start()
//	defer l.Close()
package pubsub
