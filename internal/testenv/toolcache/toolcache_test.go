package toolcache

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// helloTool is a test-only tool: a tiny Go program built with `go build` in its own module.
// Each build increments builds and waits for ready before building (nil = no wait).
func helloTool(builds *atomic.Int32, ready <-chan struct{}) toolSpec {
	return toolSpec{name: "hello", version: "v0.0.1", build: func(ctx context.Context, b *buildEnv) error {
		builds.Add(1)
		if ready != nil {
			select {
			case <-ready:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		src := filepath.Join(b.dir, "src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/hello\n\ngo 1.24\n"), 0o644); err != nil {
			return err
		}
		prog := "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n"
		if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(prog), 0o644); err != nil {
			return err
		}
		return b.goCmd(ctx, src, nil, "build", "-o", filepath.Join(b.dir, "hello"), ".")
	}}
}

// waitCounter counts progress lines announcing a wait for another builder and closes reached
// once there are want of them.
type waitCounter struct {
	mu      sync.Mutex
	n, want int
	reached chan struct{}
}

func (w *waitCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n += bytes.Count(p, []byte("waiting for another process"))
	if w.n >= w.want {
		select {
		case <-w.reached:
		default:
			close(w.reached)
		}
	}
	return len(p), nil
}

// TestToolboxBuildsOnceUnderContention has several callers ensure the same tool at once. The
// build blocks until every other caller is waiting on the lock, so they truly contend; the tool
// must be built exactly once and every caller must get the same working executable.
func TestToolboxBuildsOnceUnderContention(t *testing.T) {
	const callers = 4
	var builds atomic.Int32
	waits := &waitCounter{want: callers - 1, reached: make(chan struct{})}
	tb := &Toolbox{Dir: t.TempDir(), Progress: waits, specs: []toolSpec{helloTool(&builds, waits.reached)}}

	results := make([]ToolResult, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { results[i], errs[i] = tb.Ensure(t.Context(), "hello") })
	}
	wg.Wait()

	if n := builds.Load(); n != 1 {
		t.Fatalf("built %d times, want exactly once", n)
	}
	built := 0
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if results[i].Path != results[0].Path {
			t.Fatalf("caller %d got %s, caller 0 got %s", i, results[i].Path, results[0].Path)
		}
		if results[i].Built {
			built++
		}
	}
	if built != 1 {
		t.Fatalf("%d callers report having built the tool, want 1", built)
	}
	out, err := exec.Command(results[0].Path).Output()
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		t.Fatalf("built tool output %q, %v; want hello", out, err)
	}
	if want := filepath.Join(tb.Dir, "hello-v0.0.1", "hello"); results[0].Path != want {
		t.Fatalf("path %s, want %s", results[0].Path, want)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(tb.Dir, ".build-*")); len(leftovers) != 0 {
		t.Fatalf("temporary build directories left behind: %v", leftovers)
	}

	// A later call, as from another test binary, finds it cached.
	again, err := tb.Ensure(t.Context(), "hello")
	if err != nil || again.Built || builds.Load() != 1 {
		t.Fatalf("second ensure: built=%v err=%v builds=%d; want cached", again.Built, err, builds.Load())
	}
}

// TestToolboxBuildsOnceAcrossProcesses runs the same ensure in two processes (this test binary
// re-executed) sharing one cache directory; the build count is kept in a file.
func TestToolboxBuildsOnceAcrossProcesses(t *testing.T) {
	if dir := os.Getenv("TESTENV_CHILD_CACHE"); dir != "" {
		tb := &Toolbox{Dir: dir, specs: []toolSpec{countingTool(filepath.Join(dir, "count"))}}
		if _, err := tb.Ensure(context.Background(), "counted"); err != nil {
			t.Fatal(err)
		}
		return
	}
	dir := t.TempDir()
	var cmds []*exec.Cmd
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestToolboxBuildsOnceAcrossProcesses$")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD_CACHE="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("child output:\n%s", out.String())
			}
		})
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	count, err := os.ReadFile(filepath.Join(dir, "count"))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(count); got != 1 {
		t.Fatalf("built %d times across two processes, want exactly once", got)
	}
	if !isExecutable(filepath.Join(dir, "counted-v1", "counted")) {
		t.Fatal("the tool is not in the cache")
	}
}

