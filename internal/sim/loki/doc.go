// Package loki is a strict Loki-protocol receiver for tests, benchmarks and
// the demo: it decodes push requests exactly as Loki does (protobuf + snappy,
// JSON, gzip and deflate), validates them like Loki's distributor and ingester
// (label syntax and limits, line size, timestamp bounds against an injectable
// clock, the out-of-order window, structured-metadata limits), stores what it
// accepts, skips and counts duplicates (same timestamp and line, as Loki's
// head block: structured metadata is not compared), and injects faults on
// demand (429 with Retry-After, 5xx, 413 above a size, 260, partial 400s,
// disallowed structured metadata, slow answers, and accepted requests whose
// response is lost).
//
// A 400 answer carries Loki's body, which is not a complete account of what
// failed: the distributor's validation errors grouped by message, or, when the
// ingester refused entries (too_far_behind) of the last stream of the request,
// that stream's error naming at most Options.MaxReturnedErrors of its entries.
// Like Loki's ingester, the receiver answers for the last stream only: entries
// it refused in an earlier stream are not stored, and the request is answered
// 204 all the same when the last stream was stored whole and the distributor
// refused nothing (see Rejected for what was refused).
//
// Importers alias it simloki. It deliberately shares no code with package
// github.com/sf2loki/sf2loki/loki, so a bug in the client's encoder cannot be
// mirrored by the receiver's decoder.
package loki
