// Package toolcache builds the pinned real servers and tools of sf2loki's test suite once into a
// cache directory outside the repository, $XDG_CACHE_HOME/sf2loki-tools/<name>-<version>
// (~/.cache/sf2loki-tools/... when XDG_CACHE_HOME is unset), and finds them there.
//
// Builds run under an exclusive file lock per tool and write into a temporary directory that is
// renamed into place only when complete, so parallel test binaries never build a tool twice and
// an interrupted build never leaves a corrupt entry. Each entry keeps its build.log; a failed
// build leaves <name>-<version>.failed.log and reports its tail.
//
// It is separate from package testenv so that the sf2loki-tools command stays small.
package toolcache

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Names of the tools Ensure knows.
const (
	ToolVictoriaLogs          = "victoria-logs"
	ToolVersitygw             = "versitygw"
	ToolKubeAPIServer         = "kube-apiserver"
	ToolKubeControllerManager = "kube-controller-manager"
	ToolEtcd                  = "etcd"
	ToolHelm                  = "helm"
	ToolGolangciLint          = "golangci-lint"
	ToolGoreleaser            = "goreleaser"
	ToolCycloneDXGomod        = "cyclonedx-gomod"
	ToolKo                    = "ko"
	ToolLambdaRIE             = "aws-lambda-rie"
)

// Pinned versions of the tools built from the Go module proxy.
const (
	victoriaLogsVersion = "v1.52.1"
	versitygwVersion    = "v1.8.0"
	kubernetesVersion   = "v1.34.2"
	kubeStagingVersion  = "v0.34.2"
	helmVersion         = "v3.22.0"
	golangciLintVersion = "v2.15.0"
	goreleaserVersion   = "v2.15.1"
	cyclonedxVersion    = "v1.10.0"
	koVersion           = "v0.19.1"
	// lambdaRIEVersion is the AWS Lambda Runtime Interface Emulator; its module publishes no
	// tags the proxy serves, so it is pinned by pseudo-version.
	lambdaRIEVersion = "v0.0.0-20261030222936-bef5c4ba774d"
)

// kubeEntry is the cache entry holding both Kubernetes binaries. They are built by one
// `go build`, so the packages they share (most of k8s.io/kubernetes) compile once; the "-2"
// retires entries of the days when only kube-apiserver was built.
const kubeEntry = "kubernetes"

const kubeEntryVersion = kubernetesVersion + "-2"

// ErrUnknownTool is returned for a tool name Ensure does not know.
var ErrUnknownTool = errors.New("toolcache: unknown tool")

// toolSpec describes how one tool is obtained.
type toolSpec struct {
	name    string
	version string
	// entry, when set, names the cache entry (<entry>-<version>) the executable lives in, for
	// tools built together by one build; tools sharing an entry share its lock and its build.
	// Empty: the tool's own name.
	entry string
	// outputs are the executables the build must produce; empty: just name.
	outputs []string
	// onDemand tools are built when first asked for, not by `ensure all` (make test does not
	// use them).
	onDemand bool
	// versionKey, when set, derives the cache key's version from the Go toolchain (for tools
	// such as golangci-lint whose behavior depends on the Go version they were built with).
	versionKey func(ctx context.Context, goVersion string) string
	// build writes the executable named name into b.dir; set for tools built into the cache.
	build func(ctx context.Context, b *buildEnv) error
	// system locates (and, where allowed, installs) a tool provided by the operating system;
	// installed says whether this call installed it.
	system func(ctx context.Context, tb *Toolbox) (path string, installed bool, err error)
}

func pinnedTools() []toolSpec {
	return []toolSpec{
		{name: ToolVictoriaLogs, version: victoriaLogsVersion,
			build: goInstall("github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs@" + victoriaLogsVersion)},
		{name: ToolVersitygw, version: versitygwVersion,
			build: goInstall("github.com/versity/versitygw/cmd/versitygw@" + versitygwVersion)},
		{name: ToolKubeAPIServer, version: kubeEntryVersion, entry: kubeEntry,
			outputs: kubeBinaries, build: buildKubernetes},
		{name: ToolEtcd, version: "debian", system: ensureEtcd},
		{name: ToolHelm, version: helmVersion,
			build: goInstall("helm.sh/helm/v3/cmd/helm@" + helmVersion)},
		{name: ToolGolangciLint, version: golangciLintVersion,
			// golangci-lint refuses to lint code targeting a newer Go than it was built with,
			// so a toolchain upgrade must rebuild it.
			versionKey: func(_ context.Context, goVersion string) string {
				return golangciLintVersion + "-" + goMinor(goVersion)
			},
			build: goInstall("github.com/golangci/golangci-lint/v2/cmd/golangci-lint@" + golangciLintVersion)},
		{name: ToolLambdaRIE, version: lambdaRIEVersion,
			build: goInstall("github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@" + lambdaRIEVersion)},
		{name: ToolGoreleaser, version: goreleaserVersion,
			build: goInstall("github.com/goreleaser/goreleaser/v2@" + goreleaserVersion)},
		{name: ToolCycloneDXGomod, version: cyclonedxVersion,
			build: goInstall("github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@" + cyclonedxVersion)},
		// make image: a multi-arch image without a Docker daemon.
		{name: ToolKo, version: koVersion, onDemand: true,
			build: goInstall("github.com/google/ko@" + koVersion)},
		// Last: it shares kube-apiserver's entry, so `ensure all` finds it built (or waits for
		// that build) instead of holding a build slot while another tool could build.
		{name: ToolKubeControllerManager, version: kubeEntryVersion, entry: kubeEntry,
			outputs: kubeBinaries, build: buildKubernetes},
	}
}

