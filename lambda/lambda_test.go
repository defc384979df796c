package lambda_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	simaws "github.com/sf2loki/sf2loki/internal/sim/aws"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/job"
	"github.com/sf2loki/sf2loki/lambda"
)

func TestResultNamesTheOutcome(t *testing.T) {
	for _, o := range []job.Outcome{job.OutcomeOK, job.OutcomeBusy, job.OutcomeFenced, job.OutcomeBudgetPaused} {
		rep, err := lambda.Result(&job.Report{Outcome: o})
		if err != nil || rep == nil || rep.Outcome != o {
			t.Errorf("%s: (%v, %v), want the report and no error", o, rep, err)
		}
	}
	for _, o := range []job.Outcome{job.OutcomeUnavailable, job.OutcomePartial, job.OutcomeIntegrity, job.OutcomeConfig, job.OutcomeInternal} {
		rep, err := lambda.Result(&job.Report{Outcome: o, ExitCode: 3, Error: "loki down"})
		var ie messages.InvokeResponse_Error
		if rep != nil || !errors.As(err, &ie) {
			t.Fatalf("%s: (%v, %v), want a function error", o, rep, err)
		}
		if ie.Type != "sf2loki."+string(o) || !strings.Contains(ie.Message, "loki down") {
			t.Errorf("%s: errorType %q message %q", o, ie.Type, ie.Message)
		}
	}
}

func TestRunDeadline(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := lambda.Reserves{Push: 30 * time.Second, Commit: 15 * time.Second, Release: 2 * time.Second, Margin: 5 * time.Second}
	cases := []struct {
		name       string
		remaining  time.Duration
		configured time.Duration
		want       time.Duration
		refuse     bool
	}{
		{"the configured maximum fits", 15 * time.Minute, 3 * time.Minute, 3 * time.Minute, false},
		{"the invocation's deadline shortens it", 2 * time.Minute, 3 * time.Minute, 115 * time.Second, false},
		{"exactly the reserves is too short", 52 * time.Second, 3 * time.Minute, 0, true},
		{"shorter than the reserves", 30 * time.Second, 3 * time.Minute, 0, true},
	}
	for _, c := range cases {
		d, err := lambda.RunDeadline(now, now.Add(c.remaining), c.configured, r)
		if c.refuse != errors.Is(err, lambda.ErrDeadlineTooShort) || d != c.want {
			t.Errorf("%s: (%s, %v), want %s refuse=%v", c.name, d, err, c.want, c.refuse)
		}
	}
	if d, err := lambda.RunDeadline(now, time.Time{}, 3*time.Minute, r); err != nil || d != 3*time.Minute {
		t.Errorf("no deadline: (%s, %v)", d, err)
	}
}

func simResolver(t *testing.T) (*simaws.Running, *lambda.Resolver) {
	sim := simaws.Start(t)
	cfg := aws.Config{Region: simaws.Region, BaseEndpoint: aws.String(sim.URL), Retryer: func() aws.Retryer { return aws.NopRetryer{} },
		Credentials: credentials.NewStaticCredentialsProvider("AKIDSIM", "sim", "")}
	return sim, lambda.NewResolver(cfg)
}

