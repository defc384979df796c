// Package s3 keeps the checkpoint document in one S3 object (AWS or any S3-compatible store
// that honors conditional writes; doctor probes that with store.CheckConditionalWrites).
//
// The version is the object's ETag. Creating uses If-None-Match: *, updating If-Match:
// <etag>; 412 PreconditionFailed, 409 ConditionalRequestConflict and a vanished object are
// conflicts. The SDK's retries are disabled for the conditional PUT: an ambiguous failure is
// settled by the protocol re-reading the object and looking for its own writer stamp, never
// by re-sending the same precondition. Reads (GET plus the body) are retried as a unit by
// the protocol, so bytes and ETag always belong together.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/sf2loki/sf2loki/store"
)

// DefaultMaxSize is the default document cap.
const DefaultMaxSize = 16 << 20

// Options configures the S3 backend. Zero values mean the defaults.
type Options struct {
	// Bucket and Key locate the document. Both required.
	Bucket string
	Key    string
	// Endpoint is the base URL of an S3-compatible service. Default: AWS.
	Endpoint string
	// Region. Default: the AWS environment/config, else "us-east-1".
	Region string
	// PathStyle addresses buckets as https://endpoint/bucket (most S3-compatible services).
	PathStyle bool
	// AccessKeyID, SecretAccessKey and SessionToken are static credentials. Default: the AWS
	// default credential chain (environment, shared config, web identity, instance role).
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// MaxSize is the largest document written, in bytes. Default 16 MiB.
	MaxSize int
	// Proxy selects the proxy of each request (as http.Transport.Proxy); nil means the SDK's
	// default (the HTTPS_PROXY / NO_PROXY environment).
	Proxy func(*http.Request) (*url.URL, error)
	// Client, when set, is used instead of building one from the fields above.
	Client *s3.Client
}

// Backend is a store.Backend over one S3 object.
type Backend struct {
	c      *s3.Client
	bucket string
	key    string
	max    int
}

// New returns an S3 backend. It does not contact S3.
func New(ctx context.Context, o Options) (*Backend, error) {
	if o.Bucket == "" || o.Key == "" {
		return nil, errors.New("s3 store: bucket and key are required")
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	c := o.Client
	if c == nil {
		var opts []func(*config.LoadOptions) error
		if o.Region != "" {
			opts = append(opts, config.WithRegion(o.Region))
		}
		if o.AccessKeyID != "" {
			opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, o.SessionToken)))
		}
		if o.Proxy != nil {
			opts = append(opts, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.Proxy = o.Proxy })))
		}
		cfg, err := config.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("s3 store: AWS configuration: %w", err)
		}
		if cfg.Region == "" {
			cfg.Region = "us-east-1"
		}
		c = s3.NewFromConfig(cfg, func(so *s3.Options) {
			so.UsePathStyle = o.PathStyle
			if o.Endpoint != "" {
				so.BaseEndpoint = aws.String(o.Endpoint)
			}
			// S3-compatible stores vary in trailing-checksum support; checksums only when required.
			so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		})
	}
	return &Backend{c: c, bucket: o.Bucket, key: o.Key, max: o.MaxSize}, nil
}

// String implements store.Backend.
func (b *Backend) String() string { return "s3://" + b.bucket + "/" + b.key }

// MaxSize implements store.Backend.
func (b *Backend) MaxSize() int { return b.max }

func codeAndStatus(err error) (string, int) {
	var code string
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return code, re.HTTPStatusCode()
	}
	return code, 0
}

// classify maps errors every operation shares.
//
// RequestTimeTooSkewed (a 403) is not a permission problem: S3 refuses requests signed more
// than 15 minutes away from its own time, so this host's clock is wrong. The SDK corrects a
// skew it can measure from the response's Date header and retries; when the error still
// reaches here the clock needs fixing by a person, and every run fails the same way until it
// is. So it is ErrIntegrity (exit 7, "needs a human"), not ErrPermission (a configuration error
// that sends the operator to the IAM policy) nor ErrUnavailable (transient, retried quietly run
// after run): the lease and checkpoint times this host records rest on its clock too.
func (b *Backend) classify(verb string, err error) error {
	code, status := codeAndStatus(err)
	switch {
	case code == "NoSuchBucket":
		return fmt.Errorf("%w: %s %s: bucket %q does not exist: %w", store.ErrNoLocation, verb, b, b.bucket, err)
	case code == "RequestTimeTooSkewed":
		return fmt.Errorf("%w: %s %s: this host's clock is too far from the S3 endpoint's (AWS allows 15 minutes), so it "+
			"refuses the host's signed requests and nothing was read or written: fix the host's time synchronization (NTP, chrony, "+
			"systemd-timesyncd; for a container, the node's clock), then run again: %w", store.ErrIntegrity, verb, b, err)
	case code == "AccessDenied" || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || status == http.StatusForbidden:
		return fmt.Errorf("%w: %s %s: %w", store.ErrPermission, verb, b, err)
	default:
		return fmt.Errorf("%w: %s %s: %w", store.ErrUnavailable, verb, b, err)
	}
}

// Load implements store.Backend.
func (b *Backend) Load(ctx context.Context) ([]byte, store.Version, error) {
	out, err := b.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &b.key})
	if err != nil {
		if code, _ := codeAndStatus(err); code == "NoSuchKey" {
			return nil, "", store.ErrAbsent
		}
		return nil, "", b.classify("reading", err)
	}
	defer out.Body.Close()
	if n := aws.ToInt64(out.ContentLength); n > int64(b.max) {
		return nil, "", fmt.Errorf("%w: %s is %d bytes, more than %d", store.ErrTooLarge, b, n, b.max)
	}
	data, err := store.ReadLimited(out.Body, b.max)
	if errors.Is(err, store.ErrTooLarge) {
		return nil, "", fmt.Errorf("%s: %w", b, err)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: reading the body of %s: %w", store.ErrUnavailable, b, err)
	}
	return data, store.Version(aws.ToString(out.ETag)), nil
}

// Store implements store.Backend.
func (b *Backend) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	in := &s3.PutObjectInput{
		Bucket: &b.bucket, Key: &b.key, Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), ContentType: aws.String("application/json"),
	}
	if expect == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(string(expect))
	}
	out, err := b.c.PutObject(ctx, in, func(o *s3.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		code, status := codeAndStatus(err)
		switch {
		case code == "PreconditionFailed" || status == http.StatusPreconditionFailed,
			code == "ConditionalRequestConflict" || status == http.StatusConflict,
			expect != "" && (code == "NoSuchKey" || (status == http.StatusNotFound && code != "NoSuchBucket")):
			return "", fmt.Errorf("%w: %s: %w", store.ErrConflict, b, err)
		case code == "EntityTooLarge":
			return "", fmt.Errorf("%w: %s: %w", store.ErrTooLarge, b, err)
		}
		return "", b.classify("writing", err)
	}
	return store.Version(aws.ToString(out.ETag)), nil
}

// Delete implements store.Backend.
func (b *Backend) Delete(ctx context.Context) error {
	_, err := b.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &b.key})
	if err != nil {
		if code, _ := codeAndStatus(err); code == "NoSuchKey" {
			return nil
		}
		return b.classify("deleting", err)
	}
	return nil
}
