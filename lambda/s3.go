package lambda

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3Options selects the S3 service the configuration object and the dead letters live in.
// Zero values mean what the AWS SDK finds in the environment (the function's role, its region,
// AWS_ENDPOINT_URL_S3).
type S3Options struct {
	Endpoint        string
	Region          string
	PathStyle       bool
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// Proxy selects the proxy of each request (nil: the HTTPS_PROXY / NO_PROXY environment).
	Proxy func(*http.Request) (*url.URL, error)
}

// AWSConfig loads the AWS SDK configuration with o's region and static credentials, if set.
func AWSConfig(ctx context.Context, o S3Options) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if o.Region != "" {
		opts = append(opts, awsconfig.WithRegion(o.Region))
	}
	if o.AccessKeyID != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, o.SessionToken)))
	}
	if o.Proxy != nil {
		opts = append(opts, awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.Proxy = o.Proxy })))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return cfg, nil
}

// NewS3Client returns an S3 client for o. An endpoint other than AWS's (o.Endpoint or
// AWS_ENDPOINT_URL_S3) is addressed path-style, as S3-compatible services expect.
func NewS3Client(ctx context.Context, o S3Options) (*s3.Client, error) {
	cfg, err := AWSConfig(ctx, o)
	if err != nil {
		return nil, err
	}
	custom := o.Endpoint != "" || os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
	return s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.UsePathStyle = o.PathStyle || custom
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}), nil
}

// S3Location is an object named s3://bucket/key.
type S3Location struct{ Bucket, Key string }

func (l S3Location) String() string { return "s3://" + l.Bucket + "/" + l.Key }

// ParseS3URL parses s3://bucket/key; ok is false for anything that does not start with s3://.
func ParseS3URL(s string) (loc S3Location, ok bool, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return S3Location{}, false, nil
	}
	b, k, _ := strings.Cut(rest, "/")
	if b == "" {
		return S3Location{}, true, fmt.Errorf("%q names no bucket (write s3://bucket/key)", s)
	}
	return S3Location{Bucket: b, Key: k}, true, nil
}

// ObjectReader reads files and s3://bucket/key objects; its Open is the configuration loader's
// Open in the Lambda mode, so the configuration (and a secret's _file) may live in S3.
type ObjectReader struct {
	Ctx context.Context
	// S3 returns the client on first use, so a configuration from the package or the
	// environment never builds one.
	S3 func() (*s3.Client, error)
	// MaxBytes bounds an object read by ReadFile (default 4 MiB).
	MaxBytes int64
}

// Open opens path: an s3:// object's body or a local file. The caller reads what it needs and
// closes it (the configuration loader stops at its size caps).
func (r ObjectReader) Open(path string) (io.ReadCloser, error) {
	loc, isS3, err := ParseS3URL(path)
	if !isS3 {
		return os.Open(path)
	}
	if err != nil {
		return nil, err
	}
	if loc.Key == "" {
		return nil, fmt.Errorf("%q names no object (write s3://bucket/key)", path)
	}
	c, err := r.S3()
	if err != nil {
		return nil, err
	}
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key)})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", loc, err)
	}
	return out.Body, nil
}

// ReadFile reads path (an s3:// object or a local file), at most MaxBytes of it.
func (r ObjectReader) ReadFile(path string) ([]byte, error) {
	body, err := r.Open(path)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	limit := r.MaxBytes
	if limit <= 0 {
		limit = 4 << 20
	}
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

// DeadLetter writes dropped entries to S3: every Write (the job writes one JSON line per
// dropped entry, before it commits the cursor past it) is one new object
// <prefix><invocation>-<seq>.jsonl, so a dead letter is durable before the checkpoint moves and
// no invocation overwrites another's.
type DeadLetter struct {
	client     *s3.Client
	loc        S3Location
	invocation string
	timeout    time.Duration

	mu  sync.Mutex
	seq int
}

// NewDeadLetter returns the dead letter of one invocation under prefix (s3://bucket/prefix/).
func NewDeadLetter(client *s3.Client, prefix, invocation string, timeout time.Duration) (*DeadLetter, error) {
	loc, ok, err := ParseS3URL(prefix)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%q is not an s3:// location", prefix)
	}
	if loc.Key != "" && !strings.HasSuffix(loc.Key, "/") {
		loc.Key += "/"
	}
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	return &DeadLetter{client: client, loc: loc, invocation: invocation, timeout: timeout}, nil
}

// Write stores p as one object.
func (d *DeadLetter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	d.mu.Lock()
	d.seq++
	key := fmt.Sprintf("%s%s-%s-%06d.jsonl", d.loc.Key, time.Now().UTC().Format("2006-01-02T150405Z"), d.invocation, d.seq)
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	_, err := d.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(d.loc.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(p), ContentLength: aws.Int64(int64(len(p))),
		ContentType: aws.String("application/x-ndjson"),
	})
	if err != nil {
		return 0, fmt.Errorf("writing the dead letter s3://%s/%s: %w", d.loc.Bucket, key, err)
	}
	return len(p), nil
}
