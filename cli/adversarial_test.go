package cli

// The adversarial suite (the scenario map of docs/testing.md) runs real `sf2loki run-once` and
// `sf2loki schedule` processes: TestMain re-executes this test binary as the sf2loki command
// line when SF2LOKI_TEST_CHILD=1, with fault seams installed from environment variables. The
// parent test runs the simulated org and the strict receiver in-process, writes a
// configuration, starts the children, and afterwards checks the invariants over the merged
// per-process journals of every store write.
//
// Child environment (all optional besides SF2LOKI_TEST_CHILD):
//
//	SF2LOKI_TEST_JOURNAL    file receiving one JSON line per document load, successful store
//	                        write (before any injected crash) and step reached
//	SF2LOKI_TEST_CRASH      step[:n]: SIGKILL self at the n-th time the step is reached
//	SF2LOKI_TEST_STOP       step[:n]: SIGSTOP self there (the parent sends SIGCONT)
//	SF2LOKI_TEST_SLEEP      step[:n]:duration: sleep there (the lease keeps being renewed)
//	SF2LOKI_TEST_LOST_ACK   write numbers (1-based, comma-separated) whose write lands but
//	                        whose acknowledgement is lost (ErrUnavailable); kind:n counts only
//	                        writes of that kind (commit:2 is the second commit)
//	SF2LOKI_TEST_CONFLICT   write numbers refused with a spurious precondition failure
//	SF2LOKI_TEST_CLOCK      wall-clock offset of the lease and the store (e.g. 3s, -10m)
//
// Steps: the job's (after_claim, mid_pull, after_push, before_commit, after_commit,
// before_release), after_read (the first document read, before the lease is acquired),
// after_acquire (the lease was acquired; for the store lease that write was also the claim)
// and mid_commit (a commit's write has landed, its acknowledgement not yet returned).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lease"
	"github.com/sf2loki/sf2loki/store"
)

// Environment of a child process.
const (
	envChild    = "SF2LOKI_TEST_CHILD"
	envJournal  = "SF2LOKI_TEST_JOURNAL"
	envCrash    = "SF2LOKI_TEST_CRASH"
	envStop     = "SF2LOKI_TEST_STOP"
	envSleep    = "SF2LOKI_TEST_SLEEP"
	envLostAck  = "SF2LOKI_TEST_LOST_ACK"
	envConflict = "SF2LOKI_TEST_CONFLICT"
	envClock    = "SF2LOKI_TEST_CLOCK"
)

// Steps besides the job's.
const (
	stepAfterRead    = "after_read"
	stepAfterAcquire = "after_acquire"
	stepMidCommit    = "mid_commit"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(childMain(os.Args))
	}
	testenv.Main(m)
}

// childMain runs the sf2loki command line with the seams the environment asks for.
func childMain(args []string) int {
	f, err := childFaultsFromEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "adversarial child: %v\n", err)
		return ExitInternal
	}
	defer f.close()
	testHook = func(s job.Step) { f.step(string(s)) }
	testWrapBackend = func(b store.Backend) store.Backend { return &journalBackend{Backend: b, f: f} }
	testWrapLease = func(l lease.Lease) lease.Lease { return &hookedLease{Lease: l, f: f} }
	if f.clock != 0 {
		off := f.clock
		testNow = func() time.Time { return time.Now().Add(off) }
	}
	return Main(args, os.Stdout, os.Stderr)
}

// stepAt names the n-th occurrence of a step.
type stepAt struct {
	step string
	n    int
	d    time.Duration // for SLEEP
}

func (s stepAt) matches(step string, n int) bool { return s.step == step && s.n == n }

func parseStepAt(v string, withDuration bool) (stepAt, error) {
	if v == "" {
		return stepAt{}, nil
	}
	parts := strings.Split(v, ":")
	s := stepAt{step: parts[0], n: 1}
	if len(parts) > 1 && parts[1] != "" {
		n, err := strconv.Atoi(parts[1])
		if err != nil || n < 1 {
			return s, fmt.Errorf("%q: occurrence must be a positive number", v)
		}
		s.n = n
	}
	if withDuration {
		if len(parts) != 3 {
			return s, fmt.Errorf("%q: want step:n:duration", v)
		}
		d, err := time.ParseDuration(parts[2])
		if err != nil {
			return s, fmt.Errorf("%q: %w", v, err)
		}
		s.d = d
	}
	return s, nil
}

