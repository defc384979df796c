package cli

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
	gw := testenv.StartVersitygw(t)
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
	s := setup{store: "s3", s3: gw, bucket: gw.NewBucket(t), leaseType: "kubernetes", kubeconfig: path, namespace: ns}
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

// TestE2EAdversarialKubeLeaseDeleted is scenarios 24 and 25 of docs/testing.md's scenario map:
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

// TestE2EAdversarialDocumentDeletedKubeLease is scenario 29 with the kubernetes lease: the
// document is deleted between runs while the Lease keeps its counter. The next run's epoch
// continues from the Lease, its sources start from the lookback, and its report says so.
func TestE2EAdversarialDocumentDeletedKubeLease(t *testing.T) {
	w, s, _ := e2eWorld(t)
	cfg := w.writeConfig("run", s)
	w.insertLogins(10)
	r1 := w.run(childSpec{name: "first", config: cfg})
	expect(t, r1, false, job.OutcomeOK)
	w.insertLogins(5)
	r2 := w.run(childSpec{name: "second", config: cfg})
	expect(t, r2, false, job.OutcomeOK)
	if _, err := s.s3.Client().DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("sf2loki/state.json")}); err != nil {
		t.Fatal(err)
	}
	w.newGeneration()
	r3 := w.run(childSpec{name: "after-delete", config: cfg})
	expect(t, r3, false, job.OutcomeOK)
	if !hasNote(r3, "did not exist") || r3.report.Records != 15 || r3.report.Epoch != r2.report.Epoch+1 {
		t.Fatalf("%v notes %q: want the lookback again (15 records) under epoch %d, and the note", r3, r3.report.Notes, r2.report.Epoch+1)
	}
	w.verify(t, verifyOpts{dupsAllowed: true})
}

// TestE2EAdversarialBothDeletedStaleClaimant is scenario 30: a run acquires the Lease and is
// stopped before it claims; the operator deletes the Lease and the document; a new run starts
// over at epoch 1. The stopped run, continued, claims once with its higher epoch (the
// document's fence is below it), and the next run continues above that fence: nobody is locked
// out.
func TestE2EAdversarialBothDeletedStaleClaimant(t *testing.T) {
	w, s, k := e2eWorld(t)
	s.leaseDuration, s.skew = 2*time.Second, 200*time.Millisecond
	cfg := w.writeConfig("run", s)
	for i := range 2 {
		w.insertLogins(10)
		expect(t, w.run(childSpec{name: fmt.Sprintf("run%d", i), config: cfg}), false, job.OutcomeOK)
	}
	a := w.start(childSpec{name: "stale", config: cfg, env: map[string]string{envStop: stepAfterAcquire}})
	a.waitStopped(t)
	if err := k.AdminClient(t).CoordinationV1().Leases(s.namespace).Delete(t.Context(), "sf2loki", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.s3.Client().DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("sf2loki/state.json")}); err != nil {
		t.Fatal(err)
	}
	w.newGeneration()
	b := w.run(childSpec{name: "fresh", config: cfg})
	expect(t, b, false, job.OutcomeOK)
	if b.report.Epoch != 1 {
		t.Fatalf("%v: with Lease and document gone the epochs start over", b)
	}
	a.signal(t, syscall.SIGCONT)
	ra := a.wait()
	stale := claimedEpoch(t, a)
	if stale != 3 {
		t.Fatalf("%v: the stale run should claim once with its epoch 3, claimed %d", ra, stale)
	}
	// Its claim is legitimate (its epoch is above the fence); what follows depends on how soon
	// its renewer finds the Lease held by the fresh run's epoch: any of these, never integrity.
	expect(t, ra, false, job.OutcomeOK, job.OutcomeUnavailable, job.OutcomePartial, job.OutcomeFenced)
	w.insertLogins(5)
	c := w.run(childSpec{name: "after", config: cfg, args: []string{"--wait", "5s"}})
	expect(t, c, false, job.OutcomeOK)
	if c.report.Epoch != stale+1 {
		t.Fatalf("%v: want epoch %d, above the stale claim", c, stale+1)
	}
	w.catchUp(t, cfg)
	w.verify(t, verifyOpts{dupsAllowed: true})
}
