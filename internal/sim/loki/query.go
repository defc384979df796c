package loki

import (
	"slices"
)

// Entries returns every stored entry in arrival order.
func (s *Server) Entries() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entries)
}

// Count returns the number of stored entries (with CountOnly, the number
// accepted).
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.CountOnly {
		return s.accepted
	}
	return len(s.entries)
}

// Streams returns the canonical label strings of the streams holding stored
// entries, sorted, over all tenants.
func (s *Server) Streams() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, st := range s.streams {
		if len(st.idx) > 0 {
			out = append(out, s.entries[st.idx[0]].Stream)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Stream returns the stored entries of the stream whose labels are given in
// any valid label-string form (order and spacing do not matter), in arrival
// order, over all tenants. An unparseable selector returns nil.
func (s *Server) Stream(labels string) []Entry {
	pairs, err := parseLabels(labels)
	if err != nil {
		return nil
	}
	want, _, _ := s.checkStream(pairs)
	canon := formatLabels(want)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Entry
	for _, e := range s.entries {
		if e.Stream == canon {
			out = append(out, e)
		}
	}
	return out
}

// Duplicates returns the duplicates (same stream, timestamp and line as a
// stored entry, whatever their structured metadata) that were received and
// silently skipped, as Loki does.
func (s *Server) Duplicates() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.dupes)
}

// Rejected returns the refused entries in the order they were refused.
func (s *Server) Rejected() []Rejection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rejected)
}

// RejectedCount returns how many entries were refused for reason ("" = all).
func (s *Server) RejectedCount(reason string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.rejected {
		if reason == "" || r.Reason == reason {
			n++
		}
	}
	return n
}

// Requests returns every request answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Reset forgets stored entries, duplicates, rejections, requests and stream
// state; faults are kept.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries, s.dupes, s.rejected, s.requests = nil, nil, nil, nil
	s.streams = make(map[string]*streamState)
	s.accepted = 0
}
