// Package deploytest holds the tests of what sf2loki ships besides its code: the Helm chart
// (charts/sf2loki), the plain Kubernetes manifests, the container image's build stage and the
// systemd units (deploy/), the release configuration (.goreleaser.yaml), and the operator
// documentation (docs/).
//
// The tests render the chart with the real helm binary (lint, golden renders, render-time
// failures, the hardening and the least-privilege RBAC of every render, the conventions of common
// charts), check the time-budget invariants of docs/fencing.md on the rendered numbers and through
// config.Load, create every rendered object on a real kube-apiserver (TestE2E*), authenticate as
// the chart's ServiceAccount to prove its Role, and run the chart's CronJobs for real: helm
// installs a release, kube-controller-manager's CronJob and Job controllers act on it, and the
// node stand-in of package testenv runs each Pod as a process of the real sf2loki binary against
// the simulated org and the strict receiver (controllers_test.go). They also run two job groups as
// concurrent `sf2loki run-once --job` processes, run the Dockerfile's build stage as a script,
// verify the systemd units with systemd-analyze, and build a one-platform snapshot of the release
// with goreleaser.
//
// Golden renders live in testdata/golden; regenerate them with SF2LOKI_UPDATE_GOLDEN=1.
package deploytest
