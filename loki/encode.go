package loki

import (
	"bytes"
	"encoding/binary"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sf2loki/sf2loki/internal/jsonenc"
)

// Encoding selects the request body format.
type Encoding int

const (
	// EncodingProtobuf is Loki's native format: a logproto.PushRequest,
	// snappy block-compressed. The default.
	EncodingProtobuf Encoding = iota
	// EncodingJSON is the debug format: Loki's v1 JSON push body, optionally
	// gzipped (Options.Gzip). JSON text is UTF-8, so invalid UTF-8 in lines,
	// labels or metadata is sent as U+FFFD; protobuf sends bytes verbatim.
	EncodingJSON
)

// String returns "protobuf" or "json".
func (e Encoding) String() string {
	if e == EncodingJSON {
		return "json"
	}
	return "protobuf"
}

// Field numbers of logproto.PushRequest and its messages (docs/architecture.md, "Loki facts").
const (
	fieldPushStreams   protowire.Number = 1 // PushRequest.streams
	fieldStreamLabels  protowire.Number = 1 // StreamAdapter.labels
	fieldStreamEntries protowire.Number = 2 // StreamAdapter.entries
	fieldEntryTime     protowire.Number = 1 // EntryAdapter.timestamp
	fieldEntryLine     protowire.Number = 2 // EntryAdapter.line
	fieldEntryMetadata protowire.Number = 3 // EntryAdapter.structuredMetadata
	fieldPairName      protowire.Number = 1 // LabelPairAdapter.name
	fieldPairValue     protowire.Number = 2 // LabelPairAdapter.value
	fieldTimeSeconds   protowire.Number = 1 // google.protobuf.Timestamp.seconds
	fieldTimeNanos     protowire.Number = 2 // google.protobuf.Timestamp.nanos
)

// item is one entry on its way to the wire; items are sorted by stream, then
// time, then input position, so every request is a contiguous range of them.
type item struct {
	ns     int64 // Unix nanoseconds
	idx    int32 // position in the caller's slice
	stream int32 // index into scratch.streams, then (after sorting) the stream's rank
	line   int   // line length after the cap
	body   int   // protobuf EntryAdapter length (without tag and length prefix)
	size   int   // full encoded size in the client's encoding
}

// stream is one distinct label set within a push.
type stream struct {
	labels Labels
	err    error // label guard verdict
}

// scratch holds a push's reusable working memory.
type scratch struct {
	items   []item
	streams []stream
	index   map[string]int32
	remap   []int32
	counts  []int32
	spare   []item
	raw     []byte
	piece   []byte // compressed piece (snappy)
}

var scratchPool = sync.Pool{New: func() any { return &scratch{index: make(map[string]int32)} }}

const maxPooledBuffer = 16 << 20

// getScratch returns the client's spare scratch, else one from the pool. The spare survives
// garbage collections (a sync.Pool does not), so a client pushing batch after batch reuses the
// same buffers instead of growing new ones after every collection.
func (c *Client) getScratch() *scratch {
	if s := c.spareScratch.Swap(nil); s != nil {
		return s
	}
	return scratchPool.Get().(*scratch)
}

func (c *Client) putScratch(s *scratch) {
	if cap(s.raw) > maxPooledBuffer || cap(s.items) > 1<<20 || cap(s.spare) > 1<<20 {
		return
	}
	clear(s.items)
	s.items = s.items[:0]
	clear(s.streams)
	s.streams = s.streams[:0]
	clear(s.index)
	s.remap = s.remap[:0]
	clear(s.spare)
	s.spare = s.spare[:0]
	s.raw = s.raw[:0]
	if !c.spareScratch.CompareAndSwap(nil, s) {
		scratchPool.Put(s)
	}
}

// splitNanos converts Unix nanoseconds to a protobuf Timestamp's seconds and
// non-negative nanos.
func splitNanos(ns int64) (sec int64, nsec int64) {
	sec, nsec = ns/1e9, ns%1e9
	if nsec < 0 {
		sec--
		nsec += 1e9
	}
	return sec, nsec
}

func timestampBodySize(ns int64) int {
	sec, nsec := splitNanos(ns)
	n := 0
	if sec != 0 {
		n += protowire.SizeTag(fieldTimeSeconds) + protowire.SizeVarint(uint64(sec))
	}
	if nsec != 0 {
		n += protowire.SizeTag(fieldTimeNanos) + protowire.SizeVarint(uint64(nsec))
	}
	return n
}

