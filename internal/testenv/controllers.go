package testenv

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// KubeControllers are the controllers kube-controller-manager runs against the shared API
// server: the CronJob controller creates Jobs on schedule, the Job controller creates their
// Pods and applies podFailurePolicy, backoffLimit and activeDeadlineSeconds to the Pods' exit
// codes. Nothing else runs: no scheduler, no kubelet (see Node), no garbage collector (Jobs a
// CronJob deletes past its history limits leave their Pods behind), no namespace controller.
var KubeControllers = []string{"cronjob-controller", "job-controller"}

var sharedControllers struct {
	sync.Mutex
	started bool
	toolErr error
	err     error
}

// SharedKubeWithControllers returns the test binary's shared kube-apiserver (SharedKube) with
// kube-controller-manager running KubeControllers against it, starting it on first use; Main
// stops it. The controllers act on every namespace, so CronJobs other tests create there get
// Jobs and Pods too (which stay Pending unless a Node runs them).
func SharedKubeWithControllers(t testing.TB) *Kube {
	t.Helper()
	k := SharedKube(t)
	sharedControllers.Lock()
	defer sharedControllers.Unlock()
	if !sharedControllers.started {
		sharedControllers.started = true
		sharedControllers.toolErr, sharedControllers.err = startSharedControllers(k)
	}
	if sharedControllers.toolErr != nil {
		unavailable(t, "kube-controller-manager", sharedControllers.toolErr)
	}
	if sharedControllers.err != nil {
		t.Fatal(sharedControllers.err)
	}
	return k
}

func startSharedControllers(k *Kube) (toolErr, err error) {
	ctx := context.Background()
	bin, err := EnsureTool(ctx, ToolKubeControllerManager)
	if err != nil {
		return err, nil
	}
	dir, err := os.MkdirTemp("", "sf2loki-kcm-")
	if err != nil {
		return nil, err
	}
	p, err := retryOnPortConflict(func() (*process, error) {
		return startControllerManager(ctx, bin, dir, k)
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	registerShared("kube-controller-manager", func() {
		p.stop()
		_ = os.RemoveAll(dir)
	}, p.tail)
	return nil, nil
}

// startControllerManager runs kube-controller-manager as the cluster admin, without leader
// election, serving /healthz on a fresh loopback port.
func startControllerManager(ctx context.Context, bin, dir string, k *Kube) (*process, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := k.WriteKubeconfig(kubeconfig, k.AdminToken); err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "certs")
	_ = os.RemoveAll(certDir) // the generated certificate names the port of an earlier attempt
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(KubeControllers, ","),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--cert-dir=" + certDir,
		"--profiling=false",
		"--v=2",
	}
	p, err := startProcess("kube-controller-manager", filepath.Join(dir, "kube-controller-manager.log"), bin, args, nil)
	if err != nil {
		return nil, err
	}
	// The self-signed serving certificate written at startup is its own trust root.
	if _, err := p.waitServing(ctx, filepath.Join(certDir, "kube-controller-manager.crt"),
		"https://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz", ""); err != nil {
		return nil, err
	}
	return p, nil
}

// WriteKubeconfig writes a kubeconfig file for the API server that authenticates with token.
func (k *Kube) WriteKubeconfig(path, token string) error {
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
  - name: test
    cluster:
      server: %s
      certificate-authority-data: %s
users:
  - name: test
    user:
      token: %s
contexts:
  - name: test
    context: {cluster: test, user: test}
current-context: test
`, k.Host, base64.StdEncoding.EncodeToString(k.CAData), token)
	return os.WriteFile(path, []byte(content), 0o600)
}
