package job

import (
	"context"
	"encoding/json"
	"time"
)

// dryEntry is one line of the dry-run output.
type dryEntry struct {
	Key        string            `json:"key"`
	Timestamp  time.Time         `json:"timestamp,omitzero"`
	Labels     string            `json:"labels,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Line       string            `json:"line,omitempty"`
	Cursor     json.RawMessage   `json:"cursor"`
	Skip       bool              `json:"skip,omitempty"`
	SkipReason string            `json:"skip_reason,omitempty"`
}

// dryRun pulls and shapes one batch from the stored cursors and prints it, without acquiring,
// claiming, pushing or committing.
func (r *run) dryRun(ctx context.Context) {
	cp, err := r.deps.Coordinator.Peek(ctx)
	if err != nil {
		r.end(OutcomeOf(err, false), err)
		return
	}
	intakeCtx, cancel := context.WithDeadline(ctx, r.deadline)
	defer cancel()
	streams := r.open(intakeCtx, cp)
	batches := make(chan *batch, 1)
	go r.pull(intakeCtx, streams, batches)
	enc := json.NewEncoder(r.opts.DryRunOut)
	for b := range batches {
		for _, it := range b.items {
			e := dryEntry{Key: it.ks.key, Cursor: it.rec.Cursor.JSON(), Skip: it.rec.Skip, SkipReason: it.rec.SkipReason}
			if !it.rec.Skip {
				e.Timestamp, e.Labels, e.Line = it.rec.Entry.Timestamp, it.rec.Entry.Labels.String(), it.rec.Entry.Line
				if len(it.rec.Entry.Metadata) > 0 {
					e.Metadata = map[string]string{}
					for _, m := range it.rec.Entry.Metadata {
						e.Metadata[m.Name] = m.Value
					}
				}
				r.rep.Records++
				r.rep.Bytes += int64(len(it.rec.Entry.Line))
				r.sourceReport(it.ks).Records++
			} else {
				r.sourceReport(it.ks).Skipped++
			}
			if err := enc.Encode(e); err != nil {
				r.end(OutcomeInternal, err)
				cancel()
				for range batches {
				}
				return
			}
		}
	}
	r.rep.CaughtUp = r.caughtUp
	if len(r.sourceErrs) > 0 {
		r.end(OutcomeUnavailable, r.sourceErrs[0])
		return
	}
	r.end(OutcomeDryRun, nil)
}
