// Package testenv is sf2loki's real-server test harness.
//
// It builds the pinned real servers and tools of docs/testing.md once into a cache outside the
// repository (EnsureTool, package toolcache), and starts them on loopback with random ports for
// end-to-end tests: VictoriaLogs as the Loki receiver (StartVictoriaLogs), versitygw as the S3 store
// (StartVersitygw), kube-apiserver on etcd with token authentication and RBAC (StartKube,
// SharedKube), kube-controller-manager's CronJob and Job controllers against it
// (SharedKubeWithControllers), a node stand-in that runs the Pods of one namespace as local
// processes in place of a kubelet (Kube.StartNode, a test fixture documented on Node), and
// fake-gcs-server in process (StartGCS).
//
// Every Start function skips the test under -short. When a server's binary cannot be built it
// fails the test if SF2LOKI_REQUIRE_REAL_SERVERS=1 and skips it otherwise. Servers are stopped
// and their files removed when the test ends; a server's log tail is printed when it fails to
// start or when the test fails. Child processes die with the test binary (Pdeathsig), so a
// crashed test run leaks nothing.
//
// Packages that use shared servers (SharedKube) call Main from their TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
package testenv