// countingTool appends a byte to countFile per build and holds the lock for a while, so the
// other process has to wait for it rather than finding the result already there.
func countingTool(countFile string) toolSpec {
	return toolSpec{name: "counted", version: "v1", build: func(ctx context.Context, b *buildEnv) error {
		f, err := os.OpenFile(countFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write([]byte{'x'}); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		return os.WriteFile(filepath.Join(b.dir, "counted"), []byte("#!/bin/sh\n"), 0o755)
	}}
}

// TestToolboxFailedBuildLeavesNoEntry checks that a failing build reports its log tail, leaves
// no cache entry and no temporary directory, and that a later good build succeeds.
func TestToolboxFailedBuildLeavesNoEntry(t *testing.T) {
	dir := t.TempDir()
	failing := toolSpec{name: "broken", version: "v1", build: func(ctx context.Context, b *buildEnv) error {
		return b.goCmd(ctx, b.dir, nil, "build", "./does-not-exist")
	}}
	tb := &Toolbox{Dir: dir, specs: []toolSpec{failing}}
	_, err := tb.Ensure(t.Context(), "broken")
	if err == nil {
		t.Fatal("a failing build reported success")
	}
	if !strings.Contains(err.Error(), "does-not-exist") {
		t.Fatalf("error does not show the build log tail: %v", err)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "broken-v1")); !os.IsNotExist(statErr) {
		t.Fatalf("failed build left a cache entry (stat: %v)", statErr)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "broken-v1.failed.log")); statErr != nil {
		t.Fatalf("failed build log not kept: %v", statErr)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".build-*")); len(leftovers) != 0 {
		t.Fatalf("temporary build directories left behind: %v", leftovers)
	}

	var builds atomic.Int32
	tb.specs = []toolSpec{helloTool(&builds, nil)}
	if r, err := tb.Ensure(t.Context(), "hello"); err != nil || !r.Built {
		t.Fatalf("good build after a failed one: built=%v err=%v", r.Built, err)
	}
}

func TestToolboxUnknownTool(t *testing.T) {
	_, err := (&Toolbox{Dir: t.TempDir()}).Ensure(t.Context(), "no-such-tool")
	if err == nil || !strings.Contains(err.Error(), "no-such-tool") {
		t.Fatalf("err = %v, want ErrUnknownTool naming the tool", err)
	}
}

func TestStagingModules(t *testing.T) {
	goMod := `module k8s.io/kubernetes

require (
	k8s.io/api v0.0.0
	github.com/foo/bar v1.2.3
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	github.com/foo/bar => github.com/foo/bar v1.2.4
)

replace k8s.io/kms => ./staging/src/k8s.io/kms
`
	got, err := stagingModules(goMod)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"k8s.io/api", "k8s.io/client-go", "k8s.io/kms"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stagingModules = %v, want %v", got, want)
	}
	if _, err := stagingModules("module x\n"); err == nil {
		t.Fatal("a go.mod without staging replacements was accepted")
	}
}

// TestToolboxSharedEntryBuildsOnce: two tools built together (kube-apiserver and
// kube-controller-manager) share one cache entry and one build; asking for the second after the
// first finds it built.
func TestToolboxSharedEntryBuildsOnce(t *testing.T) {
	var builds atomic.Int32
	build := func(_ context.Context, b *buildEnv) error {
		builds.Add(1)
		for _, name := range []string{"one", "two"} {
			if err := os.WriteFile(filepath.Join(b.dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				return err
			}
		}
		return nil
	}
	pair := []string{"one", "two"}
	tb := &Toolbox{Dir: t.TempDir(), specs: []toolSpec{
		{name: "one", version: "v1", entry: "pair", outputs: pair, build: build},
		{name: "two", version: "v1", entry: "pair", outputs: pair, build: build},
	}}
	first, err := tb.Ensure(t.Context(), "one")
	if err != nil || !first.Built {
		t.Fatalf("first tool: built=%v err=%v", first.Built, err)
	}
	second, err := tb.Ensure(t.Context(), "two")
	if err != nil || second.Built {
		t.Fatalf("second tool: built=%v err=%v, want found in the shared entry", second.Built, err)
	}
	if filepath.Dir(first.Path) != filepath.Dir(second.Path) || filepath.Base(filepath.Dir(first.Path)) != "pair-v1" {
		t.Errorf("paths %s and %s, want both in pair-v1", first.Path, second.Path)
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}

	// A build that misses one of its outputs leaves no entry.
	tb = &Toolbox{Dir: t.TempDir(), specs: []toolSpec{{name: "one", version: "v1", entry: "pair", outputs: []string{"one", "three"}, build: build}}}
	if _, err := tb.Ensure(t.Context(), "one"); err == nil || !strings.Contains(err.Error(), "three") {
		t.Errorf("a build without all its outputs: err %v, want one naming the missing executable", err)
	}
}
