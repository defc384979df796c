package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// NodeOptions configure a Node.
type NodeOptions struct {
	// Namespace is where the Node runs Pods; Pods elsewhere are not its business.
	Namespace string
	// Binary is the executable that stands in for every container image, run as the image's
	// entrypoint (Entrypoint) when the container names no command.
	Binary string
	// Entrypoint is the image's ENTRYPOINT path; default /usr/local/bin/sf2loki (the image of
	// deploy/docker). The Binary is placed there in the Pod's root directory.
	Entrypoint string
	// ImageUser and ImageGroup are the image's USER, used when the Pod names no runAsUser or
	// runAsGroup; default 65532 (distroless nonroot).
	ImageUser, ImageGroup int64
	// Hold, when set, is asked before the Node reports a Pod's container as terminated (after
	// the process exited, or was killed because the Pod was deleted). A non-nil channel delays
	// the report, and any reaction to a deletion, until it is closed: a node that has stopped
	// reporting, so the Pod stays Running past its process's end.
	Hold func(pod *corev1.Pod) <-chan struct{}
}

// PodRun is what the Node observed of one Pod's container.
type PodRun struct {
	Pod      string // the Pod's name
	Job      string // the Job that owns it (its job-name label), if any
	Started  time.Time
	Exited   time.Time // zero while running
	ExitCode int       // 128+signal when killed by a signal
	Killed   bool      // the Pod was deleted while the process ran (SIGTERM, then SIGKILL after the grace period)
	Stdout   string
	Stderr   string
}

// Node is a test fixture standing in for the kubelet of one node; it is not a kubelet. There
// is no container runtime and no image: it binds each Pod of its namespace to itself (the
// scheduler's part), runs the Pod's one container as a local process of Binary in a chroot
// holding only what the Pod mounts, and reports the Pod's status back to the API server so the
// controllers act on real exit codes. What it does, as a kubelet would:
//
//   - ConfigMap, Secret and emptyDir volumes are written into the Pod's root directory at their
//     mount paths (items, defaultMode, and ownership root:fsGroup); other volume types fail the Pod.
//   - automountServiceAccountToken mounts a token from the TokenRequest API, bound to the Pod,
//     with the API server's CA and the namespace, at /var/run/secrets/kubernetes.io/serviceaccount,
//     and sets KUBERNETES_SERVICE_HOST and _PORT to the API server's loopback address.
//   - env (value, fieldRef, resourceFieldRef, secretKeyRef, configMapKeyRef), envFrom and
//     $(VAR) references in args are resolved; HOSTNAME is the Pod's name.
//   - the process runs as runAsUser:runAsGroup (else the image's user) with fsGroup as a
//     supplementary group, so file modes matter as on a node.
//   - a deleted Pod's process gets SIGTERM, then SIGKILL after its grace period; the Pod is then
//     reported terminated and removed with a zero grace period.
//
// Only Pods with restartPolicy Never and one container are run (a CronJob's Job Pods); others
// fail the test. It needs root, for chroot and the Pod's user.
type Node struct {
	t      testing.TB
	k      *Kube
	client kubernetes.Interface
	opts   NodeOptions
	name   string
	dir    string

	mu   sync.Mutex
	pods map[string]*nodePod // by UID
	runs []*PodRun
	wg   sync.WaitGroup
}

// nodePod is the Node's record of one Pod.
type nodePod struct {
	deleted chan struct{} // closed when the Pod gets a deletionTimestamp or disappears
	once    sync.Once
	run     *PodRun
}

