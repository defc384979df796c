package file_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/file"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// Child-process modes of the test binary (see TestMain).
const (
	envWorker = "SF2LOKI_FILE_TEST_WORKER" // run storetest.Worker against a path
	envProbe  = "SF2LOKI_FILE_TEST_PROBE"  // run one store operation and report its error class
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envWorker) != "":
		os.Exit(workerMain())
	case os.Getenv(envProbe) != "":
		os.Exit(probeMain())
	}
	os.Exit(m.Run())
}

func newBackend(t *testing.T) store.Backend {
	b, err := file.New(file.Options{Path: filepath.Join(t.TempDir(), "state", "state.json")})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformanceFile(t *testing.T) { storetest.Run(t, newBackend) }

func TestConcurrencyFileGoroutines(t *testing.T) {
	storetest.RunConcurrency(t, newBackend, 8, 10, storetest.Iterations(3))
}

// workerResult is what a worker process prints.
type workerResult struct {
	Outcomes []storetest.Outcome `json:"outcomes"`
	Writes   []storetest.Write   `json:"writes"`
}

func workerMain() int {
	path := os.Getenv(envWorker)
	rounds, _ := strconv.Atoi(os.Getenv("SF2LOKI_FILE_TEST_ROUNDS"))
	seed, _ := strconv.ParseUint(os.Getenv("SF2LOKI_FILE_TEST_SEED"), 10, 64)
	b, err := file.New(file.Options{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	chain := &storetest.Chain{}
	rec := &recordingChain{Recorder: storetest.Recorder{Backend: b, Chain: chain}}
	out := storetest.Worker(context.Background(), storetest.NewStore(rec), "pid"+strconv.Itoa(os.Getpid()), rounds, seed)
	if err := json.NewEncoder(os.Stdout).Encode(workerResult{Outcomes: out, Writes: rec.writes}); err != nil {
		return 1
	}
	return 0
}

// recordingChain keeps the writes in order for printing.
type recordingChain struct {
	storetest.Recorder
	writes []storetest.Write
}

func (r *recordingChain) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	v, err := r.Backend.Store(ctx, data, expect)
	if err == nil {
		r.writes = append(r.writes, storetest.Write{Expect: expect, Version: v, Data: data})
	}
	return v, err
}

// TestConcurrencyFileProcesses runs 8 separate processes (this test binary re-executed)
// against one file: flock and the fence must hold across processes.
func TestConcurrencyFileProcesses(t *testing.T) {
	runProcesses(t, func(t *testing.T) []string {
		return []string{filepath.Join(t.TempDir(), "state.json")}
	})
}

// TestConcurrencyFileProcessesThroughASymlink runs the processes of
// TestConcurrencyFileProcesses against one document reached two ways: half open a symlink
// (made before the document exists, as for a first run), half the file it points to. They
// write one document under one lock: the fence and the chain of versions hold across both.
func TestConcurrencyFileProcessesThroughASymlink(t *testing.T) {
	runProcesses(t, func(t *testing.T) []string {
		target, link := linkedPaths(t)
		return []string{link, target}
	})
}

// linkedPaths returns the path of a document that does not exist yet and the path of a
// symlink to it in another directory, the link relative as a hand-made one often is
// (var/state.json -> ../data/state.json).
func linkedPaths(t *testing.T) (target, link string) {
	t.Helper()
	root := t.TempDir()
	for _, dir := range []string{"data", "var"} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	target, link = filepath.Join(root, "data", "state.json"), filepath.Join(root, "var", "state.json")
	if err := os.Symlink(filepath.Join("..", "data", "state.json"), link); err != nil {
		t.Fatal(err)
	}
	return target, link
}

// runProcesses runs 8 worker processes per iteration, worker i on the path i%len(paths) of
// the iteration's paths, and checks the fence and the invariants over what they all wrote.
func runProcesses(t *testing.T, iterationPaths func(t *testing.T) []string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var fencedClaims, fencedCommits int
	for it := range storetest.Iterations(3) {
		paths := iterationPaths(t)
		cmds := make([]*exec.Cmd, 8)
		outs := make([]*bytes.Buffer, 8)
		for i := range cmds {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), envWorker+"="+paths[i%len(paths)], "SF2LOKI_FILE_TEST_ROUNDS=8",
				"SF2LOKI_FILE_TEST_SEED="+strconv.Itoa(it*100+i))
			outs[i] = &bytes.Buffer{}
			cmd.Stdout, cmd.Stderr = outs[i], os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[i] = cmd
		}
		var outcomes []storetest.Outcome
		var writes []storetest.Write
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("worker %d: %v", i, err)
			}
			var res workerResult
			if err := json.Unmarshal(outs[i].Bytes(), &res); err != nil {
				t.Fatalf("worker %d output: %v", i, err)
			}
			outcomes = append(outcomes, res.Outcomes...)
			writes = append(writes, res.Writes...)
		}
		fc, fm, err := storetest.CheckOutcomes(outcomes)
		if err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		if err := storetest.VerifyWrites(writes); err != nil {
			t.Fatalf("iteration %d: invariants over %d versions: %v", it, len(writes), err)
		}
		fencedClaims += fc
		fencedCommits += fm
	}
	if fencedClaims == 0 || fencedCommits == 0 {
		t.Fatalf("no contention across processes (fenced claims %d, commits %d)", fencedClaims, fencedCommits)
	}
	t.Logf("fenced claims %d, fenced commits %d", fencedClaims, fencedCommits)
}

