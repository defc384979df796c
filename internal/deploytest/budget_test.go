package deploytest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/sf2loki/sf2loki/config"
)

// placeholderKey stands in for a secret file whose content the render does not carry (an
// existing Secret, an ExternalSecret): config validation only checks its PEM framing.
const placeholderKey = "-----BEGIN PRIVATE KEY-----\nplaceholder\n-----END PRIVATE KEY-----\n"

// loadRenderedConfig runs the rendered configuration through config.Load with env (KEY=value)
// as the whole environment. Secret files under the chart's secrets mount read from the
// rendered Secret when there is one, else a placeholder.
func loadRenderedConfig(t testing.TB, m manifests, env []string) *config.Config {
	t.Helper()
	cfg, err := tryLoadRenderedConfig(t, m, env)
	if err != nil {
		t.Fatalf("config.Load of the rendered configuration: %v", err)
	}
	return cfg
}

func tryLoadRenderedConfig(t testing.TB, m manifests, env []string) (*config.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(m.configYAML(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	secretFiles := map[string][]byte{}
	for _, o := range m.ofKind("Secret") {
		s := convert[corev1.Secret](t, o)
		for k, v := range s.Data {
			secretFiles[k] = v
		}
	}
	mount := secretsMount(t, m)
	if env == nil {
		env = []string{}
	}
	return config.Load(config.LoadOptions{Path: path, Environ: env, Open: func(name string) (io.ReadCloser, error) {
		if name == path {
			return os.Open(path)
		}
		if mount != "" && strings.HasPrefix(name, mount+"/") {
			if b, ok := secretFiles[strings.TrimPrefix(name, mount+"/")]; ok {
				return io.NopCloser(bytes.NewReader(b)), nil
			}
			if len(secretFiles) == 0 {
				return io.NopCloser(strings.NewReader(placeholderKey)), nil
			}
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}})
}

// secretsMount returns where the pods mount the secrets volume ("" when they do not).
func secretsMount(t testing.TB, m manifests) string {
	for _, p := range m.podTemplates(t) {
		for _, vm := range p.spec.Containers[0].VolumeMounts {
			if vm.Name == "secrets" {
				return vm.MountPath
			}
		}
	}
	return ""
}

// groupConfig is one job group's configuration as the process derives it.
type groupConfig struct {
	name string
	cfg  *config.Config
}

func groupConfigs(t testing.TB, cfg *config.Config) []groupConfig {
	t.Helper()
	names := cfg.JobNames()
	if len(names) == 0 {
		names = []string{""}
	}
	var out []groupConfig
	for _, n := range names {
		g, err := cfg.ForJob(n)
		if err != nil {
			t.Fatalf("ForJob(%q): %v", n, err)
		}
		out = append(out, groupConfig{n, g})
	}
	return out
}

// cronGroup returns the job group a CronJob runs (its --job argument; "" for none).
func cronGroup(cj *batchv1.CronJob) string {
	args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	if i := slices.Index(args, "--job"); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// minCronGap is the shortest time between two firings of a 5-field cron spec in UTC, found by
// walking its firings with robfig/cron (the parser the CronJob controller uses) over more than
// a year or 5000 firings, whichever comes first.
func minCronGap(t testing.TB, spec string) time.Duration {
	t.Helper()
	s, err := cron.ParseStandard(spec)
	if err != nil {
		t.Fatalf("schedule %q: %v", spec, err)
	}
	at := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	end := at.AddDate(1, 1, 0)
	gap := time.Duration(1<<63 - 1)
	for i := 0; i < 5000 && at.Before(end); i++ {
		next := s.Next(at)
		gap = min(gap, next.Sub(at))
		at = next
	}
	return gap
}

// parseSeconds reads a "<n>s" value the chart passes in the environment.
func parseSeconds(t testing.TB, what, v string) time.Duration {
	t.Helper()
	if !strings.HasSuffix(v, "s") {
		t.Fatalf("%s = %q is not a whole number of seconds", what, v)
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s = %q: %v", what, v, err)
	}
	return d
}

// budgetViolations checks every invariant of the time budget (docs/fencing.md) that the rendered
// CronJob and the group's configuration determine, and returns the broken ones.
func budgetViolations(cj *batchv1.CronJob, cfg *config.Config, period time.Duration) []string {
	var bad []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	sec := func(p *int64) time.Duration {
		if p == nil {
			return 0
		}
		return time.Duration(*p) * time.Second
	}
	b := cfg.Budget()
	job := cj.Spec.JobTemplate.Spec
	pod := job.Template.Spec
	A, G, S := sec(job.ActiveDeadlineSeconds), sec(pod.TerminationGracePeriodSeconds), period
	T0, W, D, Rel, M := b.Startup, b.AcquireWait, b.MaxDuration, b.Release, b.Margin
	P, C, L, R, K := b.Push, b.Commit, b.LeaseDuration, b.RenewInterval, b.ClockSkew

	check(job.ActiveDeadlineSeconds != nil, "activeDeadlineSeconds is not set")
	check(T0+W+D+Rel+M <= A, "T0+W+D+Rel+margin = %s exceeds activeDeadlineSeconds %s", T0+W+D+Rel+M, A)
	check(D-(P+C+Rel) > 0, "no intake window: D %s <= P+C+Rel %s", D, P+C+Rel)
	check(G >= C+Rel+M, "terminationGracePeriodSeconds %s < C+Rel+margin %s", G, C+Rel+M)
	check(R <= L/3, "renew interval %s > lease duration/3 %s", R, L/3)
	check(L+K+T0 < S, "L+K+T0 = %s is not below the schedule period %s", L+K+T0, S)
	if cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent {
		check(A < S, "with Forbid, activeDeadlineSeconds %s is not below the period %s", A, S)
	}
	check(cj.Spec.ConcurrencyPolicy != batchv1.ReplaceConcurrent, "concurrencyPolicy Replace")
	sds := sec(cj.Spec.StartingDeadlineSeconds)
	check(sds >= 10*time.Second && sds <= S, "startingDeadlineSeconds %s outside [10s, period %s]", sds, S)
	check(job.BackoffLimit != nil && *job.BackoffLimit <= 2, "backoffLimit %v above 2", job.BackoffLimit)
	check(job.PodReplacementPolicy != nil && *job.PodReplacementPolicy == batchv1.Failed, "podReplacementPolicy is not Failed")
	check(job.TTLSecondsAfterFinished != nil, "ttlSecondsAfterFinished is not set")
	check(pod.RestartPolicy == corev1.RestartPolicyNever, "restartPolicy %s", pod.RestartPolicy)
	check(failsJobOn(job, 2) && failsJobOn(job, 7), "podFailurePolicy does not fail the Job on exit codes 2 and 7")
	env := envOf(pod.Containers[0])
	check(env["SF2LOKI_RUN__DEADLINE"] == fmt.Sprintf("%ds", int64(A/time.Second)), "SF2LOKI_RUN__DEADLINE %q, activeDeadlineSeconds %s", env["SF2LOKI_RUN__DEADLINE"], A)
	check(env["SF2LOKI_RUN__TERMINATION_GRACE"] == fmt.Sprintf("%ds", int64(G/time.Second)), "SF2LOKI_RUN__TERMINATION_GRACE %q, grace %s", env["SF2LOKI_RUN__TERMINATION_GRACE"], G)
	check(b.Deadline == A && b.TerminationGrace == G, "the process sees deadline %s and grace %s, the pod has %s and %s", b.Deadline, b.TerminationGrace, A, G)
	check(b.SchedulePeriod > 0 && b.SchedulePeriod <= S, "the process sees schedule period %s, the schedule's shortest gap is %s", b.SchedulePeriod, S)
	return bad
}

func failsJobOn(job batchv1.JobSpec, code int32) bool {
	if job.PodFailurePolicy == nil {
		return false
	}
	for _, r := range job.PodFailurePolicy.Rules {
		if r.Action == batchv1.PodFailurePolicyActionFailJob && r.OnExitCodes != nil &&
			r.OnExitCodes.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn &&
			r.OnExitCodes.ContainerName != nil && *r.OnExitCodes.ContainerName == "sf2loki" &&
			slices.Contains(r.OnExitCodes.Values, code) {
			return true
		}
	}
	return false
}

// TestRenderedTimeBudget is the acceptance check of the time budget: for the default values
// (and every other tested combination) it reads activeDeadlineSeconds, the grace period, the
// schedule and the lease settings from the render, computes the schedule's real shortest gap,
// checks every invariant of the time budget (docs/fencing.md) on those numbers, and loads the rendered configuration with
// the CronJob's environment through config.Load (which checks them again), expecting no error.
func TestRenderedTimeBudget(t *testing.T) {
	for _, c := range renderCases {
		t.Run(c.name, func(t *testing.T) {
			m := parseManifests(t, c.render(t, "sf2loki"))
			cjs := m.cronJobs(t)
			if len(cjs) == 0 {
				if c.name != "schedule-mode" && c.name != "monitoring" {
					t.Fatalf("no CronJob rendered: %v", m.kinds())
				}
				return
			}
			for _, cj := range cjs {
				pod := cj.Spec.JobTemplate.Spec.Template.Spec
				env := envOf(pod.Containers[0])
				period := minCronGap(t, cj.Spec.Schedule)
				if got := parseSeconds(t, "SF2LOKI_RUN__SCHEDULE_PERIOD", env["SF2LOKI_RUN__SCHEDULE_PERIOD"]); got != period {
					t.Errorf("%s: SF2LOKI_RUN__SCHEDULE_PERIOD %s, the schedule %q fires every %s at the shortest", cj.Name, got, cj.Spec.Schedule, period)
				}
				var environ []string
				for k, v := range env {
					environ = append(environ, k+"="+v)
				}
				cfg := loadRenderedConfig(t, m, environ)
				g, err := cfg.ForJob(cronGroup(cj))
				if err != nil {
					t.Fatalf("%s: %v", cj.Name, err)
				}
				for _, v := range budgetViolations(cj, g, period) {
					t.Errorf("%s: %s", cj.Name, v)
				}
			}
		})
	}
}

// TestProcessRejectsABrokenBudget shows the environment the chart passes is what the process
// checks: the default render with a deadline below the run's needs fails config.Load naming
// run.max_duration.
func TestProcessRejectsABrokenBudget(t *testing.T) {
	m := parseManifests(t, renderCase{}.render(t, "sf2loki"))
	_, err := tryLoadRenderedConfig(t, m, []string{"SF2LOKI_RUN__DEADLINE=60s", "SF2LOKI_RUN__SCHEDULE_PERIOD=300s", "SF2LOKI_RUN__TERMINATION_GRACE=30s"})
	var errs config.Errors
	if !errors.As(err, &errs) || !strings.Contains(err.Error(), "run.max_duration") {
		t.Fatalf("config.Load with a 60s deadline: %v, want an error naming run.max_duration", err)
	}
}

// TestSchedulePeriodDerivation compares the period the chart derives from a schedule with the
// shortest gap between its firings per robfig/cron. Restricted days only remove firings, so the
// chart may report less (never more) when they are restricted.
func TestSchedulePeriodDerivation(t *testing.T) {
	cases := []struct {
		schedule, override string
		exact              bool
		want               time.Duration // when the period is given (override) or not a cron gap
	}{
		{schedule: "*/5 * * * *", exact: true},
		{schedule: "*/7 * * * *", exact: true},
		{schedule: "5-59/10 * * * *", exact: true},
		{schedule: "15,45 * * * *", exact: true},
		{schedule: "0 * * * *", exact: true},
		{schedule: "0 */6 * * *", exact: true},
		{schedule: "30 9-17 * * *", exact: true},
		{schedule: "*/15 2 * * *", exact: true},
		{schedule: "0 0,12 * * *", exact: true},
		{schedule: "@hourly", exact: true},
		{schedule: "@daily", exact: true},
		{schedule: "0 9 * * 1-5", exact: true},
		{schedule: "0 0 1 * *"},
		{schedule: "0 0 1 * *", override: "672h", want: 672 * time.Hour},
		{schedule: "@every 10m", want: 10 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.schedule+c.override, func(t *testing.T) {
			set := []string{"cronjob.schedule=" + strings.ReplaceAll(c.schedule, ",", `\,`), "cronjob.concurrencyPolicy=Allow"}
			if c.override != "" {
				set = append(set, "cronjob.schedulePeriod="+c.override)
			}
			m := parseManifests(t, renderCase{set: set}.render(t, "sf2loki"))
			cjs := m.cronJobs(t)
			if len(cjs) != 1 {
				t.Fatalf("%d CronJobs", len(cjs))
			}
			got := parseSeconds(t, "SF2LOKI_RUN__SCHEDULE_PERIOD", envOf(cjs[0].Spec.JobTemplate.Spec.Template.Spec.Containers[0])["SF2LOKI_RUN__SCHEDULE_PERIOD"])
			switch {
			case c.want != 0:
				if got != c.want {
					t.Errorf("period %s, want %s", got, c.want)
				}
			case c.exact:
				if want := minCronGap(t, c.schedule); got != want {
					t.Errorf("period %s, the schedule's shortest gap is %s", got, want)
				}
			default:
				if gap := minCronGap(t, c.schedule); got <= 0 || got > gap {
					t.Errorf("period %s is not a positive lower bound of the shortest gap %s", got, gap)
				}
			}
		})
	}
}

// TestChartTimingDefaultsMatchTheBinary: the run and lease values the chart derives deadlines
// from are the binary's own defaults, so a value left out behaves the same in both.
func TestChartTimingDefaultsMatchTheBinary(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Config struct {
			Run   map[string]string `yaml:"run"`
			Lease map[string]string `yaml:"lease"`
		} `yaml:"config"`
	}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	d := config.Defaults()
	want := map[string]config.Duration{
		"run.max_duration": d.Run.MaxDuration, "run.push_timeout": d.Run.PushTimeout,
		"run.commit_timeout": d.Run.CommitTimeout, "run.release_timeout": d.Run.ReleaseTimeout,
		"run.startup_reserve": d.Run.StartupReserve, "run.margin": d.Run.Margin,
		"lease.duration": d.Lease.Duration, "lease.renew_interval": d.Lease.RenewInterval,
		"lease.acquire_wait": d.Lease.AcquireWait, "lease.max_clock_skew": d.Lease.MaxClockSkew,
	}
	for key, def := range want {
		section, name, _ := strings.Cut(key, ".")
		m := values.Config.Run
		if section == "lease" {
			m = values.Config.Lease
		}
		v, ok := m[name]
		if !ok {
			t.Errorf("values.yaml config.%s is not set; the chart derives the deadlines from it", key)
			continue
		}
		got, err := time.ParseDuration(v)
		if err != nil {
			t.Errorf("config.%s: %v", key, err)
			continue
		}
		if got != def.D() {
			t.Errorf("values.yaml config.%s = %s, the binary's default is %s", key, got, def)
		}
	}
}