// StartNode starts a node stand-in for opts.Namespace; it stops, killing what still runs,
// when the test ends. It skips or fails the test (per SF2LOKI_REQUIRE_REAL_SERVERS) when it
// cannot run here.
func (k *Kube) StartNode(t testing.TB, opts NodeOptions) *Node {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "node stand-in", errors.New("it needs root: it runs each Pod in a chroot as the Pod's user"))
	}
	if opts.Entrypoint == "" {
		opts.Entrypoint = "/usr/local/bin/sf2loki"
	}
	if opts.ImageUser == 0 {
		opts.ImageUser = 65532
	}
	if opts.ImageGroup == 0 {
		opts.ImageGroup = 65532
	}
	n := &Node{t: t, k: k, client: k.AdminClient(t), opts: opts, name: "standin-" + randomHex(5),
		dir: t.TempDir(), pods: map[string]*nodePod{}}
	// Traversable by the Pods' users: each Pod's root lives below.
	if err := os.Chmod(n.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"sf2loki.io/node-stand-in": "true"}}}
	if _, err := n.client.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		cancel()
		t.Fatalf("node stand-in: create Node %s: %v", n.name, err)
	}
	watching := make(chan struct{})
	go n.watch(ctx, watching)
	t.Cleanup(func() {
		cancel()
		<-watching
		n.mu.Lock()
		for _, p := range n.pods {
			p.markDeleted()
		}
		n.mu.Unlock()
		n.wg.Wait()
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		_ = n.client.CoreV1().Nodes().Delete(dctx, n.name, metav1.DeleteOptions{})
	})
	return n
}

func (p *nodePod) markDeleted() { p.once.Do(func() { close(p.deleted) }) }

// Runs returns what the Node observed so far, in the order the Pods started.
func (n *Node) Runs() []PodRun {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]PodRun, 0, len(n.runs))
	for _, r := range n.runs {
		out = append(out, *r)
	}
	return out
}

// watch follows the namespace's Pods until ctx ends, starting each new one and passing on
// deletions. A watch that ends is resumed from a fresh list.
func (n *Node) watch(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	pods := n.client.CoreV1().Pods(n.opts.Namespace)
	for ctx.Err() == nil {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		for i := range list.Items {
			n.observe(ctx, &list.Items[i], false)
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
		if err != nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Bookmark || ev.Type == watch.Error {
				continue // a bookmark's Pod carries only a resourceVersion
			}
			n.observe(ctx, pod, ev.Type == watch.Deleted)
		}
		w.Stop()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// observe starts a Pod the Node has not seen, and passes on its deletion.
func (n *Node) observe(ctx context.Context, pod *corev1.Pod, gone bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, seen := n.pods[string(pod.UID)]
	if !seen {
		if gone || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
			(pod.Spec.NodeName != "" && pod.Spec.NodeName != n.name) {
			return
		}
		p = &nodePod{deleted: make(chan struct{})}
		n.pods[string(pod.UID)] = p
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.runPod(ctx, pod.DeepCopy(), p)
		}()
	}
	if gone || pod.DeletionTimestamp != nil {
		p.markDeleted()
	}
}

// runPod is one Pod's life on the node.
func (n *Node) runPod(ctx context.Context, pod *corev1.Pod, p *nodePod) {
	t := n.t
	if err := n.bind(ctx, pod); err != nil {
		if ctx.Err() == nil && !apierrors.IsNotFound(err) {
			t.Errorf("node stand-in: bind %s: %v", pod.Name, err)
		}
		return
	}
	select {
	case <-p.deleted: // deleted before it started: nothing to stop
		n.removeDeleted(ctx, pod)
		return
	default:
	}
	cmd, out, err := n.prepare(ctx, pod)
	if err != nil {
		if ctx.Err() == nil {
			t.Errorf("node stand-in: cannot run %s: %v", pod.Name, err)
			n.reportFailedToStart(ctx, pod, err)
		}
		return
	}
	run := &PodRun{Pod: pod.Name, Job: pod.Labels["batch.kubernetes.io/job-name"]}
	if run.Job == "" {
		run.Job = pod.Labels["job-name"]
	}
	if err := cmd.Start(); err != nil {
		t.Errorf("node stand-in: start %s: %v", pod.Name, err)
		n.reportFailedToStart(ctx, pod, err)
		return
	}
	run.Started = time.Now()
	n.mu.Lock()
	p.run = run
	n.runs = append(n.runs, run)
	n.mu.Unlock()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	n.updateStatus(ctx, pod, func(st *corev1.PodStatus) { runningStatus(st, pod, run) })

	var waitErr error
	select {
	case waitErr = <-exited:
	case <-p.deleted:
		grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = *pod.Spec.TerminationGracePeriodSeconds
		}
		if cur, err := n.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil && cur.DeletionGracePeriodSeconds != nil {
			grace = *cur.DeletionGracePeriodSeconds
		}
		n.mu.Lock()
		run.Killed = true
		n.mu.Unlock()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case waitErr = <-exited:
		case <-time.After(time.Duration(grace) * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			waitErr = <-exited
		}
	}
	code := exitCode(cmd, waitErr)
	n.mu.Lock()
	run.Exited, run.ExitCode = time.Now(), code
	run.Stdout, run.Stderr = out.stdout.String(), out.stderr.String()
	n.mu.Unlock()

	if n.opts.Hold != nil {
		if hold := n.opts.Hold(pod); hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return
			}
		}
	}
	n.updateStatus(ctx, pod, func(st *corev1.PodStatus) { terminatedStatus(st, pod, run) })
	// A deleted Pod is removed once its container is reported terminated, as the kubelet does.
	select {
	case <-p.deleted:
		n.removeDeleted(ctx, pod)
	case <-ctx.Done():
	}
}

