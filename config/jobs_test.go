package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const twoOrgs = `
orgs:
  - name: prod
    salesforce: {client_id: id, username: u, private_key: "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----"}
    sources:
      eventlogfile: {enabled: true, event_types: [Login]}
      apexlog: {enabled: true}
  - name: dev
    salesforce: {client_id: id, username: u, private_key: "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----"}
    sources:
      eventlogfile: {enabled: true, event_types: [API]}
`

func TestJobGroupsSplitSourcesAndDocuments(t *testing.T) {
	cfg := mustLoad(t, twoOrgs+`
jobs:
  - name: elf
    sources: [eventlogfile]
    schedule: "@every 15m"
  - name: apex
    orgs: [prod]
    sources: [apexlog]
`)
	elf, err := cfg.ForJob("elf")
	if err != nil {
		t.Fatal(err)
	}
	if !elf.Orgs[0].Sources.EventLogFile.Enabled || elf.Orgs[0].Sources.ApexLog.Enabled || !elf.Orgs[1].Sources.EventLogFile.Enabled {
		t.Errorf("elf group sources wrong: %+v", elf.Orgs)
	}
	if elf.Lease.Name != "sf2loki-elf" || elf.State.File.Path != "sf2loki-state-elf.json" || elf.Schedule.Spec != "@every 15m" {
		t.Errorf("elf group lease %q, path %q, spec %q", elf.Lease.Name, elf.State.File.Path, elf.Schedule.Spec)
	}
	if elf.State.S3.Key != "sf2loki/state-elf.json" || elf.State.ConfigMap.Name != "sf2loki-state-elf" {
		t.Errorf("elf group object %q configmap %q", elf.State.S3.Key, elf.State.ConfigMap.Name)
	}
	apex, err := cfg.ForJob("apex")
	if err != nil {
		t.Fatal(err)
	}
	if apex.Orgs[0].Sources.EventLogFile.Enabled || !apex.Orgs[0].Sources.ApexLog.Enabled || apex.Orgs[1].Sources.Enabled() {
		t.Errorf("apex group sources wrong: %+v", apex.Orgs)
	}
	if apex.Lease.Name == elf.Lease.Name || apex.State.File.Path == elf.State.File.Path {
		t.Error("two groups share a lease or a document")
	}
	if errs := apex.Validate(); len(errs) > 0 {
		t.Errorf("a group's configuration does not validate: %v", errs)
	}
	if _, err := cfg.ForJob(""); err == nil || !strings.Contains(err.Error(), "--job") {
		t.Errorf("no group chosen: %v", err)
	}
	if _, err := cfg.ForJob("nope"); err == nil || !strings.Contains(err.Error(), "elf, apex") {
		t.Errorf("unknown group: %v", err)
	}
}

func TestJobGroupsMustNotOverlapOrLeaveSourcesOut(t *testing.T) {
	_, err := load(t, twoOrgs+`
jobs:
  - name: all
  - name: elf
    sources: [eventlogfile]
`)
	if err == nil || !strings.Contains(err.Error(), `job groups "all" and "elf" both ship eventlogfile`) {
		t.Errorf("overlapping groups: %v", err)
	}
	_, err = load(t, twoOrgs+`
jobs:
  - name: elf
    sources: [eventlogfile]
`)
	if err == nil || !strings.Contains(err.Error(), "orgs[0].sources.apexlog") || !strings.Contains(err.Error(), "no job group ships it") {
		t.Errorf("uncovered source: %v", err)
	}
	_, err = load(t, twoOrgs+`
jobs:
  - name: Bad_Name
    orgs: [staging]
    sources: [logs]
`)
	for _, want := range []string{"jobs[0].name", "jobs[0].orgs[0]", "jobs[0].sources[0]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error naming %s: %v", want, err)
		}
	}
}