// Names returns the names of every tool Ensure knows, in build order.
func Names() []string {
	var names []string
	for _, s := range pinnedTools() {
		names = append(names, s.name)
	}
	return names
}

// Prebuilt returns the names of the tools the test suite uses (all but the on-demand ones), in
// build order: what `sf2loki-tools ensure all` builds.
func Prebuilt() []string {
	var names []string
	for _, s := range pinnedTools() {
		if !s.onDemand {
			names = append(names, s.name)
		}
	}
	return names
}

// DefaultDir returns the tool cache: $XDG_CACHE_HOME/sf2loki-tools, or
// ~/.cache/sf2loki-tools when XDG_CACHE_HOME is unset.
func DefaultDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("toolcache: locate the cache directory: %w", err)
	}
	return filepath.Join(base, "sf2loki-tools"), nil
}

// ToolResult says where a tool is and whether this call had to build it.
type ToolResult struct {
	Name    string
	Version string        // the cache key's version, e.g. "v1.52.1"
	Path    string        // absolute path of the executable
	Built   bool          // this call built (or, for a system package, installed) it
	Elapsed time.Duration // time spent building or installing; zero otherwise
}

// Toolbox builds the pinned tools into a cache directory and finds them there. The zero value
// uses DefaultDir and discards progress messages.
type Toolbox struct {
	// Dir is the cache root; "" means DefaultDir().
	Dir string
	// Progress receives one line when a build starts or waits for another process's build;
	// nil discards them.
	Progress io.Writer

	specs []toolSpec // nil means pinnedTools(); tests substitute their own
}

// defaultToolbox serves Ensure. A first build takes minutes: it says what is happening.
var defaultToolbox = Toolbox{Progress: os.Stderr}

// Ensure returns the absolute path of the named tool (one of Names()), building it into the
// cache first when it is missing. Concurrent calls, also from other processes, build a tool at most once.
// A failed build is not retried within the process: every later call returns its error
// at once instead of spending minutes failing again.
func Ensure(ctx context.Context, name string) (string, error) {
	toolFailures.Lock()
	err, failed := toolFailures.m[name]
	toolFailures.Unlock()
	if failed {
		return "", err
	}
	r, err := defaultToolbox.Ensure(ctx, name)
	if err != nil && ctx.Err() == nil {
		toolFailures.Lock()
		toolFailures.m[name] = err
		toolFailures.Unlock()
	}
	return r.Path, err
}

var toolFailures = struct {
	sync.Mutex
	m map[string]error
}{m: map[string]error{}}

func (tb *Toolbox) spec(name string) (toolSpec, bool) {
	specs := tb.specs
	if specs == nil {
		specs = pinnedTools()
	}
	for _, s := range specs {
		if s.name == name {
			return s, true
		}
	}
	return toolSpec{}, false
}

func (tb *Toolbox) root() (string, error) {
	if tb.Dir != "" {
		return filepath.Abs(tb.Dir)
	}
	return DefaultDir()
}

func (tb *Toolbox) progressf(format string, args ...any) {
	if tb.Progress != nil {
		fmt.Fprintf(tb.Progress, format+"\n", args...)
	}
}