// removeDeleted removes a deleted Pod with a zero grace period, as the kubelet does once the
// Pod's containers are gone. Finalizers (the Job controller's) still hold it until removed.
func (n *Node) removeDeleted(ctx context.Context, pod *corev1.Pod) {
	zero := int64(0)
	err := n.client.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name,
		metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		n.t.Errorf("node stand-in: remove deleted pod %s: %v", pod.Name, err)
	}
}

// bind assigns the Pod to this node through the binding subresource, as a scheduler does; a
// bound Pod's deletion is graceful (the node must confirm it).
func (n *Node) bind(ctx context.Context, pod *corev1.Pod) error {
	if pod.Spec.NodeName == n.name {
		return nil
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: n.name}}
	return n.client.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{})
}

type podOutput struct{ stdout, stderr LockedBuffer }

// prepare builds the Pod's root directory and its process.
func (n *Node) prepare(ctx context.Context, pod *corev1.Pod) (*exec.Cmd, *podOutput, error) {
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return nil, nil, fmt.Errorf("restartPolicy %s: the stand-in runs only restartPolicy Never pods", pod.Spec.RestartPolicy)
	}
	if len(pod.Spec.Containers) != 1 || len(pod.Spec.InitContainers) != 0 {
		return nil, nil, fmt.Errorf("%d containers and %d init containers: the stand-in runs exactly one container", len(pod.Spec.Containers), len(pod.Spec.InitContainers))
	}
	c := pod.Spec.Containers[0]
	uid, gid, groups := n.identity(pod, c)
	root := filepath.Join(n.dir, pod.Name+"-"+string(pod.UID)[:8])
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, nil, err
	}
	fsGroup := -1
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.FSGroup != nil {
		fsGroup = int(*pod.Spec.SecurityContext.FSGroup)
	}
	volumes := map[string]string{} // volume name -> materialised directory
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(n.dir, "volumes", string(pod.UID), v.Name)
		if err := n.materialise(ctx, pod, v, dir, fsGroup); err != nil {
			return nil, nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		volumes[v.Name] = dir
	}
	mounts := slices.Clone(c.VolumeMounts)
	env := map[string]string{"HOSTNAME": pod.Name, "PATH": "/usr/local/bin:/usr/bin:/bin"}
	if automount(ctx, n.client, pod) {
		dir := filepath.Join(n.dir, "volumes", string(pod.UID), "kube-api-access")
		if err := n.serviceAccountVolume(ctx, pod, dir, fsGroup); err != nil {
			return nil, nil, fmt.Errorf("service account token: %w", err)
		}
		volumes["kube-api-access"] = dir
		mounts = append(mounts, corev1.VolumeMount{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
		host := strings.TrimPrefix(n.k.Host, "https://")
		h, port, _ := strings.Cut(host, ":")
		env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"] = h, port
	}
	for _, m := range mounts {
		src, ok := volumes[m.Name]
		if !ok {
			return nil, nil, fmt.Errorf("mount %s: no volume %q", m.MountPath, m.Name)
		}
		if m.SubPath != "" {
			return nil, nil, fmt.Errorf("mount %s: subPath is not supported by the stand-in", m.MountPath)
		}
		if err := copyTree(src, filepath.Join(root, m.MountPath)); err != nil {
			return nil, nil, fmt.Errorf("mount %s: %w", m.MountPath, err)
		}
	}
	entry := n.opts.Entrypoint
	args := c.Args
	if len(c.Command) > 0 {
		entry, args = c.Command[0], append(slices.Clone(c.Command[1:]), c.Args...)
		if entry != n.opts.Entrypoint {
			return nil, nil, fmt.Errorf("command %q: the stand-in only runs the image's entrypoint %s", entry, n.opts.Entrypoint)
		}
	}
	if err := linkOrCopy(n.opts.Binary, filepath.Join(root, entry)); err != nil {
		return nil, nil, err
	}
	if err := n.containerEnv(ctx, pod, c, env); err != nil {
		return nil, nil, err
	}
	expanded := make([]string, len(args))
	for i, a := range args {
		expanded[i] = expandVars(a, env)
	}
	cmd := exec.Command(entry, expanded...)
	cmd.Path = entry // resolved inside the chroot
	cmd.Dir = "/"
	if c.WorkingDir != "" {
		cmd.Dir = c.WorkingDir
	}
	cmd.Env = nil
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	slices.Sort(cmd.Env)
	out := &podOutput{}
	cmd.Stdout, cmd.Stderr = &out.stdout, &out.stderr
	cmd.SysProcAttr = podProcAttr(root, uid, gid, groups)
	return cmd, out, nil
}

// identity is the process's user, group and supplementary groups, as a kubelet derives them.
func (n *Node) identity(pod *corev1.Pod, c corev1.Container) (uid, gid uint32, groups []uint32) {
	u, g := n.opts.ImageUser, n.opts.ImageGroup
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			u = *psc.RunAsUser
		}
		if psc.RunAsGroup != nil {
			g = *psc.RunAsGroup
		}
		if psc.FSGroup != nil {
			groups = append(groups, uint32(*psc.FSGroup))
		}
		for _, s := range psc.SupplementalGroups {
			groups = append(groups, uint32(s))
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			u = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			g = *sc.RunAsGroup
		}
	}
	return uint32(u), uint32(g), groups
}

