// Package salesforce is a simulated Salesforce org for tests, benchmarks and
// `sf2loki demo`: an http.Handler speaking the OAuth token endpoint (JWT bearer
// and client credentials), the REST query/queryAll/Tooling API with a SOQL
// subset and Salesforce's error bodies, describe/describeGlobal, /limits, and
// streamed EventLogFile and ApexLog bodies.
//
// It mirrors Salesforce, not sf2loki's client: it never imports the client
// package. Importers alias it simsf:
//
//	org := simsf.New(simsf.Options{Now: clock.Now, Seed: 1})
//	org.AddUser("integration@example.com", simsf.AllPermissions())
//	org.AddJWTApp("client-id", cert, "integration@example.com")
//	srv, _ := org.Start()
//	defer srv.Close()
//
// Facts it reproduces are documented in reference/salesforce.md; details the
// reference marks unverified are switchable (Options.BigObjectMode and
// friends). The same Org will later also serve the Pub/Sub gRPC API.
//
// Everything is deterministic given Options.Seed and the injected clock: ids,
// generated records and EventLogFile bytes. Large EventLogFile bodies are
// generated while streaming and are never held in memory.
package salesforce