// Ensure returns the named tool, building it into the cache when it is missing. The build
// runs under an exclusive file lock and writes into a temporary directory that is renamed
// into place only when complete, so concurrent builders and interrupted builds never leave a
// corrupt cache entry.
func (tb *Toolbox) Ensure(ctx context.Context, name string) (ToolResult, error) {
	spec, ok := tb.spec(name)
	if !ok {
		return ToolResult{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownTool, name, strings.Join(Names(), ", "))
	}
	res := ToolResult{Name: name, Version: spec.version}
	if spec.system != nil {
		start := time.Now()
		path, installed, err := spec.system(ctx, tb)
		res.Path = path
		if installed {
			res.Built, res.Elapsed = true, time.Since(start)
		}
		return res, err
	}
	root, err := tb.root()
	if err != nil {
		return res, err
	}
	if spec.versionKey != nil {
		gv, err := goEnvVersion(ctx)
		if err != nil {
			return res, err
		}
		res.Version = spec.versionKey(ctx, gv)
	}
	entry := spec.entry
	if entry == "" {
		entry = name
	}
	key := entry + "-" + res.Version
	final := filepath.Join(root, key)
	res.Path = filepath.Join(final, name)
	if isExecutable(res.Path) {
		return res, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return res, fmt.Errorf("toolcache: create tool cache: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(root, key+".lock"), func() {
		tb.progressf("%s %s: waiting for another process that is building it", name, res.Version)
	})
	if err != nil {
		return res, fmt.Errorf("toolcache: lock %s: %w", key, err)
	}
	defer unlock()
	if isExecutable(res.Path) { // another process built it while we waited
		return res, nil
	}
	start := time.Now()
	if err := tb.build(ctx, spec, root, key, final); err != nil {
		return res, err
	}
	res.Built, res.Elapsed = true, time.Since(start)
	return res, nil
}

// build runs spec.build into a fresh temporary directory under root and renames it to final.
// The caller holds the tool's lock.
func (tb *Toolbox) build(ctx context.Context, spec toolSpec, root, key, final string) error {
	// Leftovers of builds that were killed: nobody else can own them while we hold the lock.
	if old, _ := filepath.Glob(filepath.Join(root, ".build-"+key+"-*")); len(old) > 0 {
		for _, dir := range old {
			_ = os.RemoveAll(dir)
		}
	}
	tmp, err := os.MkdirTemp(root, ".build-"+key+"-")
	if err != nil {
		return fmt.Errorf("toolcache: build %s: %w", key, err)
	}
	defer func() { _ = os.RemoveAll(tmp) }() // no-op after a successful rename
	logPath := filepath.Join(tmp, "build.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("toolcache: build %s: %w", key, err)
	}
	failedLog := filepath.Join(root, key+".failed.log")
	tb.progressf("%s %s: building into %s (log: %s)", spec.name, spec.version, final, logPath)
	b := &buildEnv{dir: tmp, log: logFile}
	buildErr := spec.build(ctx, b)
	outputs := spec.outputs
	if len(outputs) == 0 {
		outputs = []string{spec.name}
	}
	for _, out := range outputs {
		if buildErr == nil && !isExecutable(filepath.Join(tmp, out)) {
			buildErr = fmt.Errorf("the build produced no executable %s", out)
		}
	}
	if buildErr != nil {
		fmt.Fprintf(logFile, "\nbuild failed: %v\n", buildErr)
		_ = logFile.Close()
		_ = os.Rename(logPath, failedLog)
		return fmt.Errorf("toolcache: build %s failed: %w\n--- last lines of %s ---\n%s",
			key, buildErr, failedLog, TailFile(failedLog, 40))
	}
	if err := logFile.Close(); err != nil {
		return fmt.Errorf("toolcache: build %s: %w", key, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp made it private
		return fmt.Errorf("toolcache: build %s: %w", key, err)
	}
	// A directory without the executable (e.g. emptied by hand) would block the rename.
	if err := os.RemoveAll(final); err != nil {
		return fmt.Errorf("toolcache: build %s: %w", key, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("toolcache: install %s: %w", key, err)
	}
	_ = os.Remove(failedLog)
	return nil
}

// buildEnv is what a tool's build function gets: an output directory and a log.
type buildEnv struct {
	dir string   // write the executable (and any scratch files) here
	log *os.File // build output
}

// goCmd runs the go command in dir with settings independent of the caller's environment.
func (b *buildEnv) goCmd(ctx context.Context, dir string, extraEnv []string, args ...string) error {
	goBin, err := goBinary()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(toolBuildEnv(), extraEnv...)
	cmd.Stdout, cmd.Stderr = b.log, b.log
	fmt.Fprintf(b.log, "$ (cd %s && go %s)\n", dir, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", args[0], err)
	}
	return nil
}

// toolBuildEnv is the environment of every tool build: the caller's environment with the
// settings that change what gets built pinned.
func toolBuildEnv() []string {
	env := os.Environ()
	return append(env,
		"GOFLAGS=-mod=mod",
		"GOTOOLCHAIN=local",
		"GOWORK=off",
		"CGO_ENABLED=0",
		"GOOS="+runtime.GOOS,
		"GOARCH="+runtime.GOARCH,
		"GOBIN=", // go install sets its own
	)
}

func goBinary() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", errors.New("toolcache: the go command is not on PATH")
}

var goVersionCache struct {
	sync.Mutex
	v string
}

// goEnvVersion returns `go env GOVERSION` of the go command that builds the tools.
func goEnvVersion(ctx context.Context) (string, error) {
	goVersionCache.Lock()
	defer goVersionCache.Unlock()
	if goVersionCache.v != "" {
		return goVersionCache.v, nil
	}
	goBin, err := goBinary()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, goBin, "env", "GOVERSION")
	cmd.Env = toolBuildEnv()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("toolcache: go env GOVERSION: %w", err)
	}
	goVersionCache.v = strings.TrimSpace(string(out))
	return goVersionCache.v, nil
}