// Two job groups, or a group and the backfill, must not share a lease or a checkpoint document
// (set explicitly, or one's setting equal to another's default): they would make each other busy,
// or the first claim would lock the other out. The error names both and the key to change.
func TestJobGroupsMustNotShareALeaseOrADocument(t *testing.T) {
	groups := func(elf, apex string) string {
		return twoOrgs + "jobs:\n  - name: elf\n    sources: [eventlogfile]\n" + elf + "  - name: apex\n    sources: [apexlog]\n" + apex
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"one lease", groups("    lease: shared\n", "    lease: shared\n"),
			`jobs[1].lease: job group "elf" and job group "apex" share the lease "shared"`},
		{"one document", groups("    state_path: /var/lib/state.json\n", "    state_path: /var/lib/./state.json\n"),
			`jobs[1].state_path: job group "elf" and job group "apex" share the checkpoint document "/var/lib/state.json"`},
		{"a lease equal to another group's default", groups("    lease: sf2loki-apex\n", ""),
			`jobs[0].lease: job group "elf" and job group "apex" share the lease "sf2loki-apex"`},
		{"a document equal to another group's default", groups("", "    state_path: sf2loki-state-elf.json\n"),
			`jobs[1].state_path: job group "elf" and job group "apex" share the checkpoint document "sf2loki-state-elf.json"`},
		{"one object key", "state:\n  store: s3\n  s3: {bucket: b}\n" + groups("    state_key: k.json\n", "    state_key: k.json\n"),
			`jobs[1].state_key: job group "elf" and job group "apex" share the checkpoint document "k.json"`},
		{"one ConfigMap", "state:\n  store: configmap\n" + groups("    state_configmap: cm\n", "    state_configmap: cm\n"),
			`jobs[1].state_configmap: job group "elf" and job group "apex" share the checkpoint document "cm"`},
		{"the backfill's lease and document", twoOrgs + "jobs:\n  - name: backfill\n",
			`jobs[0].name: job group "backfill" and the backfill share the lease "sf2loki-backfill"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want an error saying %q, got: %v", tc.want, err)
			}
		})
	}
	// The same state_path is no collision in another store: only the configured store's location counts.
	mustLoad(t, "state:\n  store: configmap\n"+groups("    state_path: same.json\n", "    state_path: same.json\n"))
}

func TestNoJobGroupsMeansOneJob(t *testing.T) {
	cfg := mustLoad(t, "")
	same, err := cfg.ForJob("")
	if err != nil || same != cfg {
		t.Errorf("ForJob(\"\") without groups = %v, %v", same, err)
	}
	if _, err := cfg.ForJob("x"); err == nil {
		t.Error("--job without groups was accepted")
	}
}

// A backfill has its own document and lease beside the live ones, whatever the store.
func TestForBackfill(t *testing.T) {
	c := Defaults()
	c.Lease.Name = "sf2loki-prod"
	c.State.File.Path, c.State.S3.Key, c.State.GCS.Object, c.State.ConfigMap.Name = "/var/lib/sf2loki/state.json", "prod/state.json", "prod/state.json", "sf2loki-state"
	b := c.ForBackfill()
	if b.Lease.Name != "sf2loki-prod-backfill" || b.State.File.Path != "/var/lib/sf2loki/state-backfill.json" ||
		b.State.S3.Key != "prod/state-backfill.json" || b.State.GCS.Object != "prod/state-backfill.json" || b.State.ConfigMap.Name != "sf2loki-state-backfill" {
		t.Fatalf("backfill configuration: lease %q, file %q, s3 %q, gcs %q, configmap %q", b.Lease.Name, b.State.File.Path, b.State.S3.Key, b.State.GCS.Object, b.State.ConfigMap.Name)
	}
	if c.Lease.Name != "sf2loki-prod" || c.State.File.Path != "/var/lib/sf2loki/state.json" {
		t.Fatal("ForBackfill changed the live configuration")
	}
}

func TestBackfillOrgs(t *testing.T) {
	cfg := Defaults()
	cfg.Orgs = []Org{{Name: "eu"}, {Name: "us"}, {Name: "apac"}}
	for i := range cfg.Orgs {
		cfg.Orgs[i].Salesforce = Salesforce{ClientID: "c", Username: "u@example.com", PrivateKey: "k"}
	}
	cfg.Orgs[0].Sources.EventLogFile = EventLogFileSource{Enabled: true, EventTypes: []string{"Login"}, Interval: "Daily"}
	cfg.Orgs[2].Salesforce = Salesforce{} // no credentials
	orgs, interval, err := cfg.BackfillOrgs("", nil, "")
	if err != nil || len(orgs) != 1 || orgs[0].Name != "eu" || orgs[0].EventTypes[0] != "Login" || interval != "Daily" {
		t.Fatalf("orgs %+v interval %s: want eu's Login, Daily", orgs, interval)
	}
	orgs, interval, err = cfg.BackfillOrgs("", []string{"API"}, "Hourly")
	if err != nil || len(orgs) != 2 || orgs[1].Name != "us" || orgs[1].EventTypes[0] != "API" || interval != "Hourly" {
		t.Fatalf("orgs %+v interval %s: want eu and us (apac has no credentials), Hourly", orgs, interval)
	}
	if orgs, _, err := cfg.BackfillOrgs("apac", []string{"API"}, ""); len(orgs) != 0 || err == nil || !strings.Contains(err.Error(), `"apac"`) {
		t.Fatalf("apac without credentials: %+v, %v; want an error naming apac", orgs, err)
	}
	if _, _, err := cfg.BackfillOrgs("", []string{"API", "Login;DELETE"}, ""); err == nil || !strings.Contains(err.Error(), `"Login;DELETE" is not an event type name`) {
		t.Fatalf("a type that is no name: %v; want it refused as the configuration refuses it", err)
	}
	if _, _, err := (&Config{}).BackfillOrgs("", nil, ""); err == nil || !strings.Contains(err.Error(), "nothing to backfill") {
		t.Fatalf("no org: %v; want nothing to backfill", err)
	}
	cfg.Shape.Types = []ShapeType{{Type: "Login", SampleRate: 0.1, SampleField: "USER_ID"}}
	if b := cfg.ForBackfill(); b.Shape.Types[0].SampleRate != 0 || cfg.Shape.Types[0].SampleRate != 0.1 {
		t.Fatalf("backfill sample rate %v, live %v: a backfill samples nothing, the live configuration keeps its own", b.Shape.Types[0].SampleRate, cfg.Shape.Types[0].SampleRate)
	}
}

// TestJobGroupsMustNotShareADocumentThroughAnotherPath: two state_paths that name one file
// another way (a symlinked directory, a '..' after a symlink, a relative and an absolute path)
// are one checkpoint document, refused as two equal paths are. The file need not exist yet; two
// files in one symlinked directory are two documents.
func TestJobGroupsMustNotShareADocumentThroughAnotherPath(t *testing.T) {
	dir := t.TempDir()
	real, sub := filepath.Join(dir, "real"), filepath.Join(dir, "real", "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"link": real, "sublink": sub} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir) // the relative paths, the backfill's default document among them, are in dir
	groups := func(elf, apex string) string {
		return twoOrgs + "jobs:\n  - name: elf\n    sources: [eventlogfile]\n    state_path: " + elf +
			"\n  - name: apex\n    sources: [apexlog]\n    state_path: " + apex + "\n"
	}
	for _, tc := range []struct{ name, elf, apex string }{
		{"a symlinked directory", filepath.Join(real, "state.json"), filepath.Join(dir, "link", "state.json")},
		{"'..' after a symlink", filepath.Join(real, "state.json"), dir + "/sublink/../state.json"}, // not Join: it cleans the '..' away
		{"a relative and an absolute path", "real/state.json", filepath.Join(real, "state.json")},
		{"relative through a symlink", "link/state.json", "real/./state.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, groups(tc.elf, tc.apex))
			want := fmt.Sprintf(`jobs[1].state_path: job group "elf" and job group "apex" share the checkpoint document %q (%q is the same file)`,
				tc.elf, tc.apex)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("want an error saying %q, got: %v", want, err)
			}
		})
	}
	mustLoad(t, groups(filepath.Join(real, "a.json"), filepath.Join(dir, "link", "b.json")))
	mustLoad(t, groups(filepath.Join(dir, "state.json"), dir+"/sublink/../state.json"))
}
