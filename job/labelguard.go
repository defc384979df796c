package job

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/loki"
	"github.com/sf2loki/sf2loki/store"
)

// LabelValueCounterPrefix starts the names of the counters that hold, in the checkpoint
// document, the values of a guarded label admitted today: "label_value:<label>:<hash of the
// value>", with the UTC day as the counter's window. They are committed with the checkpoints
// through the epoch-conditioned writer, like the egress budget: a run that loses its lease
// commits none of its values, and a run that takes over counts a value it sees again once.
const LabelValueCounterPrefix = "label_value:"

// DefaultOverflowValue is the label value of entries past the cap when none is configured.
const DefaultOverflowValue = "__overflow__"

// OriginalMetadataSuffix names the structured metadata that keeps a label's own value when the
// label is set to the overflow value: "<label>_original".
const OriginalMetadataSuffix = "_original"

// LabelGuardOptions caps the distinct values of the promoted labels per UTC day. A zero
// MaxValuesPerDay turns the guard off.
type LabelGuardOptions struct {
	// Labels are the guarded label names (the labels promoted from record fields).
	Labels []string
	// MaxValuesPerDay is the number of distinct values each label may take per UTC day; the
	// entries with a value past it are shipped with the label set to Overflow and their own
	// value in structured metadata <label>_original.
	MaxValuesPerDay int
	// Overflow is the label value past the cap (default DefaultOverflowValue).
	Overflow string
}

// labelGuard applies LabelGuardOptions in one run.
type labelGuard struct {
	o       LabelGuardOptions
	now     func() time.Time
	day     string
	values  map[string]map[string]bool // label -> hashes of the values admitted today
	pending map[string]store.Counter   // admitted in this run, not committed yet
	stale   []string                   // counters of another day, deleted with the next commit
}

func newLabelGuard(o LabelGuardOptions, now func() time.Time, stored map[string]store.Counter) *labelGuard {
	if o.Overflow == "" {
		o.Overflow = DefaultOverflowValue
	}
	g := &labelGuard{o: o, now: now, values: map[string]map[string]bool{}, pending: map[string]store.Counter{}}
	g.day = g.today()
	for name, c := range stored {
		rest, ok := strings.CutPrefix(name, LabelValueCounterPrefix)
		if !ok {
			continue
		}
		label, hash, ok := strings.Cut(rest, ":")
		if !ok || c.Window != g.day {
			g.stale = append(g.stale, name)
			continue
		}
		g.admit(label, hash)
	}
	return g
}

func (g *labelGuard) today() string { return g.now().UTC().Format(time.DateOnly) }

func (g *labelGuard) admit(label, hash string) {
	if g.values[label] == nil {
		g.values[label] = map[string]bool{}
	}
	g.values[label][hash] = true
}

// apply sets the guarded labels of items past the day's cap to the overflow value, keeping
// their own value in structured metadata, and returns the entries changed per label.
func (g *labelGuard) apply(items []item) map[string]int64 {
	if day := g.today(); day != g.day {
		// A new UTC day: every value counts again; yesterday's counters go with the next commit.
		for label, hashes := range g.values {
			for h := range hashes {
				g.stale = append(g.stale, LabelValueCounterPrefix+label+":"+h)
			}
		}
		g.day, g.values, g.pending = day, map[string]map[string]bool{}, map[string]store.Counter{}
	}
	var over map[string]int64
	for i := range items {
		if items[i].rec.Skip {
			continue
		}
		e := &items[i].rec.Entry
		for _, label := range g.o.Labels {
			v, ok := e.Labels.Get(label)
			if !ok || v == g.o.Overflow {
				continue
			}
			sum := sha256.Sum256([]byte(v))
			h := hex.EncodeToString(sum[:8])
			if g.values[label][h] {
				continue
			}
			if len(g.values[label]) < g.o.MaxValuesPerDay {
				g.admit(label, h)
				g.pending[LabelValueCounterPrefix+label+":"+h] = store.Counter{Value: 1, Window: g.day}
				continue
			}
			e.Labels = e.Labels.With(loki.Label{Name: label, Value: g.o.Overflow})
			md := make([]loki.Label, 0, len(e.Metadata)+1)
			md = append(md, e.Metadata...)
			e.Metadata = append(md, loki.Label{Name: label + OriginalMetadataSuffix, Value: v})
			if over == nil {
				over = map[string]int64{}
			}
			over[label]++
		}
	}
	return over
}

// change adds the values admitted since the last commit to c, and removes the stale ones.
// A value of another day admitted again today keeps its counter name: the counter set with
// today's window replaces the stale one, which is then not deleted (a commit cannot both set
// and delete a counter).
func (g *labelGuard) change(c *store.Change) {
	if len(g.pending) > 0 {
		if c.Counters == nil {
			c.Counters = map[string]store.Counter{}
		}
		for name, v := range g.pending {
			c.Counters[name] = v
		}
	}
	for _, name := range g.stale {
		if _, set := c.Counters[name]; !set {
			c.DeleteCounters = append(c.DeleteCounters, name)
		}
	}
}

// committed forgets what the last commit wrote.
func (g *labelGuard) committed() {
	g.pending, g.stale = map[string]store.Counter{}, nil
}