// automount says whether the Pod gets a service-account token: the Pod's setting, else its
// ServiceAccount's, else true.
func automount(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	sa, err := client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
	if err == nil && sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// materialise writes one volume's files into dir.
func (n *Node) materialise(ctx context.Context, pod *corev1.Pod, v corev1.Volume, dir string, fsGroup int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	switch {
	case v.EmptyDir != nil:
		return os.Chmod(dir, 0o777|os.ModeSticky)
	case v.ConfigMap != nil:
		cm, err := n.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
			return nil
		}
		if err != nil {
			return err
		}
		data := map[string][]byte{}
		for k, s := range cm.Data {
			data[k] = []byte(s)
		}
		for k, b := range cm.BinaryData {
			data[k] = b
		}
		return writeKeys(dir, data, v.ConfigMap.Items, v.ConfigMap.DefaultMode, fsGroup)
	case v.Secret != nil:
		s, err := n.client.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && v.Secret.Optional != nil && *v.Secret.Optional {
			return nil
		}
		if err != nil {
			return err
		}
		return writeKeys(dir, s.Data, v.Secret.Items, v.Secret.DefaultMode, fsGroup)
	default:
		return errors.New("only configMap, secret and emptyDir volumes are supported by the stand-in")
	}
}

// writeKeys writes the selected keys (all when items is empty) with the volume's file mode,
// owned by root and, with an fsGroup, by that group.
func writeKeys(dir string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, fsGroup int) error {
	mode := os.FileMode(corev1.ConfigMapVolumeSourceDefaultMode)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode)
	}
	if len(items) == 0 {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("no key %q", it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		if err := writeOwned(filepath.Join(dir, it.Path), b, m, fsGroup); err != nil {
			return err
		}
	}
	return nil
}