func pairBodySize(name, value string) int {
	n := 0
	if name != "" {
		n += protowire.SizeTag(fieldPairName) + protowire.SizeBytes(len(name))
	}
	if value != "" {
		n += protowire.SizeTag(fieldPairValue) + protowire.SizeBytes(len(value))
	}
	return n
}

func decimalLen(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// entryBodySize returns the length of e's EntryAdapter message with its line
// cut to lineLen bytes, with the truncation marker when mark is set.
func entryBodySize(e *Entry, ns int64, lineLen int, mark bool) int {
	n := protowire.SizeTag(fieldEntryTime) + protowire.SizeBytes(timestampBodySize(ns))
	if lineLen > 0 {
		n += protowire.SizeTag(fieldEntryLine) + protowire.SizeBytes(lineLen)
	}
	for _, p := range e.Metadata {
		n += protowire.SizeTag(fieldEntryMetadata) + protowire.SizeBytes(pairBodySize(p.Name, p.Value))
	}
	if mark {
		vl := decimalLen(len(e.Line))
		pb := protowire.SizeTag(fieldPairName) + protowire.SizeBytes(len(TruncatedMetadataName)) +
			protowire.SizeTag(fieldPairValue) + protowire.SizeBytes(vl)
		n += protowire.SizeTag(fieldEntryMetadata) + protowire.SizeBytes(pb)
	}
	return n
}

// jsonEntrySize returns the length of e's JSON value array plus a separator, with the
// truncation marker when mark is set.
func jsonEntrySize(e *Entry, ns int64, lineLen int, mark bool) int {
	n := len(`["",,{}],`) + decimalLenSigned(ns)
	n += jsonenc.StringLen(e.Line[:lineLen], jsonenc.EscapedFFFD)
	for i, p := range e.Metadata {
		if i > 0 {
			n++
		}
		n += jsonenc.StringLen(p.Name, jsonenc.EscapedFFFD) + 1 + jsonenc.StringLen(p.Value, jsonenc.EscapedFFFD)
	}
	if mark {
		if len(e.Metadata) > 0 {
			n++
		}
		n += len(TruncatedMetadataName) + 2 + 1 + decimalLen(len(e.Line)) + 2
	}
	return n
}

func decimalLenSigned(n int64) int {
	if n < 0 {
		if n == -n { // math.MinInt64
			return 20
		}
		return 1 + decimalLen(int(-n))
	}
	return decimalLen(int(n))
}

// streamOverhead is the encoded size a stream adds to a request besides its
// entries (an upper bound for protobuf: the length prefix is counted at its
// largest plausible width).
func streamOverhead(enc Encoding, l *Labels) int {
	if enc == EncodingJSON {
		n := len(`{"stream":{},"values":[]},`)
		for i, p := range l.pairs() {
			if i > 0 {
				n++
			}
			n += jsonenc.StringLen(p.Name, jsonenc.EscapedFFFD) + 1 + jsonenc.StringLen(p.Value, jsonenc.EscapedFFFD)
		}
		return n
	}
	s := l.String()
	return protowire.SizeTag(fieldPushStreams) + 5 + protowire.SizeTag(fieldStreamLabels) + protowire.SizeBytes(len(s))
}

// appendProto appends the PushRequest for items to dst.
func (p *push) appendProto(dst []byte, items []item) []byte {
	for i := 0; i < len(items); {
		sid := items[i].stream
		j, sum := i, 0
		for ; j < len(items) && items[j].stream == sid; j++ {
			sum += items[j].size
		}
		labels := p.labels(sid).String()
		streamLen := protowire.SizeTag(fieldStreamLabels) + protowire.SizeBytes(len(labels)) + sum
		dst = appendTag(dst, fieldPushStreams, protowire.BytesType)
		dst = appendVarint(dst, uint64(streamLen))
		dst = appendTag(dst, fieldStreamLabels, protowire.BytesType)
		dst = appendBytes(dst, labels)
		for k := i; k < j; k++ {
			dst = p.spill(p.appendProtoEntry(dst, &items[k]))
		}
		i = j
	}
	return dst
}

// protoSize is the exact length of appendProto's encoding of items (the snappy block's length
// comes first, before any piece is encoded).
func (p *push) protoSize(items []item) int {
	n := 0
	for i := 0; i < len(items); {
		sid := items[i].stream
		j, sum := i, 0
		for ; j < len(items) && items[j].stream == sid; j++ {
			sum += items[j].size
		}
		streamLen := protowire.SizeTag(fieldStreamLabels) + protowire.SizeBytes(len(p.labels(sid).String())) + sum
		n += protowire.SizeTag(fieldPushStreams) + protowire.SizeBytes(streamLen)
		i = j
	}
	return n
}

// spill hands every full piece at the front of dst to p.out and returns the rest, moved to
// the front: while a body is encoded, the push holds about one piece of its uncompressed
// encoding, not the whole (a 4 MiB batch's encoding was 4.6 MB held, now about 1 MiB).
func (p *push) spill(dst []byte) []byte {
	if p.out == nil || len(dst) < snappyPiece {
		return dst
	}
	k := 0
	for ; len(dst)-k >= snappyPiece; k += snappyPiece {
		p.out(dst[k : k+snappyPiece])
	}
	return dst[:copy(dst, dst[k:])]
}

// The protobuf wire appends, in a form the compiler inlines: a push writes about ten varints per
// entry (tags, lengths, the timestamp), most of them one or two bytes, and a call to protowire's
// for each was 2% of the ceiling's instructions. Same bytes as protowire's; appendBytes writes a
// length-prefixed field from a string or a slice alike.

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return appendVarint(b, protowire.EncodeTag(num, typ))
}

