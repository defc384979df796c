package aws_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"

	simaws "github.com/sf2loki/sf2loki/internal/sim/aws"
)

func clients(t *testing.T) (*simaws.Running, *secretsmanager.Client, *ssm.Client) {
	t.Helper()
	sim := simaws.Start(t)
	creds := credentials.NewStaticCredentialsProvider("AKIDSIM", "sim-secret", "")
	sm := secretsmanager.New(secretsmanager.Options{Region: simaws.Region, BaseEndpoint: aws.String(sim.URL), Credentials: creds, Retryer: aws.NopRetryer{}})
	ps := ssm.New(ssm.Options{Region: simaws.Region, BaseEndpoint: aws.String(sim.URL), Credentials: creds, Retryer: aws.NopRetryer{}})
	return sim, sm, ps
}

func TestSecretsManagerThroughTheSDK(t *testing.T) {
	sim, sm, _ := clients(t)
	ctx := t.Context()
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("sf2loki/key"), SecretString: aws.String("v1")})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(created.ARN)
	if !strings.HasPrefix(arn, "arn:aws:secretsmanager:us-east-1:123456789012:secret:sf2loki/key-") || len(arn) != len("arn:aws:secretsmanager:us-east-1:123456789012:secret:sf2loki/key-")+6 {
		t.Fatalf("ARN %q is not name plus six characters", arn)
	}
	for _, id := range []string{"sf2loki/key", arn, arn[:len(arn)-7]} {
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
		if err != nil {
			t.Fatalf("GetSecretValue(%s): %v", id, err)
		}
		if aws.ToString(out.SecretString) != "v1" || aws.ToString(out.ARN) != arn {
			t.Fatalf("GetSecretValue(%s) = %q %s", id, aws.ToString(out.SecretString), aws.ToString(out.ARN))
		}
	}
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(arn), SecretString: aws.String("v2")}); err != nil {
		t.Fatal(err)
	}
	cur, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("sf2loki/key")})
	if err != nil || aws.ToString(cur.SecretString) != "v2" {
		t.Fatalf("AWSCURRENT after PutSecretValue = %v, %v; want v2", cur, err)
	}
	prev, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("sf2loki/key"), VersionStage: aws.String("AWSPREVIOUS")})
	if err != nil || aws.ToString(prev.SecretString) != "v1" {
		t.Fatalf("AWSPREVIOUS = %v, %v; want v1", prev, err)
	}

	_, err = sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("missing")})
	var nf *smtypes.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Fatalf("missing secret: %v, want ResourceNotFoundException", err)
	}
	_, err = sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("sf2loki/key"), SecretString: aws.String("x")})
	var exists *smtypes.ResourceExistsException
	if !errors.As(err, &exists) {
		t.Fatalf("second CreateSecret: %v, want ResourceExistsException", err)
	}
	sim.Deny("sf2loki/key", true)
	_, err = sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("sf2loki/key")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" {
		t.Fatalf("denied secret: %v, want AccessDeniedException", err)
	}
	if n := sim.Calls("secretsmanager.GetSecretValue"); n != 7 {
		t.Fatalf("GetSecretValue calls = %d, want 7 (failed ones count)", n)
	}
}

func TestSSMThroughTheSDK(t *testing.T) {
	sim, _, ps := clients(t)
	ctx := t.Context()
	if _, err := ps.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/sf2loki/secret"), Value: aws.String("s1"), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatal(err)
	}
	_, err := ps.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/sf2loki/secret"), Value: aws.String("s2"), Type: ssmtypes.ParameterTypeSecureString})
	var exists *ssmtypes.ParameterAlreadyExists
	if !errors.As(err, &exists) {
		t.Fatalf("PutParameter without Overwrite: %v, want ParameterAlreadyExists", err)
	}
	if _, err := ps.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/sf2loki/secret"), Value: aws.String("s2"), Overwrite: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		decrypt bool
		want    string
		version int64
	}{
		{"/sf2loki/secret", true, "s2", 2},
		{"/sf2loki/secret:1", true, "s1", 1},
		{"arn:aws:ssm:us-east-1:123456789012:parameter/sf2loki/secret", true, "s2", 2},
	}
	for _, c := range cases {
		out, err := ps.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(c.name), WithDecryption: aws.Bool(c.decrypt)})
		if err != nil {
			t.Fatalf("GetParameter(%s): %v", c.name, err)
		}
		if got := aws.ToString(out.Parameter.Value); got != c.want || out.Parameter.Version != c.version || out.Parameter.Type != ssmtypes.ParameterTypeSecureString {
			t.Fatalf("GetParameter(%s) = %q v%d %s, want %q v%d", c.name, got, out.Parameter.Version, out.Parameter.Type, c.want, c.version)
		}
	}
	enc, err := ps.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/sf2loki/secret")})
	if err != nil || strings.Contains(aws.ToString(enc.Parameter.Value), "s2") {
		t.Fatalf("SecureString without decryption = %v, %v; want ciphertext", enc, err)
	}
	_, err = ps.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/nope")})
	var nf *ssmtypes.ParameterNotFound
	if !errors.As(err, &nf) {
		t.Fatalf("missing parameter: %v, want ParameterNotFound", err)
	}
	_, err = ps.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/sf2loki/secret:9")})
	var vnf *ssmtypes.ParameterVersionNotFound
	if !errors.As(err, &vnf) {
		t.Fatalf("missing version: %v, want ParameterVersionNotFound", err)
	}
	if n := sim.Calls("AmazonSSM.GetParameter"); n != 6 {
		t.Fatalf("GetParameter calls = %d, want 6", n)
	}
}

func TestUnsignedRequestsAreRefused(t *testing.T) {
	sim := simaws.Start(t)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, sim.URL+"/", strings.NewReader(`{"SecretId":"x"}`))
	req.Header.Set("X-Amz-Target", "secretsmanager.GetSecretValue")
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"MissingAuthenticationTokenException"`) {
		t.Fatalf("unsigned request: %d %s", resp.StatusCode, body)
	}
}
