package cli

import (
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
)

// e2eWorld is a world whose children use the kubernetes lease on the real kube-apiserver,
// the S3 store on versitygw, and push to VictoriaLogs (which keeps duplicates, so they are
// counted with LogsQL instead of being folded like the simulated Loki does).
func e2eWorld(t *testing.T) (*world, setup, *testenv.Kube) {
	t.Helper()
	k := testenv.SharedKube(t)
	s3 := testenv.StartVersitygw(t)
	vl := testenv.StartVictoriaLogs(t)
	w := newWorldWith(t, victoriaReceiver{vl})
	ns := k.NewNamespace(t)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: k.Host, CertificateAuthorityData: k.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: k.AdminToken}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "admin", Namespace: ns}
	kc.CurrentContext = "e2e"
	path := filepath.Join(w.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	s := setup{store: "s3", s3: s3, bucket: s3.NewBucket(t), leaseType: "kubernetes", kubeconfig: path, namespace: ns}
	return w, s, k
}

// TestE2EAdversarialOverlappingRuns is TestAdversarialOverlappingRuns with a Kubernetes Lease,
// the S3 store and VictoriaLogs.
func TestE2EAdversarialOverlappingRuns(t *testing.T) {
	w, s, _ := e2eWorld(t)
	s.elf, s.leaseDuration = true, 3*time.Second
	overlappingRuns(t, w, s)
}

// TestE2EAdversarialSIGKILL is TestAdversarialSIGKILL with a Kubernetes Lease, the S3 store
// and VictoriaLogs.
func TestE2EAdversarialSIGKILL(t *testing.T) {
	w, s, _ := e2eWorld(t)
	s.elf, s.leaseDuration, s.skew = true, 2*time.Second, 200*time.Millisecond
	sigkillEachStep(t, w, s)
}

// TestE2EAdversarialKubeLeaseDeleted is scenarios 24 and 25 of reference/lease-store.md §4:
// the Kubernetes Lease is deleted while a run holds it mid-batch. The run's renewal finds it
// gone and stops intake; the pushed prefix is still committed (nobody claimed since), so the
// run ends partial. The next run recreates the Lease and continues above the document's
// fence (epoch = fence + 1, not 1), and nothing is lost.
func TestE2EAdversarialKubeLeaseDeleted(t *testing.T) {
	w, s, k := e2eWorld(t)
	s.leaseDuration, s.skew = 2*time.Second, 200*time.Millisecond
	cfg := w.writeConfig("run", s)
	leases := k.AdminClient(t).CoordinationV1().Leases(s.namespace)
	for round := range 2 {
		w.insertLogins(30)
		ac := w.start(childSpec{name: "holder", config: cfg, env: map[string]string{envSleep: "after_push:1:2500ms"}})
		ac.waitStep(t, string(job.StepAfterPush), 1)
		if err := leases.Delete(t.Context(), "sf2loki", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		a := ac.wait()
		expect(t, a, false, job.OutcomePartial)
		if a.report.Commits != 1 || a.report.Records != 5 {
			t.Fatalf("round %d: %v: want the one pushed batch committed after the lease was lost", round, a)
		}
		b := w.run(childSpec{name: "next", config: cfg})
		expect(t, b, false, job.OutcomeOK)
		if b.report.Epoch != a.report.Epoch+1 {
			t.Fatalf("round %d: %v: the recreated Lease must continue above the fence %d", round, b, a.report.Epoch)
		}
		l, err := leases.Get(t.Context(), "sf2loki", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Spec.LeaseTransitions == nil || uint64(*l.Spec.LeaseTransitions) != b.report.Epoch {
			t.Fatalf("round %d: recreated Lease has leaseTransitions %v, want %d", round, l.Spec.LeaseTransitions, b.report.Epoch)
		}
	}
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{faulted: 2, maxRecords: 5})
}