// parseNumbers reads "n,kind:n,...": write numbers, counted over every write ("") or over
// the writes of one kind.
func parseNumbers(v string) (map[string]map[int]bool, error) {
	out := map[string]map[int]bool{}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		kind, num, ok := strings.Cut(p, ":")
		if !ok {
			kind, num = "", p
		}
		n, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", v, err)
		}
		if out[kind] == nil {
			out[kind] = map[int]bool{}
		}
		out[kind][n] = true
	}
	return out, nil
}

// childFaults is the fault plan of one child process and its journal.
type childFaults struct {
	// mu serializes journaled writes with self-inflicted kills, so that a SIGKILL never falls
	// between a write landing and its journal line (the renewer writes concurrently).
	mu       sync.Mutex
	journal  *os.File
	seq      int
	crash    stepAt
	stop     stepAt
	sleep    stepAt
	lostAck  map[string]map[int]bool
	conflict map[string]map[int]bool
	clock    time.Duration
	writes   map[string]int // by kind, "" for all
	loads    int
	counts   map[string]int
}

func childFaultsFromEnv() (*childFaults, error) {
	f := &childFaults{counts: map[string]int{}, writes: map[string]int{}}
	var err error
	if f.crash, err = parseStepAt(os.Getenv(envCrash), false); err != nil {
		return nil, err
	}
	if f.stop, err = parseStepAt(os.Getenv(envStop), false); err != nil {
		return nil, err
	}
	if f.sleep, err = parseStepAt(os.Getenv(envSleep), true); err != nil {
		return nil, err
	}
	if f.lostAck, err = parseNumbers(os.Getenv(envLostAck)); err != nil {
		return nil, err
	}
	if f.conflict, err = parseNumbers(os.Getenv(envConflict)); err != nil {
		return nil, err
	}
	if v := os.Getenv(envClock); v != "" {
		if f.clock, err = time.ParseDuration(v); err != nil {
			return nil, fmt.Errorf("%s: %w", envClock, err)
		}
	}
	if p := os.Getenv(envJournal); p != "" {
		if f.journal, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (f *childFaults) close() {
	if f.journal != nil {
		_ = f.journal.Close()
	}
}

// journalEntry is one line of a child's journal.
type journalEntry struct {
	Op  string `json:"op"` // load, write, conflict (injected, nothing written), step
	PID int    `json:"pid"`
	// Object names the document (two documents: a backfill's and the live one).
	Object string `json:"object,omitempty"`
	Seq    int    `json:"seq"`
	Step   string `json:"step,omitempty"`
	N      int    `json:"n,omitempty"`
	// Kind of a write: claim, commit, renew, release.
	Kind    string        `json:"kind,omitempty"`
	Expect  store.Version `json:"expect,omitempty"`
	Version store.Version `json:"version,omitempty"`
	Data    []byte        `json:"data,omitempty"`
	LostAck bool          `json:"lost_ack,omitempty"`
	At      time.Time     `json:"at"`
}

// record appends one journal line; the caller holds f.mu.
func (f *childFaults) record(e journalEntry) {
	if f.journal == nil {
		return
	}
	f.seq++
	e.PID, e.Seq, e.At = os.Getpid(), f.seq, time.Now()
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	if _, err := f.journal.Write(append(b, '\n')); err != nil {
		panic(err)
	}
}

// kill ends the process at once, as a crash would; the caller holds f.mu.
func (f *childFaults) kill() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	for {
		time.Sleep(time.Hour)
	}
}

// step is reached: journal it, then crash, stop or sleep there if planned.
func (f *childFaults) step(s string) {
	f.mu.Lock()
	sleep := f.reached(s)
	f.mu.Unlock()
	if sleep > 0 {
		time.Sleep(sleep)
	}
}

// reached journals a step and crashes or stops there if planned; it returns how long to
// sleep there. The caller holds f.mu: a stop never falls inside a document write of another
// goroutine (a process paused inside one would hold the file store's lock and block every
// other writer until it is continued).
func (f *childFaults) reached(s string) time.Duration {
	f.counts[s]++
	n := f.counts[s]
	f.record(journalEntry{Op: "step", Step: s, N: n})
	if f.crash.matches(s, n) {
		f.kill()
	}
	if f.stop.matches(s, n) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		time.Sleep(50 * time.Millisecond) // the stop takes effect before the lock is let go
	}
	if f.sleep.matches(s, n) {
		return f.sleep.d
	}
	return 0
}