func TestResolverFetchesEachSecretOnce(t *testing.T) {
	sim, res := simResolver(t)
	arn := sim.PutSecret("sf2loki/salesforce", `{"client_secret":"cs-1","username":"u"}`)
	sim.PutSecret("sf2loki/plain", "plain-value")
	sim.PutParameter("/sf2loki/loki/password", "SecureString", "lp-1")
	ctx := t.Context()
	for _, c := range []struct{ ref, want string }{
		{"secretsmanager:" + arn + "#client_secret", "cs-1"},
		{"secretsmanager:sf2loki/salesforce#username", "u"},
		{"secretsmanager:" + arn + "#client_secret", "cs-1"},
		{"secretsmanager:sf2loki/plain", "plain-value"},
		{"ssm:/sf2loki/loki/password", "lp-1"},
		{"ssm:/sf2loki/loki/password", "lp-1"},
	} {
		got, err := res.Resolve(ctx, c.ref)
		if err != nil || got != c.want {
			t.Fatalf("Resolve(%s) = %q, %v; want %q", c.ref, got, err, c.want)
		}
	}
	// The ARN and the name are two ids of one secret; each id is fetched once per resolver.
	if n := sim.Calls("secretsmanager.GetSecretValue"); n != 3 {
		t.Errorf("GetSecretValue calls = %d, want 3", n)
	}
	if n := sim.Calls("AmazonSSM.GetParameter"); n != 1 {
		t.Errorf("GetParameter calls = %d, want 1", n)
	}
	for _, v := range []string{"cs-1", "plain-value", "lp-1"} {
		if !contains(res.Values(), v) {
			t.Errorf("Values() lacks %q, so it would not be redacted", v)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestResolverErrorsNameTheReferenceNotTheValue(t *testing.T) {
	sim, res := simResolver(t)
	sim.PutSecret("json", `{"a":"secret-a"}`)
	sim.PutSecret("text", "not-json-secret")
	sim.PutSecret("denied", "x")
	sim.Deny("denied", true)
	ctx := t.Context()
	_, err := res.Resolve(ctx, "secretsmanager:missing")
	var nf smithy.APIError
	if !errors.As(err, &nf) || nf.ErrorCode() != "ResourceNotFoundException" || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing secret: %v", err)
	}
	if _, err := res.Resolve(ctx, "secretsmanager:denied"); err == nil || !strings.Contains(err.Error(), "AccessDeniedException") {
		t.Errorf("denied secret: %v", err)
	}
	if _, err := res.Resolve(ctx, "secretsmanager:json#b"); err == nil || !strings.Contains(err.Error(), `no field "b"`) {
		t.Errorf("missing field: %v", err)
	}
	if _, err := res.Resolve(ctx, "secretsmanager:text#a"); err == nil || strings.Contains(err.Error(), "not-json-secret") {
		t.Errorf("a field of a text secret: %v (must not quote the value)", err)
	}
	if _, err := res.Resolve(ctx, "ssm:/missing"); err == nil || !strings.Contains(err.Error(), "ParameterNotFound") {
		t.Errorf("missing parameter: %v", err)
	}
	if _, err := res.Resolve(ctx, "vault:x"); !errors.Is(err, lambda.ErrUnknownScheme) {
		t.Errorf("unknown scheme: %v", err)
	}
}

// Both services answer ThrottlingException to a caller over their request rate; the
// configuration's retryer retries it, and without retries it is the reference's error.
func TestResolverRetriesThrottling(t *testing.T) {
	sim := simaws.Start(t)
	sim.PutSecret("sf2loki/key", "k-1")
	sim.PutParameter("/sf2loki/p", "SecureString", "p-1")
	noDelay := retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	cfg := aws.Config{Region: simaws.Region, BaseEndpoint: aws.String(sim.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDSIM", "sim", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = noDelay; o.MaxAttempts = 3 })
		}}
	res := lambda.NewResolver(cfg)
	sim.Throttle("secretsmanager.GetSecretValue", 2)
	sim.Throttle("AmazonSSM.GetParameter", 2)
	if v, err := res.Resolve(t.Context(), "secretsmanager:sf2loki/key"); err != nil || v != "k-1" {
		t.Fatalf("secret after two throttled attempts: %q, %v", v, err)
	}
	if v, err := res.Resolve(t.Context(), "ssm:/sf2loki/p"); err != nil || v != "p-1" {
		t.Fatalf("parameter after two throttled attempts: %q, %v", v, err)
	}
	if n, m := sim.Calls("secretsmanager.GetSecretValue"), sim.Calls("AmazonSSM.GetParameter"); n != 3 || m != 3 {
		t.Errorf("calls: GetSecretValue %d, GetParameter %d; want 3 each", n, m)
	}

	sim.Throttle("AmazonSSM.GetParameter", 3) // more than the three attempts
	_, err := lambda.NewResolver(cfg).Resolve(t.Context(), "ssm:/sf2loki/p")
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" || !strings.Contains(err.Error(), "/sf2loki/p") {
		t.Errorf("throttled on every attempt: %v", err)
	}
	if m := sim.Calls("AmazonSSM.GetParameter"); m != 6 {
		t.Errorf("GetParameter calls = %d, want 6 (three more attempts)", m)
	}

	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	sim.Throttle("secretsmanager.GetSecretValue", 1)
	if _, err := lambda.NewResolver(cfg).Resolve(t.Context(), "secretsmanager:sf2loki/key"); !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" {
		t.Errorf("throttled without retries: %v", err)
	}
}

