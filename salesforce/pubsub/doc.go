// Package pubsub is sf2loki's client for the Salesforce Pub/Sub API (gRPC, eventbus.v1), built
// for a scheduled job rather than a daemon: Subscribe is a bounded pull that resumes from a
// stored replay id, keeps at most 100 events outstanding (never more than it still wants), and
// stops on the first of N events, an idle period with nothing arriving, or the deadline.
//
// Every call carries the metadata accesstoken, instanceurl and tenantid (the 18-character org
// id) from the shared Salesforce session (package salesforce). A call refused as
// UNAUTHENTICATED renews the session once, compare-and-clear on the token it used, and is
// repeated; a subscription resumes from the last position it yielded.
//
// Payloads are schemaless Avro binary. Schemas are fetched by fingerprint with GetSchema once per
// Client (hamba/avro parses them) and Decode renders a payload as ordered Fields; EventTime picks
// the event's timestamp.
//
// What failed is told by sentinels: ErrReplayLost (a stored replay id refused as invalid or
// outside the ~72-hour retention window), ErrUnauthenticated, ErrTopic, ErrSchema, ErrDecode and
// ErrUnavailable. The status code, Salesforce's error-code trailer and the rpc-id are in a
// *StatusError.
package pubsub