// hookedLease reports the after_acquire step.
type hookedLease struct {
	lease.Lease
	f *childFaults
}

func (l *hookedLease) Acquire(ctx context.Context, floor uint64, wait time.Duration) (lease.Grant, error) {
	g, err := l.Lease.Acquire(ctx, floor, wait)
	if err == nil {
		l.f.step(stepAfterAcquire)
	}
	return g, err
}

// AcquireFrom keeps the single-read acquisition of leases that live in the document.
func (l *hookedLease) AcquireFrom(ctx context.Context, snap store.Snapshot, floor uint64, wait time.Duration) (lease.Grant, error) {
	sa, ok := l.Lease.(lease.SnapshotAcquirer)
	if !ok {
		return l.Acquire(ctx, floor, wait)
	}
	g, err := sa.AcquireFrom(ctx, snap, floor, wait)
	if err == nil {
		l.f.step(stepAfterAcquire)
	}
	return g, err
}

// journalBackend journals every load and successful write, and injects lost
// acknowledgements, spurious conflicts and the mid_commit crash.
type journalBackend struct {
	store.Backend
	f *childFaults
}

func (b *journalBackend) Load(ctx context.Context) ([]byte, store.Version, error) {
	data, v, err := b.Backend.Load(ctx)
	f := b.f
	f.mu.Lock()
	f.record(journalEntry{Op: "load", Object: b.String(), Version: v})
	f.loads++
	var sleep time.Duration
	if f.loads == 1 {
		sleep = f.reached(stepAfterRead)
	}
	f.mu.Unlock()
	if sleep > 0 {
		time.Sleep(sleep)
	}
	return data, v, err
}

func (b *journalBackend) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	f := b.f
	f.mu.Lock()
	defer f.mu.Unlock()
	kind := writeKind(data)
	f.writes[""]++
	f.writes[kind]++
	n, nk := f.writes[""], f.writes[kind]
	if f.conflict[""][n] || f.conflict[kind][nk] {
		f.record(journalEntry{Op: "conflict", Object: b.String(), Kind: kind, Expect: expect})
		return "", fmt.Errorf("%w: injected spurious precondition failure (write %d)", store.ErrConflict, n)
	}
	v, err := b.Backend.Store(ctx, data, expect)
	if err != nil {
		return v, err
	}
	lost := f.lostAck[""][n] || f.lostAck[kind][nk]
	f.record(journalEntry{Op: "write", Object: b.String(), Kind: kind, Expect: expect, Version: v, Data: data, LostAck: lost})
	if kind == "commit" {
		_ = f.reached(stepMidCommit) // crash or stop there; no sleep while holding f.mu
	}
	if lost {
		return "", fmt.Errorf("%w: injected lost acknowledgement (write %d landed)", store.ErrUnavailable, n)
	}
	return v, nil
}

// writeKind classifies a document write by what the writer changed: a claim starts a new
// stamp sequence, a release sets the embedded released flag, a commit moves last_commit_at to
// the write's own time, and a renewal does none of those.
func writeKind(data []byte) string {
	doc, _, err := store.Decode("journal", data)
	if err != nil || doc.Writer == nil {
		return "unknown"
	}
	switch {
	case doc.Writer.Seq == 0:
		return "claim"
	case doc.Fence != nil && doc.Fence.Released:
		return "release"
	case doc.LastCommitAt.Equal(doc.Writer.WrittenAt):
		return "commit"
	}
	return "renew"
}

// errNoReport is returned when a child printed no run report.
var errNoReport = errors.New("no run report on stdout")
