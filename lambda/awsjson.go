package lambda

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// jsonService calls operations of an AWS service that speaks the AWS JSON 1.1 protocol (Secrets
// Manager, SSM): a POST of a JSON document to the endpoint's root, the operation named by the
// X-Amz-Target header, signed with Signature Version 4. The resolver needs two such operations;
// calling them this way, with the SDK's signer, credentials and retryer (which the S3 store links
// anyway), keeps the two service clients and their schemas out of the binary: about 5 MB of
// binary, 3 MiB of resident pages and 1.7 MB of heap at every start (docs/performance.md).
type jsonService struct {
	name         string // the SDK's service id, for messages and AWS_ENDPOINT_URL_<ID>
	signingName  string // the SigV4 credential scope's service
	targetPrefix string // X-Amz-Target is targetPrefix + "." + operation
	endpoint     string
	region       string
	creds        aws.CredentialsProvider
	client       aws.HTTPClient
	retryer      aws.Retryer
	signer       *v4.Signer
	now          func() time.Time
}

// maxAnswerBytes bounds an answer's body: a secret is at most 64 KiB, a parameter 8 KiB.
const maxAnswerBytes = 1 << 20

func newJSONService(cfg aws.Config, name, signingName, hostPrefix, targetPrefix string) *jsonService {
	s := &jsonService{name: name, signingName: signingName, targetPrefix: targetPrefix, region: cfg.Region,
		creds: cfg.Credentials, client: cfg.HTTPClient, signer: v4.NewSigner(), now: time.Now}
	s.endpoint = serviceEndpoint(cfg, name, hostPrefix)
	if s.client == nil {
		s.client = awshttp.NewBuildableClient()
	}
	if cfg.Retryer != nil {
		s.retryer = cfg.Retryer()
	} else {
		std := func(o *retry.StandardOptions) {
			if cfg.RetryMaxAttempts != 0 {
				o.MaxAttempts = cfg.RetryMaxAttempts
			}
		}
		if cfg.RetryMode == aws.RetryModeAdaptive {
			s.retryer = retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) { o.StandardOptions = append(o.StandardOptions, std) })
		} else {
			s.retryer = retry.NewStandard(std)
		}
	}
	return s
}

// serviceEndpoint resolves the endpoint as the SDK's clients do: a service's own configured
// endpoint (AWS_ENDPOINT_URL_<SERVICE> or the shared config's services section) before the global
// one (cfg.BaseEndpoint, from AWS_ENDPOINT_URL), unless configured endpoints are ignored; else
// the regional endpoint, FIPS or dual-stack when configured.
func serviceEndpoint(cfg aws.Config, sdkID, hostPrefix string) string {
	_, global := os.LookupEnv("AWS_ENDPOINT_URL")
	_, own := os.LookupEnv("AWS_ENDPOINT_URL_" + strings.ToUpper(strings.ReplaceAll(sdkID, " ", "_")))
	if !global || own {
		if v, ok := configuredEndpoint(cfg.ConfigSources, sdkID); ok {
			return v
		}
	}
	if cfg.BaseEndpoint != nil && *cfg.BaseEndpoint != "" {
		return *cfg.BaseEndpoint
	}
	fips, dual := false, false
	for _, src := range cfg.ConfigSources {
		if p, ok := src.(interface {
			GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error)
		}); ok {
			if v, found, err := p.GetUseFIPSEndpoint(context.Background()); err == nil && found {
				fips = v == aws.FIPSEndpointStateEnabled
				break
			}
		}
	}
	for _, src := range cfg.ConfigSources {
		if p, ok := src.(interface {
			GetUseDualStackEndpoint(context.Context) (aws.DualStackEndpointState, bool, error)
		}); ok {
			if v, found, err := p.GetUseDualStackEndpoint(context.Background()); err == nil && found {
				dual = v == aws.DualStackEndpointStateEnabled
				break
			}
		}
	}
	suffix := "amazonaws.com"
	switch {
	case strings.HasPrefix(cfg.Region, "cn-") && dual:
		suffix = "api.amazonwebservices.com.cn"
	case strings.HasPrefix(cfg.Region, "cn-"):
		suffix = "amazonaws.com.cn"
	case dual:
		suffix = "api.aws"
	}
	if fips {
		hostPrefix += "-fips"
	}
	return "https://" + hostPrefix + "." + cfg.Region + "." + suffix
}

// configuredEndpoint asks the configuration's sources (environment, shared config) for the
// service's own endpoint, as the SDK's clients do.
func configuredEndpoint(sources []any, sdkID string) (string, bool) {
	ctx := context.Background()
	for _, src := range sources {
		if p, ok := src.(interface {
			GetIgnoreConfiguredEndpoints(context.Context) (bool, bool, error)
		}); ok {
			if v, found, err := p.GetIgnoreConfiguredEndpoints(ctx); err == nil && found {
				if v {
					return "", false
				}
				break
			}
		}
	}
	for _, src := range sources {
		if p, ok := src.(interface {
			GetServiceBaseEndpoint(context.Context, string) (string, bool, error)
		}); ok {
			v, found, err := p.GetServiceBaseEndpoint(ctx, sdkID)
			if err != nil {
				return "", false
			}
			if found {
				return v, true
			}
		}
	}
	return "", false
}