func writeOwned(path string, b []byte, mode os.FileMode, fsGroup int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	if err := os.Chown(path, 0, fsGroup); err != nil {
		return err
	}
	return os.Chmod(path, mode.Perm())
}

// serviceAccountVolume writes the token (TokenRequest, bound to the Pod), the API server's CA
// and the namespace, as the kubelet's projected kube-api-access volume does.
func (n *Node) serviceAccountVolume(ctx context.Context, pod *corev1.Pod, dir string, fsGroup int) error {
	exp := int64(3600)
	tr, err := n.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &exp,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": n.k.CAData, "namespace": []byte(pod.Namespace)} {
		if err := writeOwned(filepath.Join(dir, name), b, 0o644, fsGroup); err != nil {
			return err
		}
	}
	return nil
}

// containerEnv adds the container's envFrom and env to env, in the kubelet's order.
func (n *Node) containerEnv(ctx context.Context, pod *corev1.Pod, c corev1.Container, env map[string]string) error {
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.SecretRef != nil:
			s, err := n.client.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
					continue
				}
				return fmt.Errorf("envFrom secret %s: %w", from.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		case from.ConfigMapRef != nil:
			cm, err := n.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
					continue
				}
				return fmt.Errorf("envFrom configmap %s: %w", from.ConfigMapRef.Name, err)
			}
			data = cm.Data
		}
		for k, v := range data {
			env[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = expandVars(e.Value, env)
			continue
		}
		v, err := n.envValue(ctx, pod, c, e.ValueFrom)
		if err != nil {
			return fmt.Errorf("env %s: %w", e.Name, err)
		}
		env[e.Name] = v
	}
	return nil
}

