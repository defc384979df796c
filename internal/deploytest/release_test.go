package deploytest

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// releaseTool returns a tool of the release from the tool cache, with helm's skip/fail policy.
func releaseTool(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s (built once into the tool cache); runs without -short", name)
	}
	p, err := testenv.EnsureTool(t.Context(), name)
	if err != nil {
		if os.Getenv(testenv.EnvRequireRealServers) == "1" {
			t.Fatalf("%s cannot be obtained here: %v", name, err)
		}
		t.Skipf("%s cannot be obtained here (set %s=1 to fail instead): %v", name, testenv.EnvRequireRealServers, err)
	}
	return p
}

// TestReleaseSnapshot runs the release of .goreleaser.yaml as a snapshot restricted to this
// machine's platform (every cross-compiled target would cost minutes; tags build them all),
// without the image and the signatures, which need a registry and an OIDC identity. It checks
// what a user downloads: the archive's binary runs and reports the snapshot version, the Lambda
// zip holds exactly an executable bootstrap, the SBOM is CycloneDX listing the binary's
// modules, and checksums.txt matches every file. It runs in parallel with the controller
// scenarios, which spend their time waiting for schedule ticks.
func TestReleaseSnapshot(t *testing.T) {
	t.Parallel()
	goreleaser := releaseTool(t, testenv.ToolGoreleaser)
	cyclonedx := releaseTool(t, testenv.ToolCycloneDXGomod)
	root := repoRoot(t)
	dist := filepath.Join(t.TempDir(), "dist")

	raw, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for _, b := range cfg["builds"].([]any) {
		build := b.(map[string]any)
		if !slices.Contains(build["goos"].([]any), any(runtime.GOOS)) || !slices.Contains(build["goarch"].([]any), any(runtime.GOARCH)) {
			continue
		}
		build["goos"], build["goarch"] = []string{runtime.GOOS}, []string{runtime.GOARCH}
		kept = append(kept, build)
	}
	cfg["builds"], cfg["dist"] = kept, dist
	single, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "goreleaser.yaml")
	if err := os.WriteFile(cfgPath, single, 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(t.Context(), goreleaser, "release", "--snapshot", "--clean", "--skip=ko,sign", "--config", cfgPath)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(cyclonedx)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOFLAGS=") // the release's own flags (-trimpath) only
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("goreleaser release --snapshot: %v\n%s", err, tail(string(out), 4000))
	}

	var meta struct {
		Version string `json:"version"`
	}
	readJSON(t, filepath.Join(dist, "metadata.json"), &meta)
	if meta.Version == "" || !strings.Contains(meta.Version, "snapshot") {
		t.Fatalf("metadata.json version %q is not a snapshot version", meta.Version)
	}
	plat := runtime.GOOS + "_" + runtime.GOARCH

	archive := filepath.Join(dist, "sf2loki_"+meta.Version+"_"+plat+".tar.gz")
	bin := filepath.Join(t.TempDir(), "sf2loki")
	files := untarFile(t, archive, "sf2loki", bin)
	for _, want := range []string{"sf2loki", "README.md", "CHANGELOG.md"} {
		if !slices.Contains(files, want) {
			t.Errorf("%s holds %v, want %s in it", filepath.Base(archive), files, want)
		}
	}
	out, err := exec.CommandContext(t.Context(), bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), meta.Version) {
		t.Errorf("the archived binary's version: %v\n%s\nwant %s", err, out, meta.Version)
	}
	if info, err := buildinfo.ReadFile(bin); err != nil {
		t.Errorf("the archived binary's build information: %v", err)
	} else {
		var tags string
		for _, s := range info.Settings {
			if s.Key == "-tags" {
				tags = s.Value
			}
		}
		if tags != makeTags(t) {
			t.Errorf("the archived binary was built with -tags=%q, want the Makefile's %q", tags, makeTags(t))
		}
	}

	if runtime.GOOS == "linux" {
		lambda := filepath.Join(dist, "sf2loki_"+meta.Version+"_lambda_"+runtime.GOARCH+".zip")
		zr, err := zip.OpenReader(lambda)
		if err != nil {
			t.Fatalf("the Lambda zip: %v", err)
		}
		defer func() { _ = zr.Close() }()
		if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" || zr.File[0].Mode().Perm()&0o100 == 0 {
			var names []string
			for _, f := range zr.File {
				names = append(names, f.Name+" "+f.Mode().String())
			}
			t.Errorf("%s holds %v, want only an executable bootstrap", filepath.Base(lambda), names)
		}
	}

	var sbom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"components"`
	}
	readJSON(t, filepath.Join(dist, "sf2loki_"+meta.Version+"_"+plat+".cdx.json"), &sbom)
	var modules []string
	for _, c := range sbom.Components {
		modules = append(modules, c.Name)
	}
	if sbom.BOMFormat != "CycloneDX" || !strings.Contains(sbom.Metadata.Component.Name, "sf2loki") ||
		!slices.Contains(modules, "k8s.io/client-go") || !slices.Contains(modules, "github.com/urfave/cli/v2") {
		t.Errorf("the SBOM: format %q, component %+v, %d modules (want CycloneDX, sf2loki, client-go and urfave/cli among them)",
			sbom.BOMFormat, sbom.Metadata.Component, len(modules))
	}

	sums, err := os.Open(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sums.Close() }()
	listed := map[string]bool{}
	sc := bufio.NewScanner(sums)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q", sc.Text())
		}
		data, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(data)
		if hex.EncodeToString(h[:]) != sum {
			t.Errorf("checksums.txt: %s does not match", name)
		}
		listed[name] = true
	}
	for _, name := range []string{filepath.Base(archive), "sf2loki_" + meta.Version + "_" + plat + ".cdx.json"} {
		if !listed[name] {
			t.Errorf("checksums.txt does not list %s", name)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// untarFile lists a tar.gz archive's files and extracts the named one to dst.
func untarFile(t *testing.T, archive, name, dst string) []string {
	t.Helper()
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return names
}
