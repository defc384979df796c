package testenv

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"
)

// GCS is fake-gcs-server running in process behind a real loopback HTTP listener.
type GCS struct {
	// Server is the fake server, for direct inspection or seeding.
	Server *fakestorage.Server
	// URL is the listener's base URL, e.g. "http://127.0.0.1:41234".
	URL string
	// Endpoint is the JSON API endpoint to pass to option.WithEndpoint
	// ("<URL>/storage/v1/"); no credentials are needed.
	Endpoint string

	mu      sync.Mutex
	clients []*storage.Client
}

// StartGCS starts fake-gcs-server (in memory, plain HTTP on a random loopback port) and stops it
// when the test ends.
func StartGCS(t testing.TB) *GCS {
	t.Helper()
	skipShort(t, "GCS server (fake-gcs-server)")
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		Host:   "127.0.0.1",
		// PublicHost is the XML API host the client reads objects from; it must be this server.
		PublicHost: "127.0.0.1",
	})
	if err != nil {
		t.Fatalf("start fake-gcs-server: %v", err)
	}
	g := &GCS{Server: srv, URL: srv.URL()}
	g.Endpoint = g.URL + "/storage/v1/"
	t.Cleanup(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, c := range g.clients {
			_ = c.Close()
		}
		srv.Stop()
	})
	return g
}

// Client returns a storage client that talks to the server over HTTP; it is closed when the
// test ends. It panics if the client cannot be built (it needs no network to be built).
func (g *GCS) Client() *storage.Client {
	c, err := storage.NewClient(context.Background(),
		option.WithEndpoint(g.Endpoint), option.WithoutAuthentication())
	if err != nil {
		panic(fmt.Sprintf("testenv: storage client for %s: %v", g.Endpoint, err))
	}
	g.mu.Lock()
	g.clients = append(g.clients, c)
	g.mu.Unlock()
	return c
}

// NewBucket creates a bucket with a fresh valid name and returns the name.
func (g *GCS) NewBucket(t testing.TB) string {
	t.Helper()
	name := "sf2loki-" + randomHex(8)
	g.Server.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
	return name
}