// TestLegacyPythonFileMigration reads a document exactly as the Python file store wrote it.
func TestLegacyPythonFileMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	py := "{\"eventlogfile:Login\": \"2026-07-01T00:00:00.000+0000\", \"org=emea:pubsub:/event/ApiEventStream\": \"AAAAAAABRQ8=\", \"__fence_epoch__\": 41}"
	if err := os.WriteFile(path, []byte(py), 0o640); err != nil {
		t.Fatal(err)
	}
	b, err := file.New(file.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.NewStore(b)
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Legacy || snap.Floor() != 41 {
		t.Fatalf("legacy=%v floor=%d, want legacy with floor 41", snap.Legacy, snap.Floor())
	}
	if _, err := st.Claim(ctx, storetest.Req(snap.Floor()+1, "go"), snap); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, legacy, err := store.Decode(path, data)
	if err != nil || legacy || doc.Schema != 2 || doc.Fence.Epoch != 42 {
		t.Fatalf("after migration: %v legacy=%v %s", err, legacy, data)
	}
	if got := string(doc.Checkpoints["org=emea:pubsub:/event/ApiEventStream"].Value); got != `"AAAAAAABRQ8="` {
		t.Fatalf("multi-org key did not travel verbatim: %s", data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode changed to %v", fi.Mode().Perm())
	}
}

func TestNewDocumentModeAndNoLockHeldAfterWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "d", "state.json")
	b, err := file.New(file.Options{Path: path, Mode: 0o640})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store(ctx, []byte("{}"), ""); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("new document mode %v, want 0640 (%v)", fi.Mode().Perm(), err)
	}
	f, err := os.Open(b.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the lock is still held after the write returned: %v", err)
	}
}

func TestLockHeldElsewhereIsUnavailable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	b, err := file.New(file.Options{Path: path, LockWait: 50e6})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(b.LockPath(), os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store(ctx, []byte("{}"), ""); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write while another process holds the lock: got %v, want ErrUnavailable", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the document was written without the lock")
	}
}

// --- permission cases: the store runs in a child process as another uid when we are root
// (CI), so that file modes actually bite.

const nobody = 65534

