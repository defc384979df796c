// Package configmap keeps the checkpoint document under one key of a Kubernetes ConfigMap:
// no bucket and no volume, the natural partner of the kubernetes lease in a CronJob.
//
// The version is the ConfigMap's resourceVersion and every write is an update carrying it
// (409 Conflict is a conflict); the first write creates the ConfigMap (409 AlreadyExists is a
// conflict) or adds the key to an existing one. Other keys of the ConfigMap are kept. The API
// server refuses a ConfigMap whose values, all keys together, exceed 1 MiB, so a write is
// checked against what the whole ConfigMap would hold, not the document alone: a document
// that fits its own cap can still not fit beside the other keys of a shared ConfigMap. Bytes
// that are not valid UTF-8 are kept in binaryData so they read back exactly (and are reported
// as a corrupt document, never silently repaired).
//
// RBAC needed: get, create and update on configmaps in the namespace.
package configmap

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/sf2loki/sf2loki/internal/kubeclient"
	"github.com/sf2loki/sf2loki/store"
)

// maxObject is the API server's limit for a ConfigMap: the values of data and binaryData, all
// keys together (core.MaxSecretSize in its validation).
const maxObject = 1 << 20

// DefaultMaxSize is the default document cap: the 1 MiB ConfigMap limit minus room for
// metadata and other keys.
const DefaultMaxSize = maxObject - 64<<10

// Options configures the ConfigMap backend. Zero values mean the defaults.
type Options struct {
	// Namespace of the ConfigMap. Default: the pod's namespace in cluster, else "default".
	Namespace string
	// Name of the ConfigMap. Default "sf2loki-state".
	Name string
	// Key within the ConfigMap. Default "state.json".
	Key string
	// Kubeconfig is a kubeconfig file for out-of-cluster use. Default: in-cluster config.
	Kubeconfig string
	// RESTConfig, when set, is used instead of Kubeconfig or the in-cluster config.
	RESTConfig *rest.Config
	// MaxSize is the largest document written, in bytes. Default DefaultMaxSize.
	MaxSize int
}

// Backend is a store.Backend over one key of a ConfigMap.
type Backend struct {
	api  *kubeclient.Objects[*corev1.ConfigMap]
	ns   string
	name string
	key  string
	max  int
	// others is how many bytes the ConfigMap's other keys held when last read (Room).
	others atomic.Int64
}

const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Namespace is the namespace an Options.Namespace of ns stands for: ns, else the pod's own
// namespace when running in a cluster, else "default".
func Namespace(ns string) string {
	if ns != "" {
		return ns
	}
	if b, err := os.ReadFile(inClusterNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return "default"
}

// New returns a ConfigMap backend. It does not contact the API server.
func New(o Options) (*Backend, error) {
	if o.Name == "" {
		o.Name = "sf2loki-state"
	}
	if o.Key == "" {
		o.Key = "state.json"
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	o.Namespace = Namespace(o.Namespace)
	cfg, err := kubeclient.Config(o.RESTConfig, o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("configmap store: %w", err)
	}
	client, err := kubeclient.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("configmap store: %w", err)
	}
	return &Backend{api: client.ConfigMaps(o.Namespace), ns: o.Namespace, name: o.Name, key: o.Key, max: o.MaxSize}, nil
}

// String implements store.Backend.
func (b *Backend) String() string { return "configmap " + b.ns + "/" + b.name + " key " + b.key }

// MaxSize implements store.Backend.
func (b *Backend) MaxSize() int { return b.max }

// classify wraps an API server error in the store sentinel it stands for. A 422 Invalid is the
// API server's validation refusing the object: the same write is refused every time, so it is
// never ErrUnavailable (retried on every run, forever). "Too long" is the whole ConfigMap over
// 1 MiB (ErrTooLarge: a person must make room); any other reason (an immutable ConfigMap, a
// key that is not a valid ConfigMap key) is a store location that cannot work, which, like a
// read-only file system for the file store, is ErrPermission: a configuration error, never
// retried.
func (b *Backend) classify(verb string, err error) error {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w: %s %s: %w (the service account needs get, create and update on configmaps)", store.ErrPermission, verb, b, err)
	case apierrors.IsRequestEntityTooLargeError(err),
		apierrors.IsInvalid(err) && apierrors.HasStatusCause(err, metav1.CauseTypeTooLong):
		return fmt.Errorf("%w: %s %s: %w (a ConfigMap holds at most 1 MiB, all keys together: move its other keys "+
			"to another ConfigMap, or remove stale keys with `sf2loki state delete`)", store.ErrTooLarge, verb, b, err)
	case apierrors.IsInvalid(err):
		return fmt.Errorf("%w: %s %s: the API server refuses this ConfigMap for good: %w (an immutable ConfigMap "+
			"cannot be written: point state.configmap.name at another ConfigMap; a key refused as invalid needs "+
			"another state.configmap.key)",
			store.ErrPermission, verb, b, err)
	default:
		return fmt.Errorf("%w: %s %s: %w", store.ErrUnavailable, verb, b, err)
	}
}

