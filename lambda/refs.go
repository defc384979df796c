package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Reference schemes understood by Resolver, written ${scheme:...} in a configuration value.
const (
	// SchemeSecretsManager reads a secret: ${secretsmanager:<name or ARN>} is its SecretString
	// (or SecretBinary); ${secretsmanager:<name or ARN>#<field>} is one field of a JSON secret.
	SchemeSecretsManager = "secretsmanager"
	// SchemeSSM reads a parameter with decryption: ${ssm:<name or ARN>}, e.g. ${ssm:/sf2loki/key}.
	SchemeSSM = "ssm"
)

// ErrUnknownScheme is returned for a ${scheme:...} reference with a scheme Resolver does not know.
var ErrUnknownScheme = errors.New("unknown reference scheme")

// Resolver resolves secret references against AWS Secrets Manager and SSM Parameter Store. One
// Resolver serves one configuration load: each distinct secret or parameter is fetched once,
// however many values name it. Resolved values are kept so the caller can redact them.
type Resolver struct {
	secretsManager *jsonService
	ssm            *jsonService

	mu      sync.Mutex
	secrets map[string]string // by secret id: the SecretString
	params  map[string]string // by parameter name
	values  []string
}

// NewResolver returns a Resolver that calls Secrets Manager and SSM with cfg's region,
// credentials, HTTP client and retryer; the endpoints are found as the AWS SDK's clients find
// them (AWS_ENDPOINT_URL_SECRETS_MANAGER and AWS_ENDPOINT_URL_SSM, then AWS_ENDPOINT_URL, then the
// region's).
func NewResolver(cfg aws.Config) *Resolver {
	return &Resolver{
		secretsManager: newJSONService(cfg, "Secrets Manager", "secretsmanager", "secretsmanager", "secretsmanager"),
		ssm:            newJSONService(cfg, "SSM", "ssm", "ssm", "AmazonSSM"),
	}
}

// Resolve returns the value of ref, "scheme:rest" without the ${ }.
func (r *Resolver) Resolve(ctx context.Context, ref string) (string, error) {
	scheme, rest, _ := strings.Cut(ref, ":")
	var v string
	var err error
	switch scheme {
	case SchemeSecretsManager:
		v, err = r.secret(ctx, rest)
	case SchemeSSM:
		v, err = r.parameter(ctx, rest)
	default:
		return "", fmt.Errorf("%w %q in ${%s}: use ${secretsmanager:<secret>} or ${ssm:<parameter>}", ErrUnknownScheme, scheme, ref)
	}
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.values = append(r.values, v)
	r.mu.Unlock()
	return v, nil
}

// Values returns every value resolved so far (for the log redactor).
func (r *Resolver) Values() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.values...)
}

func (r *Resolver) secret(ctx context.Context, ref string) (string, error) {
	id, field, hasField := strings.Cut(ref, "#")
	if id == "" {
		return "", errors.New("${secretsmanager:} names no secret")
	}
	if r.secretsManager == nil {
		return "", fmt.Errorf("secret %s: no Secrets Manager client", id)
	}
	r.mu.Lock()
	s, ok := r.secrets[id]
	r.mu.Unlock()
	if !ok {
		var out struct {
			SecretString *string
			SecretBinary []byte // base64 in the JSON answer
		}
		err := r.secretsManager.call(ctx, "GetSecretValue", struct{ SecretId string }{id}, &out)
		if err != nil {
			return "", fmt.Errorf("reading secret %s from Secrets Manager: %w", id, err)
		}
		switch {
		case out.SecretString != nil:
			s = *out.SecretString
		case out.SecretBinary != nil:
			s = string(out.SecretBinary)
		default:
			return "", fmt.Errorf("secret %s has no value", id)
		}
		r.mu.Lock()
		if r.secrets == nil {
			r.secrets = map[string]string{}
		}
		r.secrets[id] = s
		r.mu.Unlock()
	}
	if !hasField {
		return s, nil
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(s), &fields); err != nil {
		return "", fmt.Errorf("secret %s is not a JSON object, so it has no field %q", id, field) // the value stays out of the message
	}
	v, ok := fields[field]
	if !ok {
		return "", fmt.Errorf("secret %s has no field %q", id, field)
	}
	str, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("field %q of secret %s is not a string", field, id)
	}
	return str, nil
}

func (r *Resolver) parameter(ctx context.Context, name string) (string, error) {
	if name == "" {
		return "", errors.New("${ssm:} names no parameter")
	}
	if r.ssm == nil {
		return "", fmt.Errorf("parameter %s: no SSM client", name)
	}
	r.mu.Lock()
	v, ok := r.params[name]
	r.mu.Unlock()
	if ok {
		return v, nil
	}
	var out struct {
		Parameter *struct{ Value *string }
	}
	err := r.ssm.call(ctx, "GetParameter", struct {
		Name           string
		WithDecryption bool
	}{name, true}, &out)
	if err != nil {
		return "", fmt.Errorf("reading parameter %s from SSM Parameter Store: %w", name, err)
	}
	if out.Parameter == nil || out.Parameter.Value == nil {
		return "", fmt.Errorf("parameter %s has no value", name)
	}
	v = *out.Parameter.Value
	r.mu.Lock()
	if r.params == nil {
		r.params = map[string]string{}
	}
	r.params[name] = v
	r.mu.Unlock()
	return v, nil
}
