package deploytest

import (
	"bufio"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// dockerInstr is one Dockerfile instruction with its continuation lines joined.
type dockerInstr struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// dockerStage is one FROM and what follows it.
type dockerStage struct {
	from, name string
	instrs     []dockerInstr
}

// parseDockerfile splits a Dockerfile into its global ARGs and its stages.
func parseDockerfile(t testing.TB, text string) (globals []dockerInstr, stages []*dockerStage) {
	t.Helper()
	var logical []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		logical = append(logical, cur.String())
		cur.Reset()
	}
	for _, l := range logical {
		cmd, args, _ := strings.Cut(l, " ")
		in := dockerInstr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			st := &dockerStage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
		case len(stages) == 0:
			if in.cmd != "ARG" {
				t.Fatalf("Dockerfile: %s before the first FROM", in.cmd)
			}
			globals = append(globals, in)
		default:
			stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
		}
	}
	return globals, stages
}

var dockerVarRE = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

func expandDockerVars(s string, vars map[string]string) string {
	return dockerVarRE.ReplaceAllStringFunc(s, func(m string) string {
		return vars[dockerVarRE.FindStringSubmatch(m)[1]]
	})
}

// argDefault splits "NAME=default".
func argDefault(args string) (name, def string) {
	name, def, _ = strings.Cut(args, "=")
	return name, strings.Trim(def, `"`)
}

func readDockerfile(t testing.TB) ([]dockerInstr, []*dockerStage) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "docker", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return parseDockerfile(t, string(raw))
}

// TestDockerfileImage checks the runtime stage without building it (there is no container
// engine here): distroless static (CA certificates, no shell), a numeric non-root user, the
// binary the build stage produces as the entrypoint, and a Go version matching go.mod.
func TestDockerfileImage(t *testing.T) {
	globals, stages := readDockerfile(t)
	if len(stages) != 2 || stages[0].name != "build" {
		t.Fatalf("want two stages, the first named build; got %d", len(stages))
	}
	final := stages[1]
	if !strings.HasPrefix(final.from, "gcr.io/distroless/static-debian") || !strings.HasSuffix(final.from, ":nonroot") {
		t.Errorf("runtime base %s, want gcr.io/distroless/static-debian*:nonroot (CA certificates, no libc, no shell)", final.from)
	}
	var user, entrypoint, copySrc, copyDst string
	for _, in := range final.instrs {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			var ep []string
			if err := json.Unmarshal([]byte(in.args), &ep); err != nil || len(ep) != 1 {
				t.Fatalf("ENTRYPOINT %s: want the exec form with the binary alone", in.args)
			}
			entrypoint = ep[0]
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 3 && f[0] == "--from=build" {
				copySrc, copyDst = f[1], f[2]
			}
		case "RUN":
			t.Errorf("the runtime stage runs %q: it has no shell", in.args)
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q, want a numeric non-root uid (runAsNonRoot can only verify numbers)", user)
	}
	if entrypoint == "" || entrypoint != copyDst {
		t.Errorf("ENTRYPOINT %q is not the binary copied from the build stage (%q)", entrypoint, copyDst)
	}
	if !strings.Contains(buildCommand(t, stages[0]), "-o "+copySrc+" ") {
		t.Errorf("the build stage does not write %s", copySrc)
	}
	goMod, err := os.ReadFile(filepath.Join(repoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod)
	for _, g := range globals {
		if name, def := argDefault(g.args); name == "GO_VERSION" && (goLine == nil || def != string(goLine[1])) {
			t.Errorf("GO_VERSION %s, go.mod says go %s", def, goLine[1])
		}
	}
}

// buildCommand returns the build stage's go build RUN command.
func buildCommand(t testing.TB, st *dockerStage) string {
	t.Helper()
	for _, in := range st.instrs {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			return in.args
		}
	}
	t.Fatal("the build stage has no go build")
	return ""
}

