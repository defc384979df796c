package doctor

import (
	"context"
	"fmt"
	"strings"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sf2loki/sf2loki/internal/kubeclient"
)

// Kubernetes resources whose permissions doctor checks.
const (
	ResourceLeases     = "leases"     // coordination.k8s.io
	ResourceConfigMaps = "configmaps" // core
)

// KubeObject is the Kubernetes object sf2loki reads and writes (its Lease, or its ConfigMap
// store). Permissions are checked with server-side dry runs: the API server authorizes them
// like real requests and persists nothing.
type KubeObject struct {
	// Client talks to the API server with sf2loki's credentials. When nil, ClientErr says why
	// it could not be built.
	Client    *kubeclient.Client
	ClientErr error
	Resource  string // ResourceLeases or ResourceConfigMaps
	Namespace string
	Name      string
}

func (k KubeObject) what() string { return k.Resource + " " + k.Namespace + "/" + k.Name }

// access is what the dry runs found out.
type access struct {
	present bool
	missing []string // verbs refused (get, create, update)
	done    []string // what was tried, for details
}

// probe checks get, update (dry run) and create (dry run) on the object.
func (k KubeObject) probe(ctx context.Context) (access, error) {
	var a access
	dry := []string{metav1.DryRunAll}
	refused := func(verb string, err error) bool {
		if apierrors.IsForbidden(err) {
			a.missing = append(a.missing, verb)
			a.done = append(a.done, verb+": forbidden")
			return true
		}
		return false
	}
	var lease *coordv1.Lease
	var cm *corev1.ConfigMap
	var err error
	switch k.Resource {
	case ResourceLeases:
		lease, err = k.Client.Leases(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	case ResourceConfigMaps:
		cm, err = k.Client.ConfigMaps(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	default:
		return a, fmt.Errorf("doctor: unknown Kubernetes resource %q", k.Resource)
	}
	switch {
	case err == nil:
		a.present = true
		a.done = append(a.done, "get: allowed")
	case apierrors.IsNotFound(err):
		a.done = append(a.done, "get: allowed (absent)")
	case refused("get", err):
	default:
		return a, fmt.Errorf("get %s: %w", k.what(), err)
	}
	meta := metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace}
	if !a.present { // a failed Get returns an empty object, not nil
		lease, cm = nil, nil
	}
	// update: of the real object when it exists (dry run), else of a stand-in (the authorizer
	// answers before the missing object is noticed, so NotFound means allowed).
	switch k.Resource {
	case ResourceLeases:
		if lease == nil {
			lease = &coordv1.Lease{ObjectMeta: meta}
		}
		_, err = k.Client.Leases(k.Namespace).Update(ctx, lease, metav1.UpdateOptions{DryRun: dry})
	case ResourceConfigMaps:
		if cm == nil {
			cm = &corev1.ConfigMap{ObjectMeta: meta}
		}
		_, err = k.Client.ConfigMaps(k.Namespace).Update(ctx, cm, metav1.UpdateOptions{DryRun: dry})
	}
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		a.done = append(a.done, "update (dry run): allowed")
	case refused("update", err):
	default:
		return a, fmt.Errorf("update (dry run) %s: %w", k.what(), err)
	}
	switch k.Resource {
	case ResourceLeases:
		_, err = k.Client.Leases(k.Namespace).Create(ctx, &coordv1.Lease{ObjectMeta: meta}, metav1.CreateOptions{DryRun: dry})
	case ResourceConfigMaps:
		_, err = k.Client.ConfigMaps(k.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta}, metav1.CreateOptions{DryRun: dry})
	}
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		a.done = append(a.done, "create (dry run): allowed")
	case refused("create", err):
	default:
		return a, fmt.Errorf("create (dry run) %s: %w", k.what(), err)
	}
	return a, nil
}

// Check returns the RBAC check of the object with the given ID.
func (k KubeObject) Check(id string, needs ...string) Check {
	return Check{ID: id, Title: "Kubernetes permissions on " + k.Resource + " (dry run)", Needs: needs, Run: func(ctx context.Context) Result {
		if k.Client == nil {
			return Fail("fix the kubeconfig setting, or run in a pod with a service account", "cannot build the Kubernetes client: %v", k.ClientErr)
		}
		a, err := k.probe(ctx)
		if err != nil {
			if apierrors.IsUnauthorized(err) {
				return Fail("the API server refused the credentials: check the kubeconfig or the service account token", "%v", err)
			}
			if apierrors.IsNotFound(err) {
				return Fail("create namespace "+k.Namespace+" or set the namespace key", "%v", err)
			}
			return Fail("check the API server address and network", "%v", err)
		}
		group := "\"\""
		if k.Resource == ResourceLeases {
			group = "coordination.k8s.io"
		}
		fix := fmt.Sprintf("grant the service account verbs [%s] on %s (apiGroups [%s]) in namespace %s: get and update may be scoped with resourceNames [%s], create cannot be",
			strings.Join(a.missing, ", "), k.Resource, group, k.Namespace, k.Name)
		switch {
		case len(a.missing) == 1 && a.missing[0] == "create" && a.present:
			return Warn(fix, "%s exists, but the service account may not create it: if it is ever deleted, runs fail until it is recreated", k.what()).With(a.done...)
		case len(a.missing) > 0:
			return Fail(fix, "the service account lacks %s on %s", strings.Join(a.missing, ", "), k.what()).With(a.done...)
		}
		return Pass("get, create and update allowed on %s", k.what()).With(a.done...)
	}}
}
