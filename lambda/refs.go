package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// Reference schemes understood by Resolver, written ${scheme:...} in a configuration value.
const (
	// SchemeSecretsManager reads a secret: ${secretsmanager:<name or ARN>} is its SecretString
	// (or SecretBinary); ${secretsmanager:<name or ARN>#<field>} is one field of a JSON secret.
	SchemeSecretsManager = "secretsmanager"
	// SchemeSSM reads a parameter with decryption: ${ssm:<name or ARN>}, e.g. ${ssm:/sf2loki/key}.
	SchemeSSM = "ssm"
)

// SecretsManagerAPI is the part of the Secrets Manager client Resolver uses.
type SecretsManagerAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SSMAPI is the part of the SSM client Resolver uses.
type SSMAPI interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// ErrUnknownScheme is returned for a ${scheme:...} reference with a scheme Resolver does not know.
var ErrUnknownScheme = errors.New("unknown reference scheme")

// Resolver resolves secret references against AWS Secrets Manager and SSM Parameter Store. One
// Resolver serves one configuration load: each distinct secret or parameter is fetched once,
// however many values name it. Resolved values are kept so the caller can redact them.
type Resolver struct {
	SecretsManager SecretsManagerAPI
	SSM            SSMAPI

	mu      sync.Mutex
	secrets map[string]string // by secret id: the SecretString
	params  map[string]string // by parameter name
	values  []string
}

// NewResolver returns a Resolver with clients built from aws (endpoints, region and credentials
// as the AWS SDK finds them: AWS_ENDPOINT_URL_SECRETS_MANAGER and AWS_ENDPOINT_URL_SSM select
// other endpoints).
func NewResolver(cfg aws.Config) *Resolver {
	return &Resolver{SecretsManager: secretsmanager.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg)}
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
	if r.SecretsManager == nil {
		return "", fmt.Errorf("secret %s: no Secrets Manager client", id)
	}
	r.mu.Lock()
	s, ok := r.secrets[id]
	r.mu.Unlock()
	if !ok {
		out, err := r.SecretsManager.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
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
	if r.SSM == nil {
		return "", fmt.Errorf("parameter %s: no SSM client", name)
	}
	r.mu.Lock()
	v, ok := r.params[name]
	r.mu.Unlock()
	if ok {
		return v, nil
	}
	out, err := r.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
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