// The request follows the AWS JSON 1.1 protocol, and an error answer's code is read from its
// __type without the namespace.
func TestResolverSpeaksTheJSONProtocol(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amzn-RequestId", "req-7")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.ssm#ParameterNotFound","message":"no such parameter"}`)
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), Retryer: func() aws.Retryer { return aws.NopRetryer{} },
		Credentials: credentials.NewStaticCredentialsProvider("AKIDSIM", "sim", "session-token")}
	_, err := lambda.NewResolver(cfg).Resolve(t.Context(), "ssm:/x")
	var ae *lambda.APIError
	if !errors.As(err, &ae) || ae.Code != "ParameterNotFound" || ae.Message != "no such parameter" || ae.Status != 400 || ae.RequestID != "req-7" {
		t.Fatalf("error: %#v (%v)", ae, err)
	}
	if got.Method != http.MethodPost || got.URL.Path != "/" || got.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameter" ||
		got.Header.Get("Content-Type") != "application/x-amz-json-1.1" || got.Header.Get("X-Amz-Security-Token") != "session-token" {
		t.Errorf("request: %s %s %v", got.Method, got.URL.Path, got.Header)
	}
	if auth := got.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDSIM/") || !strings.Contains(auth, "/eu-west-1/ssm/aws4_request") {
		t.Errorf("Authorization %q", auth)
	}
	if string(body) != `{"Name":"/x","WithDecryption":true}` {
		t.Errorf("body %s", body)
	}
}

func TestParseS3URL(t *testing.T) {
	for _, c := range []struct {
		in         string
		loc        lambda.S3Location
		isS3, fail bool
	}{
		{"s3://bucket/a/b.yaml", lambda.S3Location{Bucket: "bucket", Key: "a/b.yaml"}, true, false},
		{"s3://bucket", lambda.S3Location{Bucket: "bucket"}, true, false},
		{"s3:///key", lambda.S3Location{}, true, true},
		{"/var/task/sf2loki.yaml", lambda.S3Location{}, false, false},
	} {
		loc, isS3, err := lambda.ParseS3URL(c.in)
		if loc != c.loc || isS3 != c.isS3 || (err != nil) != c.fail {
			t.Errorf("ParseS3URL(%q) = %v %v %v", c.in, loc, isS3, err)
		}
	}
}

// The configuration object and the dead letters against a real S3 API (versitygw).
func TestObjectReaderAndDeadLetterOnS3(t *testing.T) {
	srv := testenv.StartVersitygw(t)
	bucket := srv.NewBucket(t)
	ctx := t.Context()
	c, err := lambda.NewS3Client(ctx, lambda.S3Options{Endpoint: srv.Endpoint, Region: srv.Region, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("config/sf2loki.yaml"), Body: strings.NewReader("log:\n  level: debug\n")}); err != nil {
		t.Fatal(err)
	}
	r := lambda.ObjectReader{Ctx: ctx, S3: func() (*s3.Client, error) { return c, nil }, MaxBytes: 64}
	got, err := r.ReadFile("s3://" + bucket + "/config/sf2loki.yaml")
	if err != nil || string(got) != "log:\n  level: debug\n" {
		t.Fatalf("ReadFile = %q, %v", got, err)
	}
	if _, err := r.ReadFile("s3://" + bucket + "/config/missing.yaml"); err == nil || !strings.Contains(err.Error(), "NoSuchKey") {
		t.Fatalf("missing object: %v", err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("big"), Body: strings.NewReader(strings.Repeat("x", 65))}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFile("s3://" + bucket + "/big"); err == nil || !strings.Contains(err.Error(), "larger than 64 bytes") {
		t.Fatalf("oversize object: %v", err)
	}

	dl, err := lambda.NewDeadLetter(c, "s3://"+bucket+"/dead-letters", "inv1", time.Second*10)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"{\"n\":1}\n", "{\"n\":2}\n"} {
		if _, err := dl.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("dead-letters/")})
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, o := range list.Contents {
		if !strings.Contains(aws.ToString(o.Key), "-inv1-") {
			t.Errorf("dead letter key %q does not name the invocation", aws.ToString(o.Key))
		}
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(out.Body)
		out.Body.Close()
		bodies = append(bodies, string(b))
	}
	if strings.Join(bodies, "") != "{\"n\":1}\n{\"n\":2}\n" {
		t.Fatalf("dead letters = %q, want one object per write, in order", bodies)
	}
	// A write that cannot be stored is an error, so the job freezes the key instead of dropping.
	bad, _ := lambda.NewDeadLetter(c, "s3://no-such-bucket-sf2loki/x/", "inv2", time.Second*10)
	if _, err := bad.Write([]byte("{}\n")); err == nil {
		t.Fatal("a dead letter into a missing bucket succeeded")
	}
}
