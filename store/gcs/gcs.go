// Package gcs keeps the checkpoint document in one Google Cloud Storage object.
//
// The version is the object's generation; writes carry ifGenerationMatch (0 to create), and a
// 412 is a conflict. The client library's automatic retry of precondition'd writes is
// switched off for the write: an ambiguous failure is settled by the protocol re-reading the
// object and looking for its own writer stamp. The write is a single request (no resumable
// upload). Bytes and generation come from the same reader, so they always belong together.
package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/sf2loki/sf2loki/store"
)

// Options configures the GCS backend. Zero values mean the defaults.
type Options struct {
	// Bucket and Object locate the document. Both required.
	Bucket string
	Object string
	// Endpoint overrides the JSON API endpoint (emulators). Default: Google's.
	Endpoint string
	// CredentialsFile is a service account key file. Default: Application Default Credentials.
	CredentialsFile string
	// MaxSize is the largest document written, in bytes. Default 16 MiB.
	MaxSize int
	// Client, when set, is used instead of building one.
	Client *storage.Client
}

// Backend is a store.Backend over one GCS object.
type Backend struct {
	c      *storage.Client
	bucket string
	object string
	max    int
}

// New returns a GCS backend. It does not contact GCS.
func New(ctx context.Context, o Options) (*Backend, error) {
	if o.Bucket == "" || o.Object == "" {
		return nil, errors.New("gcs store: bucket and object are required")
	}
	if o.MaxSize <= 0 {
		o.MaxSize = 16 << 20
	}
	c := o.Client
	if c == nil {
		var opts []option.ClientOption
		if o.Endpoint != "" {
			opts = append(opts, option.WithEndpoint(o.Endpoint))
		}
		if o.CredentialsFile != "" {
			opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, o.CredentialsFile))
		}
		var err error
		if c, err = storage.NewClient(ctx, opts...); err != nil {
			return nil, fmt.Errorf("gcs store: client: %w", err)
		}
	}
	return &Backend{c: c, bucket: o.Bucket, object: o.Object, max: o.MaxSize}, nil
}

// String implements store.Backend.
func (b *Backend) String() string { return "gs://" + b.bucket + "/" + b.object }

// MaxSize implements store.Backend.
func (b *Backend) MaxSize() int { return b.max }

func (b *Backend) obj() *storage.ObjectHandle {
	return b.c.Bucket(b.bucket).Object(b.object)
}

func status(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

func (b *Backend) classify(verb string, err error) error {
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return fmt.Errorf("%w: %s %s: bucket %q does not exist: %w", store.ErrNoLocation, verb, b, b.bucket, err)
	case status(err) == http.StatusForbidden || status(err) == http.StatusUnauthorized:
		return fmt.Errorf("%w: %s %s: %w", store.ErrPermission, verb, b, err)
	default:
		return fmt.Errorf("%w: %s %s: %w", store.ErrUnavailable, verb, b, err)
	}
}

// missing tells an absent object from an absent bucket (one extra call, only when absent).
func (b *Backend) missing(ctx context.Context, verb string, err error) error {
	if _, berr := b.c.Bucket(b.bucket).Attrs(ctx); errors.Is(berr, storage.ErrBucketNotExist) {
		return b.classify(verb, berr)
	}
	return store.ErrAbsent
}

// Load implements store.Backend.
func (b *Backend) Load(ctx context.Context) ([]byte, store.Version, error) {
	r, err := b.obj().NewReader(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, "", b.missing(ctx, "reading", err)
	}
	if err != nil {
		return nil, "", b.classify("reading", err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, "", fmt.Errorf("%w: reading the body of %s: %w", store.ErrUnavailable, b, err)
	}
	return data, store.Version(strconv.FormatInt(r.Attrs.Generation, 10)), nil
}

// Store implements store.Backend.
func (b *Backend) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	cond := storage.Conditions{DoesNotExist: true}
	if expect != "" {
		gen, err := strconv.ParseInt(string(expect), 10, 64)
		if err != nil || gen <= 0 {
			return "", fmt.Errorf("%w: %s: %q is not a generation", store.ErrConflict, b, expect)
		}
		cond = storage.Conditions{GenerationMatch: gen}
	}
	w := b.obj().If(cond).Retryer(storage.WithPolicy(storage.RetryNever)).NewWriter(ctx)
	w.ContentType = "application/json"
	w.ChunkSize = 0 // one request, no resumable session
	_, werr := w.Write(data)
	err := w.Close()
	if werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		switch {
		case status(err) == http.StatusPreconditionFailed:
			return "", fmt.Errorf("%w: %s: %w", store.ErrConflict, b, err)
		case status(err) == http.StatusNotFound:
			if expect != "" {
				return "", fmt.Errorf("%w: %s: %w", store.ErrConflict, b, err)
			}
			return "", fmt.Errorf("%w: writing %s: bucket %q does not exist: %w", store.ErrNoLocation, b, b.bucket, err)
		}
		return "", b.classify("writing", err)
	}
	return store.Version(strconv.FormatInt(w.Attrs().Generation, 10)), nil
}

// Delete implements store.Backend.
func (b *Backend) Delete(ctx context.Context) error {
	err := b.obj().Delete(ctx)
	if err == nil || errors.Is(err, storage.ErrObjectNotExist) {
		return nil
	}
	return b.classify("deleting", err)
}
