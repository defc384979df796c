// Package loki encodes log entries for the Loki push API and pushes them with a
// retry policy decided in one place.
//
// The unit of work is [Client.Push]: it takes a slice of [Entry] values, groups
// them into streams (one per canonical [Labels] set, entries sorted oldest
// first), applies the label guard and the line cap, cuts the streams into
// requests by size and entry count, encodes each request as protobuf + snappy
// (default) or JSON (optionally gzipped), and sends it. Failed requests are
// retried, split or reported, and the returned [Result] says, for every input
// entry, whether it was accepted, permanently rejected (with the reason) or not
// delivered (retry later). What to do with a rejection is the caller's policy.
//
// Rules the client knows are checked before anything is sent: the label guard,
// the line cap, and [Limits] (Loki's reject_old_samples_max_age,
// creation_grace_period and structured-metadata limits). An entry that breaks
// one is rejected with Status 0 and Loki's own reason name, so a predictable
// rejection costs no request and makes no duplicate. Timestamps are checked on
// this host's clock, or on the receiver's when the caller gives its offset
// ([WithClockOffset]); [Result].ServerTime and ClockOffset read the receiver's
// clock from the Date header of its answers. A 400 the client could
// not predict is split until the failing entry is alone; its reason is read
// from that entry's own answer ([ClassifyRejection]), because the body of a
// larger request is no account of which entries failed, and the entries sent
// again meanwhile are counted in [Result].Resent.
//
// The protobuf encoding is written by hand with protowire and is
// wire-compatible with Loki's logproto.PushRequest, including structured
// metadata; nothing from github.com/grafana/loki is imported.
package loki