func appendBytes[T ~string | ~[]byte](b []byte, v T) []byte {
	return append(appendVarint(b, uint64(len(v))), v...)
}

func (p *push) appendProtoEntry(dst []byte, it *item) []byte {
	e := &p.entries[it.idx]
	dst = appendTag(dst, fieldStreamEntries, protowire.BytesType)
	dst = appendVarint(dst, uint64(it.body))

	sec, nsec := splitNanos(it.ns)
	dst = appendTag(dst, fieldEntryTime, protowire.BytesType)
	dst = appendVarint(dst, uint64(timestampBodySize(it.ns)))
	if sec != 0 {
		dst = appendTag(dst, fieldTimeSeconds, protowire.VarintType)
		dst = appendVarint(dst, uint64(sec))
	}
	if nsec != 0 {
		dst = appendTag(dst, fieldTimeNanos, protowire.VarintType)
		dst = appendVarint(dst, uint64(nsec))
	}
	if it.line > 0 {
		dst = appendTag(dst, fieldEntryLine, protowire.BytesType)
		dst = appendBytes(dst, e.Line[:it.line])
	}
	for _, m := range e.Metadata {
		dst = appendProtoPair(dst, m.Name, m.Value)
	}
	if p.marked(e, it) {
		var num [20]byte
		v := strconv.AppendInt(num[:0], int64(len(e.Line)), 10)
		dst = appendTag(dst, fieldEntryMetadata, protowire.BytesType)
		dst = appendVarint(dst, uint64(protowire.SizeTag(fieldPairName)+protowire.SizeBytes(len(TruncatedMetadataName))+
			protowire.SizeTag(fieldPairValue)+protowire.SizeBytes(len(v))))
		dst = appendTag(dst, fieldPairName, protowire.BytesType)
		dst = appendBytes(dst, TruncatedMetadataName)
		dst = appendTag(dst, fieldPairValue, protowire.BytesType)
		dst = appendBytes(dst, v)
	}
	return dst
}

func appendProtoPair(dst []byte, name, value string) []byte {
	dst = appendTag(dst, fieldEntryMetadata, protowire.BytesType)
	dst = appendVarint(dst, uint64(pairBodySize(name, value)))
	if name != "" {
		dst = appendTag(dst, fieldPairName, protowire.BytesType)
		dst = appendBytes(dst, name)
	}
	if value != "" {
		dst = appendTag(dst, fieldPairValue, protowire.BytesType)
		dst = appendBytes(dst, value)
	}
	return dst
}