// value returns the key's bytes and whether it is present.
func (b *Backend) value(cm *corev1.ConfigMap) ([]byte, bool) {
	if s, ok := cm.Data[b.key]; ok {
		return []byte(s), true
	}
	if v, ok := cm.BinaryData[b.key]; ok {
		return v, true
	}
	return nil, false
}

// room is the largest document cm can hold: the backend's cap, or less when the ConfigMap's
// other keys leave less of the API server's limit. It records the other keys' size for Room.
func (b *Backend) room(cm *corev1.ConfigMap) (limit, others int) {
	for k, v := range cm.Data {
		if k != b.key {
			others += len(v)
		}
	}
	for k, v := range cm.BinaryData {
		if k != b.key {
			others += len(v)
		}
	}
	b.others.Store(int64(others))
	return min(b.max, maxObject-others), others
}

// Room is the largest document the ConfigMap can hold beside its other keys as last read or
// written (MaxSize until then), and how many bytes those keys take. Documents that share one
// ConfigMap share its 1 MiB: a size check against MaxSize alone misses the others' share.
func (b *Backend) Room() (limit, others int) {
	others = int(b.others.Load())
	return min(b.max, maxObject-others), others
}

// tooLarge is the ErrTooLarge for a document of n bytes that does not fit in cm.
func (b *Backend) tooLarge(cm *corev1.ConfigMap, n int) error {
	limit, others := b.room(cm)
	if n <= limit {
		return nil
	}
	if n > b.max {
		return fmt.Errorf("%w: %s: %d bytes exceeds %d", store.ErrTooLarge, b, n, b.max)
	}
	return fmt.Errorf("%w: %s: the document (%d bytes) and the ConfigMap's other keys (%d bytes) exceed the "+
		"%d bytes the API server accepts for a whole ConfigMap (move the other keys to another ConfigMap, "+
		"or remove stale keys with `sf2loki state delete`)", store.ErrTooLarge, b, n, others, maxObject)
}

func (b *Backend) setValue(cm *corev1.ConfigMap, data []byte) {
	delete(cm.Data, b.key)
	delete(cm.BinaryData, b.key)
	if utf8.Valid(data) {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[b.key] = string(data)
		return
	}
	if cm.BinaryData == nil {
		cm.BinaryData = map[string][]byte{}
	}
	cm.BinaryData[b.key] = data
}

// Load implements store.Backend.
func (b *Backend) Load(ctx context.Context) ([]byte, store.Version, error) {
	cm, err := b.api.Get(ctx, b.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", store.ErrAbsent
	}
	if err != nil {
		return nil, "", b.classify("reading", err)
	}
	data, ok := b.value(cm)
	if !ok {
		return nil, "", store.ErrAbsent
	}
	// The same rule as the write path (the document against the room the other keys leave), so
	// a document that could not be written back is refused on reading, not at the first commit.
	if err := b.tooLarge(cm, len(data)); err != nil {
		return nil, "", err
	}
	return data, store.Version(cm.ResourceVersion), nil
}

// Store implements store.Backend.
func (b *Backend) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	if len(data) > b.max {
		return "", fmt.Errorf("%w: %s: %d bytes exceeds %d", store.ErrTooLarge, b, len(data), b.max)
	}
	cm, err := b.api.Get(ctx, b.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if expect != "" {
			return "", fmt.Errorf("%w: %s no longer exists", store.ErrConflict, b)
		}
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.ns}}
		b.setValue(cm, data)
		created, err := b.api.Create(ctx, cm, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			return "", fmt.Errorf("%w: %s was created concurrently", store.ErrConflict, b)
		case apierrors.IsNotFound(err):
			return "", fmt.Errorf("%w: namespace %q does not exist: %w", store.ErrNoLocation, b.ns, err)
		case err != nil:
			return "", b.classify("creating", err)
		}
		b.others.Store(0)
		return store.Version(created.ResourceVersion), nil
	case err != nil:
		// Nothing was sent yet: a failed read before the write is not ambiguous.
		return "", b.classify("reading", err)
	}
	_, present := b.value(cm)
	if expect == "" && present || expect != "" && (!present || store.Version(cm.ResourceVersion) != expect) {
		return "", fmt.Errorf("%w: %s is at resourceVersion %s (expected %q)", store.ErrConflict, b, cm.ResourceVersion, expect)
	}
	// Checked before writing, with the other keys as they are at the version the update is
	// conditioned on: the API server would refuse the whole ConfigMap otherwise.
	if err := b.tooLarge(cm, len(data)); err != nil {
		return "", err
	}
	b.setValue(cm, data)
	updated, err := b.api.Update(ctx, cm, metav1.UpdateOptions{})
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return "", fmt.Errorf("%w: %s: %w", store.ErrConflict, b, err)
	case err != nil:
		return "", b.classify("writing", err)
	}
	return store.Version(updated.ResourceVersion), nil
}

// Delete implements store.Backend: it removes the key (other keys stay).
func (b *Backend) Delete(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		cm, err := b.api.Get(ctx, b.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return b.classify("reading", err)
		}
		if _, ok := b.value(cm); !ok {
			return nil
		}
		delete(cm.Data, b.key)
		delete(cm.BinaryData, b.key)
		_, err = b.api.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 3 {
			continue
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return b.classify("deleting", err)
		}
		return nil
	}
}
