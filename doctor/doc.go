// Package doctor is sf2loki's live preflight (`sf2loki doctor`): a list of checks run in
// dependency order, each ending PASS, WARN, FAIL, SKIP or INFO with a one-line message and, when
// something is wrong, a one-line fix.
//
// The engine (Run, Report) knows nothing about Salesforce or stores; the check constructors in
// this package (Salesforce, Loki, Store, Lease, Clock, TimeBudget) take plain targets built by
// the CLI from the configuration. A check whose prerequisite did not pass (FAIL or SKIP) is
// skipped, so one root cause shows as one FAIL.
//
// Checks never write the real checkpoint document or the real lease: the store's
// conditional-write probe runs on a separate probe object, Kubernetes permissions are checked
// with server-side dry runs, and the Loki test write is labeled source="sf2loki-doctor" so it
// is easy to find and to ignore.
package doctor
