// Package deploytest holds the tests of what sf2loki ships besides its code: the Helm chart
// (charts/sf2loki), the plain Kubernetes manifests, the container image's build stage and the
// systemd units (deploy/), and the operator documentation (docs/).
//
// The tests render the chart with the real helm binary (lint, golden renders, render-time
// failures, the hardening and the least-privilege RBAC of every render), check the time-budget
// invariants of the time budget (docs/fencing.md) on the rendered numbers and through config.Load,
// create every rendered object on a real kube-apiserver (TestE2E*), authenticate as the chart's
// ServiceAccount to prove its Role, run two job groups as concurrent `sf2loki run-once --job`
// processes against the simulated org, run the Dockerfile's build stage as a script and verify
// the systemd units with systemd-analyze.
//
// Golden renders live in testdata/golden; regenerate them with SF2LOKI_UPDATE_GOLDEN=1.
package deploytest