// goMinor turns "go1.26.8" into "go1.26".
func goMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// goInstall builds a main package at a module version with `go install pkg@version`.
func goInstall(pkgAtVersion string) func(context.Context, *buildEnv) error {
	return func(ctx context.Context, b *buildEnv) error {
		return b.goCmd(ctx, b.dir, []string{"GOBIN=" + b.dir},
			"install", "-trimpath", "-ldflags=-s -w", pkgAtVersion)
	}
}

// kubeBinaries are the executables buildKubernetes writes.
var kubeBinaries = []string{ToolKubeAPIServer, ToolKubeControllerManager}

// buildKubernetes builds kube-apiserver and kube-controller-manager from k8s.io/kubernetes in a
// throwaway module, in one `go build` so that the packages they share compile once. The
// kubernetes module points its k8s.io/<staging> dependencies at in-tree directories, which a
// dependent module cannot use, so the throwaway module replaces each of them with its published
// v0.x version.
func buildKubernetes(ctx context.Context, b *buildEnv) error {
	src := filepath.Join(b.dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	goMod, err := downloadGoMod(ctx, b, "k8s.io/kubernetes@"+kubernetesVersion)
	if err != nil {
		return err
	}
	staging, err := stagingModules(goMod)
	if err != nil {
		return err
	}
	var mod strings.Builder
	fmt.Fprintf(&mod, "module sf2loki.local/kubernetes-build\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", kubernetesVersion)
	for _, m := range staging {
		fmt.Fprintf(&mod, "\t%s => %s %s\n", m, m, kubeStagingVersion)
	}
	mod.WriteString(")\n")
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(mod.String()), 0o644); err != nil {
		return err
	}
	minor := strings.Split(strings.TrimPrefix(kubernetesVersion, "v"), ".")[1]
	ldflags := strings.Join([]string{"-s", "-w",
		"-X", "k8s.io/component-base/version.gitVersion=" + kubernetesVersion,
		"-X", "k8s.io/component-base/version.gitMajor=1",
		"-X", "k8s.io/component-base/version.gitMinor=" + minor,
		"-X", "k8s.io/component-base/version.gitTreeState=clean",
	}, " ")
	args := []string{"build", "-trimpath", "-ldflags=" + ldflags, "-o", b.dir + string(filepath.Separator)}
	for _, bin := range kubeBinaries {
		args = append(args, "k8s.io/kubernetes/cmd/"+bin)
	}
	return b.goCmd(ctx, src, nil, args...)
}

// downloadGoMod fetches a module version's go.mod through the module proxy and returns its text.
func downloadGoMod(ctx context.Context, b *buildEnv, modAtVersion string) (string, error) {
	goBin, err := goBinary()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, goBin, "mod", "download", "-json", modAtVersion)
	cmd.Dir = b.dir
	cmd.Env = toolBuildEnv()
	cmd.Stderr = b.log
	fmt.Fprintf(b.log, "$ go mod download -json %s\n", modAtVersion)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", modAtVersion, err)
	}
	var info struct{ GoMod, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", modAtVersion, err)
	}
	if info.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", modAtVersion, info.Error)
	}
	data, err := os.ReadFile(info.GoMod)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

// stagingModules returns the modules that kubernetes' go.mod replaces with ./staging paths.
func stagingModules(goMod string) ([]string, error) {
	var mods []string
	sc := bufio.NewScanner(strings.NewReader(goMod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		line = strings.TrimPrefix(line, "replace ")
		from, to, ok := strings.Cut(line, "=>")
		if !ok || !strings.HasPrefix(strings.TrimSpace(to), "./staging/") {
			continue
		}
		mods = append(mods, strings.Fields(from)[0])
	}
	if len(mods) == 0 {
		return nil, errors.New("kubernetes go.mod lists no ./staging replacements")
	}
	return mods, sc.Err()
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// TailFile returns the last n lines of a file, or a note saying why it cannot: for error
// messages that quote a build or server log.
func TailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
