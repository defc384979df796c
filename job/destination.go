package job

// DefaultDestination is how the run report and the metrics name the default destination
// (Deps.Sink) when it has no name (a single-tenant receiver).
const DefaultDestination = "default"

// DestinationLabel is how the run report and the metrics name a destination.
func DestinationLabel(name string) string {
	if name == "" {
		return DefaultDestination
	}
	return name
}

// DestinationReport is one destination's share of a run.
type DestinationReport struct {
	// Records and Bytes count the entries the destination accepted and their line bytes as
	// sent; Pushes the pushes it accepted entries of.
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	Pushes  int   `json:"pushes"`
	// Rejected counts entries the destination (or the client, by its rules) refused.
	Rejected int64 `json:"rejected,omitempty"`
}

// destination is a receiver of this run: the default one (index 0, Deps.Sink) and one per
// distinct Binding.Destination.
type destination struct {
	name string
	sink Pusher
}

// resolveDestinations builds the run's destinations and each binding's index into them.
func (r *run) resolveDestinations() {
	r.dests = []destination{{name: r.opts.Ordering.Destination, sink: r.deps.Sink}}
	r.bindingDest = make([]int, len(r.deps.Bindings))
	index := map[*Destination]int{}
	used := map[int]bool{}
	for i, b := range r.deps.Bindings {
		if b.Destination != nil {
			d, ok := index[b.Destination]
			if !ok {
				d = len(r.dests)
				index[b.Destination] = d
				r.dests = append(r.dests, destination{name: b.Destination.Name, sink: b.Destination.Sink})
			}
			r.bindingDest[i] = d
		}
		used[r.bindingDest[i]] = true
	}
	// The report breaks down by destination only when there is more than one.
	r.perDest = len(used) > 1
}

// destNames lists the destinations' names, by index.
func (r *run) destNames() []string {
	out := make([]string, len(r.dests))
	for i, d := range r.dests {
		out[i] = d.name
	}
	return out
}

// destReport returns the report of destination d, or nil when the report has no breakdown.
func (r *run) destReport(d int) *DestinationReport {
	if !r.perDest {
		return nil
	}
	name := DestinationLabel(r.dests[d].name)
	if r.rep.Destinations == nil {
		r.rep.Destinations = map[string]*DestinationReport{}
	}
	dr := r.rep.Destinations[name]
	if dr == nil {
		dr = &DestinationReport{}
		r.rep.Destinations[name] = dr
	}
	return dr
}