var _ smithy.APIError = (*APIError)(nil)

// APIError is an error answer of an AWS service: its error code (the JSON protocol's __type,
// e.g. ResourceNotFoundException, ParameterNotFound, AccessDeniedException, ThrottlingException)
// and message. It implements smithy-go's APIError and the codes the SDK's retryers classify.
type APIError struct {
	Service   string
	Operation string
	Status    int
	Code      string
	Message   string
	RequestID string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%s %s: %s", e.Service, e.Operation, e.Code)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	msg += fmt.Sprintf(" (HTTP %d", e.Status)
	if e.RequestID != "" {
		msg += ", request id " + e.RequestID
	}
	return msg + ")"
}

// ErrorCode is the error's code (smithy.APIError; the retryers' throttling check).
func (e *APIError) ErrorCode() string { return e.Code }

// ErrorMessage is the service's message (smithy.APIError).
func (e *APIError) ErrorMessage() string { return e.Message }

// ErrorFault says whose fault it was: the caller's for a 4xx answer, the service's for a 5xx
// (smithy.APIError).
func (e *APIError) ErrorFault() smithy.ErrorFault {
	switch {
	case e.Status >= 500:
		return smithy.FaultServer
	case e.Status >= 400:
		return smithy.FaultClient
	}
	return smithy.FaultUnknown
}

// HTTPStatusCode is the answer's status (the retryers' 5xx check).
func (e *APIError) HTTPStatusCode() int { return e.Status }

// call runs operation with in as its JSON input and decodes the answer into out, retrying as the
// configuration's retryer says (throttling, 5xx answers, broken connections).
func (s *jsonService) call(ctx context.Context, operation string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	release := s.retryer.GetInitialToken()
	for attempt := 1; ; attempt++ {
		err := s.once(ctx, operation, body, out)
		_ = release(err)
		if err == nil || ctx.Err() != nil || !s.retryer.IsErrorRetryable(err) {
			return err
		}
		if attempt >= s.retryer.MaxAttempts() {
			return fmt.Errorf("%w (after %d attempts)", err, attempt)
		}
		delay, derr := s.retryer.RetryDelay(attempt, err)
		if derr != nil {
			return err
		}
		if release, derr = s.retryer.GetRetryToken(ctx, err); derr != nil {
			return err // the retry budget is spent
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// once sends one signed request.
func (s *jsonService) once(ctx context.Context, operation string, body []byte, out any) error {
	if s.creds == nil {
		return fmt.Errorf("%s %s: no AWS credentials", s.name, operation)
	}
	creds, err := s.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: AWS credentials: %w", s.name, operation, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(s.endpoint, "/")+"/", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s: %w", s.name, operation, err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", s.targetPrefix+"."+operation)
	sum := sha256.Sum256(body)
	if err := s.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), s.signingName, s.region, s.now()); err != nil {
		return fmt.Errorf("%s %s: signing: %w", s.name, operation, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// A broken or refused connection: the retryers retry *url.Error's causes.
		return fmt.Errorf("%s %s: %w", s.name, operation, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", s.name, operation, err)
	}
	if len(answer) > maxAnswerBytes {
		return fmt.Errorf("%s %s: the answer is larger than %d bytes", s.name, operation, maxAnswerBytes)
	}
	if resp.StatusCode/100 != 2 {
		return s.apiError(operation, resp, answer)
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the expected JSON: %w", s.name, operation, err)
	}
	return nil
}

// apiError reads an error answer of the JSON protocol: the code from the X-Amzn-ErrorType header
// or the body's __type (or code), without a namespace ("com.amazonaws...#Code") or a trailing
// ":..." part; the message from message or Message.
func (s *jsonService) apiError(operation string, resp *http.Response, answer []byte) error {
	var doc struct {
		Type     string `json:"__type"`
		Code     string `json:"code"`
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	_ = json.Unmarshal(answer, &doc) // a body that is not JSON leaves the code to the status
	code := resp.Header.Get("X-Amzn-ErrorType")
	if code == "" {
		code = doc.Type
	}
	if code == "" {
		code = doc.Code
	}
	code, _, _ = strings.Cut(code, ":")
	if i := strings.LastIndexByte(code, '#'); i >= 0 {
		code = code[i+1:]
	}
	if code == "" {
		code = http.StatusText(resp.StatusCode)
	}
	msg := doc.Message
	if msg == "" {
		msg = doc.MessageU
	}
	return &APIError{Service: s.name, Operation: operation, Status: resp.StatusCode, Code: code, Message: msg,
		RequestID: resp.Header.Get("X-Amzn-RequestId")}
}