// makeTags returns the Makefile's TAGS as the -tags flag spells them (comma-separated).
func makeTags(t testing.TB) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TAGS := (.*)$`).FindSubmatch(mk)
	if m == nil || len(strings.Fields(string(m[1]))) == 0 {
		t.Fatal("the Makefile sets no TAGS")
	}
	return strings.Join(strings.Fields(string(m[1])), ",")
}

// TestBuildTagsMatchMakefile: every definition of the shipped binary (the image's Dockerfile,
// .ko.yaml, each build of .goreleaser.yaml) builds with the Makefile's TAGS, so what a user runs
// initialises what `make build` and the benchmark measure.
func TestBuildTagsMatchMakefile(t *testing.T) {
	want := "-tags=" + makeTags(t)
	_, stages := readDockerfile(t)
	if got := regexp.MustCompile(`-tags=\S+`).FindString(buildCommand(t, stages[0])); got != want {
		t.Errorf("Dockerfile builds with %q, want %q", got, want)
	}
	for _, file := range []string{".ko.yaml", ".goreleaser.yaml"} {
		raw, err := os.ReadFile(filepath.Join(repoRoot(t), file))
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Builds []struct {
				ID    string   `json:"id"`
				Flags []string `json:"flags"`
			} `json:"builds"`
		}
		if err := yaml.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(cfg.Builds) == 0 {
			t.Errorf("%s: no builds", file)
		}
		for _, b := range cfg.Builds {
			var tags []string
			for _, f := range b.Flags {
				if strings.HasPrefix(f, "-tags") {
					tags = append(tags, f)
				}
			}
			if len(tags) != 1 || tags[0] != want {
				t.Errorf("%s: build %s has tag flags %q, want [%s]", file, b.ID, tags, want)
			}
		}
	}
}

// TestDockerfileLdflagsMatchMakefile: the image and `make build` stamp the version the same way.
func TestDockerfileLdflagsMatchMakefile(t *testing.T) {
	_, stages := readDockerfile(t)
	got := regexp.MustCompile(`-ldflags "([^"]*)"`).FindStringSubmatch(buildCommand(t, stages[0]))
	mk, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^LDFLAGS := (.*)$`).FindSubmatch(mk)
	if got == nil || want == nil {
		t.Fatalf("ldflags not found (Dockerfile %v, Makefile %v)", got != nil, want != nil)
	}
	norm := strings.NewReplacer("$(VERSION)", "${VERSION}", "$(COMMIT)", "${COMMIT}").Replace(string(want[1]))
	if got[1] != norm {
		t.Errorf("Dockerfile ldflags\n  %s\nMakefile LDFLAGS\n  %s", got[1], norm)
	}
	if !strings.Contains(buildCommand(t, stages[0]), "-trimpath") || !strings.Contains(buildCommand(t, stages[0]), "CGO_ENABLED=0") {
		t.Error("the build is not CGO_ENABLED=0 with -trimpath")
	}
}

// TestDockerfileBuildStageRunsAsScript runs the build stage's instructions as a script (ARG,
// ENV, WORKDIR, COPY of the build context minus Dockerfile.dockerignore, RUN with BuildKit's
// --mount flags dropped), container paths mapped under a temporary root, and checks the result:
// a static executable (no interpreter, no shared libraries) built with CGO_ENABLED=0 and
// -trimpath whose `version` reports the VERSION and COMMIT build arguments.
func TestDockerfileBuildStageRunsAsScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the whole binary; runs without -short")
	}
	globals, stages := readDockerfile(t)
	build, final := stages[0], stages[1]
	root := t.TempDir()
	vars := map[string]string{"VERSION": "v9.9.9-deploytest", "COMMIT": "abc1234", "TARGETOS": "linux", "TARGETARCH": runtime.GOARCH}
	for _, g := range globals {
		if n, d := argDefault(g.args); vars[n] == "" {
			vars[n] = d
		}
	}
	// Container paths the script touches: the WORKDIR and the output the runtime stage copies.
	var rewrites []string
	for _, in := range final.instrs {
		if f := strings.Fields(in.args); in.cmd == "COPY" && len(f) == 3 && f[0] == "--from=build" {
			rewrites = append(rewrites, path.Dir(f[1]))
		}
	}
	host := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	cwd := root
	for _, in := range build.instrs {
		args := expandDockerVars(in.args, vars)
		switch in.cmd {
		case "ARG":
			if n, d := argDefault(in.args); vars[n] == "" {
				vars[n] = d
			}
		case "ENV":
			n, v, _ := strings.Cut(args, "=")
			vars[n] = v
		case "WORKDIR":
			rewrites = append(rewrites, args)
			cwd = host(args)
			if err := os.MkdirAll(cwd, 0o755); err != nil {
				t.Fatal(err)
			}
		case "COPY":
			f := strings.Fields(args)
			dst := f[len(f)-1]
			if !path.IsAbs(dst) {
				dst = filepath.Join(cwd, dst)
			} else {
				dst = host(dst)
			}
			for _, src := range f[:len(f)-1] {
				copyContext(t, src, dst)
			}
		case "RUN":
			f := strings.Fields(args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--mount=") {
				f = f[1:]
			}
			script := strings.Join(f, " ")
			for _, r := range rewrites {
				script = regexp.MustCompile(regexp.QuoteMeta(r)+`(/|\s|$)`).ReplaceAllString(script, host(r)+"$1")
			}
			cmd := exec.CommandContext(t.Context(), "sh", "-c", script)
			cmd.Dir = cwd
			cmd.Env = os.Environ()
			for k, v := range vars {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("RUN %s: %v\n%s", script, err, out)
			}
		default:
			t.Fatalf("the test does not know how to run %s in the build stage", in.cmd)
		}
	}
	var bin string
	for _, in := range final.instrs {
		if f := strings.Fields(in.args); in.cmd == "COPY" && len(f) == 3 && f[0] == "--from=build" {
			bin = host(f[1])
		}
	}
	checkStaticBinary(t, bin)
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings CGO_ENABLED=%q -trimpath=%q", settings["CGO_ENABLED"], settings["-trimpath"])
	}
	if settings["-tags"] != makeTags(t) {
		t.Errorf("build setting -tags=%q, want the Makefile's %q", settings["-tags"], makeTags(t))
	}
	out, err := exec.CommandContext(t.Context(), bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("sf2loki version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "v9.9.9-deploytest") || !strings.Contains(string(out), "abc1234") {
		t.Errorf("sf2loki version does not report the build arguments:\n%s", out)
	}
}

// checkStaticBinary fails unless path is an ELF executable without an interpreter or shared
// library dependencies (it runs on distroless/static, which has no libc).
func checkStaticBinary(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("the build produced no ELF executable: %v", err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary needs a dynamic loader (PT_INTERP)")
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		t.Errorf("the binary links shared libraries %v", libs)
	}
}

// copyContext copies src of the build context (the repository minus Dockerfile.dockerignore)
// to dst, as COPY does: a file into a directory ending in /, or a directory's contents.
func copyContext(t *testing.T, src, dst string) {
	t.Helper()
	root := repoRoot(t)
	ignore := dockerignore(t)
	files, err := exec.CommandContext(t.Context(), "git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	src = path.Clean(src)
	for _, f := range strings.Split(strings.TrimSpace(string(files)), "\n") {
		if f == "" || ignored(ignore, f) {
			continue
		}
		var rel string
		switch {
		case src == ".":
			rel = f
		case f == src:
			rel = path.Base(f)
		case strings.HasPrefix(f, src+"/"):
			rel = strings.TrimPrefix(f, src+"/")
		default:
			continue
		}
		from := filepath.Join(root, filepath.FromSlash(f))
		if _, err := os.Lstat(from); err != nil {
			continue // deleted in the working tree
		}
		to := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(from, to); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func dockerignore(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "docker", "Dockerfile.dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var pats []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			pats = append(pats, l)
		}
	}
	return pats
}

// ignored applies .dockerignore patterns: a pattern matches the path or one of its parent
// directories; "**/" matches any number of directories.
func ignored(patterns []string, p string) bool {
	for _, pat := range patterns {
		if base, ok := strings.CutPrefix(pat, "**/"); ok {
			for _, part := range strings.Split(p, "/") {
				if m, _ := path.Match(base, part); m {
					return true
				}
			}
			continue
		}
		for q := p; q != "." && q != "/"; q = path.Dir(q) {
			if m, _ := path.Match(pat, q); m {
				return true
			}
		}
	}
	return false
}
