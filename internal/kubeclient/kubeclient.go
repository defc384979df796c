// Package kubeclient talks to the Kubernetes API server about the two kinds of object sf2loki
// keeps there: its Lease (coordination.k8s.io/v1) and its ConfigMap store (core/v1).
//
// It is client-go's REST client over a scheme that knows only those two types, not client-go's
// clientset: importing the clientset (or any typed client) links every API group of Kubernetes
// and registers each of them into a scheme when the process starts, which every invocation of
// sf2loki paid for, Kubernetes configured or not. The requests are those of client-go's typed
// clients (protobuf by default, the same paths, options and error decoding), so the
// apimachinery error helpers (IsNotFound, IsConflict, ...) apply to what they return.
package kubeclient

import (
	"context"
	"fmt"
	"sync"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

// Config returns cfg when set, else the kubeconfig file's configuration, else the in-cluster
// configuration (the pod's service account).
func Config(cfg *rest.Config, kubeconfig string) (*rest.Config, error) {
	switch {
	case cfg != nil:
		return cfg, nil
	case kubeconfig != "":
		c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		return c, nil
	default:
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster Kubernetes config (set a kubeconfig to run outside a cluster): %w", err)
		}
		return c, nil
	}
}

// codecs is built on first use, so a process that never talks to Kubernetes never builds it.
var codecs = sync.OnceValues(func() (serializer.CodecFactory, runtime.ParameterCodec) {
	s := runtime.NewScheme()
	// The options (GetOptions, CreateOptions, UpdateOptions) are encoded as query parameters
	// through the unversioned meta group, as client-go's own scheme registers them.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	must(coordv1.AddToScheme(s))
	must(corev1.AddToScheme(s))
	return rest.CodecFactoryForGeneratedClient(s, serializer.NewCodecFactory(s)), runtime.NewParameterCodec(s)
})

func must(err error) {
	if err != nil {
		panic(err) // registering generated types fails only on a programming error
	}
}

// Client reaches the API server with one configuration: one HTTP client shared by the groups.
type Client struct {
	core, coordination rest.Interface
	params             runtime.ParameterCodec
}

// New returns a client for cfg. It does not contact the API server.
func New(cfg *rest.Config) (*Client, error) {
	c := *cfg
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if c.RateLimiter == nil && c.QPS > 0 { // one budget for both groups, as the clientset shares it
		if c.Burst <= 0 {
			return nil, fmt.Errorf("kubernetes client: burst must be greater than 0 when QPS is set")
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	hc, err := rest.HTTPClientFor(&c)
	if err != nil {
		return nil, err
	}
	cf, params := codecs()
	group := func(gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
		g := c
		g.GroupVersion = &gv
		g.APIPath = apiPath
		g.NegotiatedSerializer = cf.WithoutConversion()
		return rest.RESTClientForConfigAndClient(&g, hc)
	}
	k := &Client{params: params}
	if k.core, err = group(corev1.SchemeGroupVersion, "/api"); err != nil {
		return nil, err
	}
	if k.coordination, err = group(coordv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	return k, nil
}

// Leases returns the Leases of namespace.
func (c *Client) Leases(namespace string) *Objects[*coordv1.Lease] {
	return &Objects[*coordv1.Lease]{rest: c.coordination, params: c.params, resource: "leases", namespace: namespace,
		empty: func() *coordv1.Lease { return &coordv1.Lease{} }}
}

// ConfigMaps returns the ConfigMaps of namespace.
func (c *Client) ConfigMaps(namespace string) *Objects[*corev1.ConfigMap] {
	return &Objects[*corev1.ConfigMap]{rest: c.core, params: c.params, resource: "configmaps", namespace: namespace,
		empty: func() *corev1.ConfigMap { return &corev1.ConfigMap{} }}
}

// Object is a Kubernetes object type Objects handles.
type Object interface {
	runtime.Object
	GetName() string
}

// Objects reads and writes the objects of one resource in one namespace: the get, create and
// update of client-go's typed clients, nothing else.
type Objects[T Object] struct {
	rest      rest.Interface
	params    runtime.ParameterCodec
	resource  string
	namespace string
	empty     func() T
}

// Get reads the object called name.
func (o *Objects[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := o.empty()
	err := o.rest.Get().UseProtobufAsDefault().Namespace(o.namespace).Resource(o.resource).Name(name).
		VersionedParams(&opts, o.params).Do(ctx).Into(out)
	return out, err
}

// Create creates obj.
func (o *Objects[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := o.empty()
	err := o.rest.Post().UseProtobufAsDefault().Namespace(o.namespace).Resource(o.resource).
		VersionedParams(&opts, o.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update replaces obj; the API server refuses it with a conflict when obj's resourceVersion is
// not the stored one.
func (o *Objects[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := o.empty()
	err := o.rest.Put().UseProtobufAsDefault().Namespace(o.namespace).Resource(o.resource).Name(obj.GetName()).
		VersionedParams(&opts, o.params).Body(obj).Do(ctx).Into(out)
	return out, err
}