func probeMain() int {
	path := os.Getenv(envProbe)
	op := os.Getenv("SF2LOKI_FILE_TEST_OP")
	b, err := file.New(file.Options{Path: path})
	if err == nil {
		st := storetest.NewStore(b)
		var snap store.Snapshot
		snap, err = st.Read(context.Background())
		if err == nil && op == "claim" {
			_, err = st.Claim(context.Background(), storetest.Req(snap.Floor()+1, "probe"), snap)
		}
	}
	class := "ok"
	for _, c := range []struct {
		name string
		err  error
	}{{"permission", store.ErrPermission}, {"corrupt", store.ErrCorrupt}, {"unavailable", store.ErrUnavailable}} {
		if errors.Is(err, c.err) {
			class = c.name
			break
		}
	}
	if class == "ok" && err != nil {
		class = "other"
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"class": class, "error": msg})
	return 0
}

// runAs runs one store operation on path as uid (in a child process) and returns the
// error class and message.
func runAs(t *testing.T, uid int, path, op string) (class, msg string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary sits in a 0700 build directory: copy it where uid can execute it.
	dir, err := os.MkdirTemp("", "sf2loki-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "probe.test")
	src, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{envProbe + "=" + path, "SF2LOKI_FILE_TEST_OP=" + op, "HOME=/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe as uid %d: %v", uid, err)
	}
	var res map[string]string
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("probe output %q: %v", out, err)
	}
	return res["class"], res["error"]
}

// permDir returns a world-traversable directory for permission cases.
func permDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "sf2loki-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the store as another uid (CI runs as root)")
	}
}