// appendJSON appends Loki's v1 JSON push body for items to dst.
func (p *push) appendJSON(dst []byte, items []item) []byte {
	dst = append(dst, `{"streams":[`...)
	for i := 0; i < len(items); {
		sid := items[i].stream
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"stream":{`...)
		for k, l := range p.labels(sid).pairs() {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = jsonenc.AppendString(dst, l.Name, jsonenc.EscapedFFFD)
			dst = append(dst, ':')
			dst = jsonenc.AppendString(dst, l.Value, jsonenc.EscapedFFFD)
		}
		dst = append(dst, `},"values":[`...)
		j := i
		for ; j < len(items) && items[j].stream == sid; j++ {
			if j > i {
				dst = append(dst, ',')
			}
			dst = p.spill(p.appendJSONEntry(dst, &items[j]))
		}
		dst = append(dst, "]}"...)
		i = j
	}
	return append(dst, "]}"...)
}

func (p *push) appendJSONEntry(dst []byte, it *item) []byte {
	e := &p.entries[it.idx]
	dst = append(dst, `["`...)
	dst = strconv.AppendInt(dst, it.ns, 10)
	dst = append(dst, `",`...)
	dst = jsonenc.AppendString(dst, e.Line[:it.line], jsonenc.EscapedFFFD)
	dst = append(dst, ",{"...)
	for i, m := range e.Metadata {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.AppendString(dst, m.Name, jsonenc.EscapedFFFD)
		dst = append(dst, ':')
		dst = jsonenc.AppendString(dst, m.Value, jsonenc.EscapedFFFD)
	}
	if p.marked(e, it) {
		if len(e.Metadata) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"`+TruncatedMetadataName+`":"`...)
		dst = strconv.AppendInt(dst, int64(len(e.Line)), 10)
		dst = append(dst, '"')
	}
	return append(dst, "}]"...)
}

// wireBuf is a request body shared by every attempt of a request. The HTTP
// transport may still read a body after the round trip returns, so the buffer
// goes back to the pool only when the owner and every reader have let go.
type wireBuf struct {
	b    []byte
	refs atomic.Int32
	home *atomic.Pointer[wireBuf] // the client's spare slot
}

var wirePool = sync.Pool{New: func() any { return new(wireBuf) }}

func (c *Client) getWire() *wireBuf {
	w := c.spareWire.Swap(nil)
	if w == nil {
		w = wirePool.Get().(*wireBuf)
	}
	w.home = &c.spareWire
	w.refs.Store(1)
	return w
}

func (w *wireBuf) release() {
	if w.refs.Add(-1) != 0 {
		return
	}
	if cap(w.b) > maxPooledBuffer {
		return
	}
	w.b = w.b[:0]
	if w.home != nil && w.home.CompareAndSwap(nil, w) {
		return
	}
	wirePool.Put(w)
}

// reader returns a new reader over the body; closing it releases its hold.
func (w *wireBuf) reader() io.ReadCloser {
	w.refs.Add(1)
	r := &wireReader{w: w}
	r.Reset(w.b)
	return r
}

type wireReader struct {
	bytes.Reader
	w      *wireBuf
	closed atomic.Bool
}

func (r *wireReader) Close() error {
	if r.closed.CompareAndSwap(false, true) {
		r.w.release()
	}
	return nil
}

// gzipPool recycles gzip writers for the JSON encoding.
var gzipPool = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

type appendWriter struct{ b []byte }

func (a *appendWriter) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// snappyPiece is how much of a body is snappy-compressed at a time. A snappy block is a length
// and a sequence of literals and back-references; the encoder's output for consecutive pieces,
// each without its own length, is the block of the whole (each piece refers only to itself).
// Compressing by pieces needs a piece's worst case of working memory, not the whole body's
// (MaxEncodedLen, 1.17 times the body), and the encoding is compressed as it is produced (see
// push.encode), so a push holds its compressed form and about two pieces more. Pieces of
// 256 KiB compress as well as the whole (a 4 MiB push of EventLogFile-like entries: to 0.131
// of its size; the whole at once 0.137, pieces of 1 MiB 0.135, of 64 KiB 0.136).
const snappyPiece = 256 << 10

// appendSnappyPiece appends the snappy elements of src (at most snappyPiece bytes), without a
// block length, compressing in *piece.
func appendSnappyPiece(dst, src []byte, piece *[]byte) []byte {
	if need := s2.MaxEncodedLen(len(src)); cap(*piece) < need {
		*piece = make([]byte, need)
	}
	b := s2.EncodeSnappy((*piece)[:cap(*piece)], src)
	_, h := binary.Uvarint(b) // the piece's own length
	return append(dst, b[h:]...)
}