func (n *Node) envValue(ctx context.Context, pod *corev1.Pod, c corev1.Container, from *corev1.EnvVarSource) (string, error) {
	switch {
	case from.FieldRef != nil:
		path := from.FieldRef.FieldPath
		switch {
		case path == "metadata.name":
			return pod.Name, nil
		case path == "metadata.namespace":
			return pod.Namespace, nil
		case path == "metadata.uid":
			return string(pod.UID), nil
		case path == "spec.nodeName":
			return n.name, nil
		case path == "spec.serviceAccountName":
			return pod.Spec.ServiceAccountName, nil
		case path == "status.podIP", path == "status.hostIP":
			return "127.0.0.1", nil
		case strings.HasPrefix(path, "metadata.labels['"):
			return pod.Labels[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")], nil
		case strings.HasPrefix(path, "metadata.annotations['"):
			return pod.Annotations[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")], nil
		}
		return "", fmt.Errorf("fieldRef %s is not supported by the stand-in", path)
	case from.ResourceFieldRef != nil:
		r := from.ResourceFieldRef
		kind, name, _ := strings.Cut(r.Resource, ".")
		list := c.Resources.Limits
		if kind == "requests" {
			list = c.Resources.Requests
		}
		q, ok := list[corev1.ResourceName(name)]
		if !ok {
			return "", fmt.Errorf("resourceFieldRef %s: the container sets no %s (a node would use its allocatable capacity)", r.Resource, r.Resource)
		}
		divisor := r.Divisor
		if divisor.IsZero() {
			divisor = resource.MustParse("1")
		}
		return strconv.FormatInt((q.MilliValue()+divisor.MilliValue()-1)/divisor.MilliValue(), 10), nil
	case from.SecretKeyRef != nil:
		s, err := n.client.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		b, ok := s.Data[from.SecretKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("secret %s has no key %s", from.SecretKeyRef.Name, from.SecretKeyRef.Key)
		}
		return string(b), nil
	case from.ConfigMapKeyRef != nil:
		cm, err := n.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := cm.Data[from.ConfigMapKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("configmap %s has no key %s", from.ConfigMapKeyRef.Name, from.ConfigMapKeyRef.Key)
		}
		return v, nil
	}
	return "", errors.New("empty valueFrom")
}

// expandVars replaces $(NAME) with NAME's value when it is defined and $$ with $, as the
// kubelet does in env values, command and args.
func expandVars(s string, env map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// copyTree copies the regular files below src to dst, keeping modes and ownership.
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if fi.IsDir() {
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return os.Chmod(target, fi.Mode().Perm()|fi.Mode()&os.ModeSticky)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		return writeOwned(target, b, fi.Mode(), int(st.Gid))
	})
}

// linkOrCopy places the binary at dst: a hard link when the file systems allow it.
func linkOrCopy(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// exitCode is the container's exit code as a runtime reports it: 128+signal when killed.
func exitCode(cmd *exec.Cmd, waitErr error) int {
	if cmd.ProcessState == nil {
		return 128 + int(syscall.SIGKILL)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	_ = waitErr
	return cmd.ProcessState.ExitCode()
}

// updateStatus changes the Pod's status, retrying on conflicts. A Pod that is gone is left.
func (n *Node) updateStatus(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.PodStatus)) {
	pods := n.client.CoreV1().Pods(pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID {
			return apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
		}
		mutate(&cur.Status)
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		n.t.Errorf("node stand-in: update status of %s: %v", pod.Name, err)
	}
}

func (n *Node) reportFailedToStart(ctx context.Context, pod *corev1.Pod, cause error) {
	run := &PodRun{Pod: pod.Name, Started: time.Now(), Exited: time.Now(), ExitCode: 128}
	n.updateStatus(ctx, pod, func(st *corev1.PodStatus) {
		terminatedStatus(st, pod, run)
		st.ContainerStatuses[0].State.Terminated.Reason = "StartError"
		st.ContainerStatuses[0].State.Terminated.Message = cause.Error()
	})
}

func podConditions(st *corev1.PodStatus, ready bool) {
	now := metav1.Now()
	set := func(typ corev1.PodConditionType, ok bool) {
		status := corev1.ConditionFalse
		if ok {
			status = corev1.ConditionTrue
		}
		for i := range st.Conditions {
			if st.Conditions[i].Type == typ {
				if st.Conditions[i].Status != status {
					st.Conditions[i].Status, st.Conditions[i].LastTransitionTime = status, now
				}
				return
			}
		}
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: now})
	}
	set(corev1.PodScheduled, true)
	set(corev1.PodInitialized, true)
	set(corev1.ContainersReady, ready)
	set(corev1.PodReady, ready)
}

func runningStatus(st *corev1.PodStatus, pod *corev1.Pod, run *PodRun) {
	started := metav1.NewTime(run.Started)
	st.Phase = corev1.PodRunning
	st.StartTime = &started
	st.HostIP, st.PodIP = "127.0.0.1", "127.0.0.1"
	podConditions(st, true)
	c := pod.Spec.Containers[0]
	yes := true
	st.ContainerStatuses = []corev1.ContainerStatus{{
		Name: c.Name, Image: c.Image, ImageID: "stand-in://" + c.Image, ContainerID: "stand-in://" + string(pod.UID),
		Ready: true, Started: &yes, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
	}}
}

func terminatedStatus(st *corev1.PodStatus, pod *corev1.Pod, run *PodRun) {
	st.Phase = corev1.PodSucceeded
	reason := "Completed"
	if run.ExitCode != 0 {
		st.Phase, reason = corev1.PodFailed, "Error"
	}
	if st.StartTime == nil {
		started := metav1.NewTime(run.Started)
		st.StartTime = &started
	}
	podConditions(st, false)
	c := pod.Spec.Containers[0]
	no := false
	st.ContainerStatuses = []corev1.ContainerStatus{{
		Name: c.Name, Image: c.Image, ImageID: "stand-in://" + c.Image, ContainerID: "stand-in://" + string(pod.UID),
		Started: &no, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: int32(run.ExitCode), Reason: reason, StartedAt: metav1.NewTime(run.Started), FinishedAt: metav1.NewTime(run.Exited),
			ContainerID: "stand-in://" + string(pod.UID),
		}},
	}}
}