// Scenario 46: a state file another user rewrote with mode 0600 is a permission error that
// names the file, not "absent" and not "corrupt".
func TestPermissionDeniedReadNamesFile(t *testing.T) {
	requireRoot(t)
	path := filepath.Join(permDir(t), "state.json")
	if err := os.WriteFile(path, []byte(`{"schema":2,"checkpoints":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	class, msg := runAs(t, nobody, path, "read")
	if class != "permission" || !bytes.Contains([]byte(msg), []byte(path)) {
		t.Fatalf("read of a 0600 root file as uid %d: class %q msg %q; want permission naming the file", nobody, class, msg)
	}
}

func TestPermissionDeniedWriteIsDistinct(t *testing.T) {
	requireRoot(t)
	dir := permDir(t)
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte(`{"schema":2,"checkpoints":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	class, msg := runAs(t, nobody, path, "claim")
	if class != "permission" {
		t.Fatalf("claim in a directory uid %d cannot write: class %q msg %q; want permission", nobody, class, msg)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the document changed")
	}
}

// A write as another user must not silently take the document over.
func TestWriteRefusesToChangeOwner(t *testing.T) {
	requireRoot(t)
	dir := permDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte(`{"schema":2,"checkpoints":{}}`), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	class, msg := runAs(t, nobody, path, "claim")
	if class != "permission" || !bytes.Contains([]byte(msg), []byte("owner")) {
		t.Fatalf("claim of a root-owned file as uid %d: class %q msg %q; want a permission error about the owner", nobody, class, msg)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("owner changed: %v", err)
	}
}

func TestWriteKeepsModeAndOwner(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	path := filepath.Join(permDir(t), "state.json")
	if err := os.WriteFile(path, []byte(`{"schema":2,"checkpoints":{}}`), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	b, err := file.New(file.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.NewStore(b)
	snap, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(ctx, storetest.Req(1, "root"), snap); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sys := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o640 || sys.Uid != nobody || sys.Gid != nobody {
		t.Fatalf("after a write by root: mode %v uid %d gid %d; want 0640 %d %d", fi.Mode().Perm(), sys.Uid, sys.Gid, nobody, nobody)
	}
}

func TestUnreadableDirectoryEntryIsNotAbsent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.Mkdir(path, 0o755); err != nil { // a directory where the file should be
		t.Fatal(err)
	}
	b, err := file.New(file.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := storetest.NewStore(b).Read(ctx)
	if err == nil || snap.Absent {
		t.Fatalf("a directory in place of the document read as %+v, %v; want an error", snap, err)
	}
}

// A state path that is a symlink to the document (/var/lib/sf2loki/state.json ->
// /data/state.json) stays a link: writes replace the file it points to, a store opened on that
// file sees them, and the two stores' conditional writes exclude each other (one lock).
func TestSymlinkedPathWritesThroughToTheTarget(t *testing.T) {
	ctx := context.Background()
	target, link := linkedPaths(t)
	viaLink, err := file.New(file.Options{Path: link, LockWait: 50e6})
	if err != nil {
		t.Fatal(err)
	}
	viaTarget, err := file.New(file.Options{Path: target, LockWait: 50e6})
	if err != nil {
		t.Fatal(err)
	}
	stillALink := func(when string) {
		t.Helper()
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s: the state path is no longer a symlink (%v, %v)", when, fi.Mode(), err)
		}
	}
	holds := func(when string, want []byte) {
		t.Helper()
		if got, err := os.ReadFile(target); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: the target holds %q (%v), want %q", when, got, err, want)
		}
	}

	// The first write, through a link to a document that does not exist yet.
	v1, err := viaLink.Store(ctx, []byte("one"), "")
	if err != nil {
		t.Fatal(err)
	}
	stillALink("after the first write")
	holds("after the first write", []byte("one"))
	// A commit through the link.
	v2, err := viaLink.Store(ctx, []byte("two"), v1)
	if err != nil {
		t.Fatal(err)
	}
	stillALink("after a commit")
	holds("after a commit", []byte("two"))
	if data, v, err := viaTarget.Load(ctx); err != nil || string(data) != "two" || v != v2 {
		t.Fatalf("the store on the target loads %q %q %v, want %q %q", data, v, err, "two", v2)
	}
	// A commit through the target is seen through the link, and fences a stale one there.
	v3, err := viaTarget.Store(ctx, []byte("three"), v2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := viaLink.Store(ctx, []byte("stale"), v2); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a commit through the link on a version the target replaced: got %v, want ErrConflict", err)
	}
	holds("after a stale commit", []byte("three"))

	// While either store is inside its read-compare-write section (its lock held), the other
	// cannot enter its own.
	for _, c := range []struct {
		name           string
		holder, writer *file.Backend
	}{{"the target's lock held, a write through the link", viaTarget, viaLink}, {"the link's lock held, a write to the target", viaLink, viaTarget}} {
		f, err := os.OpenFile(c.holder.LockPath(), os.O_RDONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		_, err = c.writer.Store(ctx, []byte("unlocked"), v3)
		_ = f.Close()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%s: got %v, want ErrUnavailable", c.name, err)
		}
		holds(c.name, []byte("three"))
	}

	// Deleting through the link deletes the document and keeps the link.
	if err := viaLink.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	stillALink("after a delete")
	if _, _, err := viaTarget.Load(ctx); !errors.Is(err, store.ErrAbsent) {
		t.Fatalf("the store on the target after a delete through the link: got %v, want ErrAbsent", err)
	}
}

// TestDotDotAfterASymlinkIsTakenAsTheSystemDoes: in a path whose '..' follows a symlinked
// directory (dir/link/../state.json, link -> real/sub), the '..' leaves the link's target, as
// the system takes it: the document is real/state.json, not dir/state.json as a lexical clean
// of the path reads it. Resolve, which the configuration's check of shared documents uses too,
// names the same file the store writes.
func TestDotDotAfterASymlinkIsTakenAsTheSystemDoes(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "real", "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("real", "sub"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	path := dir + "/link/../state.json"
	b, err := file.New(file.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store(context.Background(), []byte("doc"), ""); err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(filepath.Join(dir, "real"))
	if err != nil {
		t.Fatal(err)
	}
	want = filepath.Join(want, "state.json")
	if got, err := os.ReadFile(want); err != nil || string(got) != "doc" {
		t.Fatalf("%s holds %q (%v); want the document there, where the system opens %s", want, got, err, path)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists (%v): the path was cleaned lexically", filepath.Join(dir, "state.json"), err)
	}
	if r, err := file.Resolve(path); err != nil || r != want {
		t.Fatalf("Resolve(%s) = %s, %v; want %s", path, r, err, want)
	}
}
