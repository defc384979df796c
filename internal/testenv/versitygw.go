package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3 is a running versitygw server with its posix backend: a real S3 API honoring
// If-Match / If-None-Match with 412. Use path-style addressing.
type S3 struct {
	// Endpoint is the base URL, e.g. "http://127.0.0.1:41234".
	Endpoint  string
	Region    string
	AccessKey string
	SecretKey string

	proc *process
}

// StartVersitygw starts versitygw on a random loopback port, storing objects in a test temporary
// directory, and stops it when the test ends.
func StartVersitygw(t testing.TB) *S3 {
	t.Helper()
	bin := needTool(t, "S3 server (versitygw)", ToolVersitygw)
	dir := t.TempDir()
	s, err := retryOnPortConflict(func() (*S3, error) {
		return startVersitygw(t.Context(), bin, dir)
	})
	if err != nil {
		t.Fatal(err)
	}
	cleanupServer(t, s.proc)
	return s
}

func startVersitygw(ctx context.Context, bin, dir string) (*S3, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	s := &S3{
		Endpoint:  "http://" + addr,
		Region:    "us-east-1",
		AccessKey: "sf2loki-test",
		SecretKey: "sf2loki-test-secret",
	}
	env := []string{"ROOT_ACCESS_KEY=" + s.AccessKey, "ROOT_SECRET_KEY=" + s.SecretKey}
	p, err := startProcess("versitygw", filepath.Join(dir, "versitygw.log"), bin,
		[]string{"--port", addr, "posix", data}, env)
	if err != nil {
		return nil, err
	}
	s.proc = p
	client := s.Client()
	if err := p.waitReady(ctx, func(ctx context.Context) error {
		_, err := client.ListBuckets(ctx, &s3.ListBucketsInput{})
		return err
	}); err != nil {
		p.stop()
		return nil, err
	}
	return s, nil
}

// Client returns an S3 client for the server (path-style, static credentials, no retries so
// tests see every answer as sent).
func (s *S3) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       s.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		UsePathStyle: true,
		HTTPClient:   http.DefaultClient,
		Retryer:      aws.NopRetryer{},
	})
}

// SkewedClient returns an S3 client for the server whose requests are signed as a host whose
// clock is off by offset signs them (the server refuses them as RequestTimeTooSkewed once the
// offset passes its 15-minute allowance). It keeps the SDK's default retries, as the product's
// clients do.
func (s *S3) SkewedClient(offset time.Duration) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       s.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		UsePathStyle: true,
		HTTPClient: &http.Client{Transport: resigned{
			creds:  aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey},
			region: s.Region, offset: offset,
		}},
	})
}

// resigned signs each request again as a host whose clock is off by offset would.
type resigned struct {
	creds  aws.Credentials
	region string
	offset time.Duration
}

func (r resigned) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Del("Authorization")
	req.Header.Del("X-Amz-Date")
	err := v4.NewSigner().SignHTTP(req.Context(), r.creds, req, req.Header.Get("X-Amz-Content-Sha256"), "s3", r.region, time.Now().Add(r.offset))
	if err != nil {
		return nil, err
	}
	return http.DefaultTransport.RoundTrip(req)
}

// NewBucket creates a bucket with a fresh valid name and returns the name.
func (s *S3) NewBucket(t testing.TB) string {
	t.Helper()
	name := "sf2loki-" + randomHex(8)
	if _, err := s.Client().CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

// randomHex returns n random bytes hex-encoded (lowercase, valid in bucket and namespace names).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
