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
// The protobuf encoding is written by hand with protowire and is
// wire-compatible with Loki's logproto.PushRequest, including structured
// metadata; nothing from github.com/grafana/loki is imported.
package loki
