package lambda_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sf2loki/sf2loki/internal/sftest"
	simaws "github.com/sf2loki/sf2loki/internal/sim/aws"
	simloki "github.com/sf2loki/sf2loki/internal/sim/loki"
	"github.com/sf2loki/sf2loki/job"
)

// The Salesforce consumer secret comes from Secrets Manager and the Loki password from SSM
// Parameter Store, through the SDK clients inside the emulated function: each is fetched once
// across 20 warm invocations; a secret rotated in Secrets Manager (and in the org) fails the
// next invocation's authentication and is used by the one after; no secret appears in any
// output or response.
func TestSecretsFromSecretsManagerAndSSMAcrossWarmInvocations(t *testing.T) {
	const (
		clientID = "3MVG9-sf2loki-cc"
		secret1  = "cs-first-3c1f9a7e"
		secret2  = "cs-rotated-8b2d4e60"
		lokiPass = "lp-ssm-5e7a91c2"
	)
	w := newWorld(t, simloki.Options{Username: "sf2loki", Password: lokiPass})
	if err := w.org.AddClientCredentialsApp(clientID, secret1, sftest.User); err != nil {
		t.Fatal(err)
	}
	sim := simaws.Start(t)
	sm := secretsmanager.New(secretsmanager.Options{Region: simaws.Region, BaseEndpoint: aws.String(sim.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "test", "")})
	created, err := sm.CreateSecret(t.Context(), &secretsmanager.CreateSecretInput{Name: aws.String("sf2loki/salesforce"),
		SecretString: aws.String(fmt.Sprintf(`{"client_secret":%q}`, secret1))})
	if err != nil {
		t.Fatal(err)
	}
	sim.PutParameter("/sf2loki/loki-password", "SecureString", lokiPass)
	w.salesforce = fmt.Sprintf("  auth_mode: client_credentials\n  client_id: %s\n  client_secret: ${secretsmanager:%s#client_secret}\n",
		clientID, aws.ToString(created.ARN))
	w.lokiAuth = "    username: sf2loki\n    password: ${ssm:/sf2loki/loki-password}\n"
	path := w.config("sf2loki.yaml")
	awsEnv := []string{"AWS_ENDPOINT_URL_SECRETS_MANAGER=" + sim.URL, "AWS_ENDPOINT_URL_SSM=" + sim.URL,
		"AWS_REGION=" + simaws.Region, "AWS_ACCESS_KEY_ID=AKIDLAMBDA", "AWS_SECRET_ACCESS_KEY=lambda-role-key"}
	f := w.function(path, 60*time.Second, append(awsEnv, "SF2LOKI_LAMBDA_REFRESH=1h")...)

	var bodies [][]byte
	for i := range 20 {
		w.insertLogins(5)
		rep, inv := invoke(t, f)
		bodies = append(bodies, inv.Body)
		if rep == nil || rep.Outcome != job.OutcomeOK {
			t.Fatalf("invocation %d: %s %s\n%s", i+1, inv.ErrorType, inv.Body, tail(f))
		}
	}
	if n, m := sim.Calls("secretsmanager.GetSecretValue"), sim.Calls("AmazonSSM.GetParameter"); n != 1 || m != 1 {
		t.Fatalf("20 warm invocations fetched the secret %d and the parameter %d times, want once each", n, m)
	}

	// Rotation: Secrets Manager and the org get the new secret; the org ends every session.
	if _, err := sm.PutSecretValue(t.Context(), &secretsmanager.PutSecretValueInput{SecretId: created.ARN,
		SecretString: aws.String(fmt.Sprintf(`{"client_secret":%q}`, secret2))}); err != nil {
		t.Fatal(err)
	}
	if err := w.org.AddClientCredentialsApp(clientID, secret2, sftest.User); err != nil {
		t.Fatal(err)
	}
	w.org.ExpireSessions()
	w.insertLogins(5)
	rep, inv := invoke(t, f)
	bodies = append(bodies, inv.Body)
	if rep != nil {
		t.Fatalf("the invocation after the rotation succeeded with the old secret: %s", inv.Body)
	}
	t.Logf("with the old secret: %s", inv.ErrorType)
	rep, inv = invoke(t, f)
	bodies = append(bodies, inv.Body)
	if rep == nil || rep.Outcome != job.OutcomeOK {
		t.Fatalf("the invocation after the failed one: %s %s\n%s", inv.ErrorType, inv.Body, tail(f))
	}
	if n := sim.Calls("secretsmanager.GetSecretValue"); n != 2 {
		t.Fatalf("GetSecretValue calls = %d, want 2 (the cold start and the re-resolution after the failure)", n)
	}
	if got := w.recv.Count(); got != w.inserted {
		t.Fatalf("the receiver holds %d entries, %d rows were inserted", got, w.inserted)
	}

	// A refresh period re-resolves even without a failure.
	ttl := w.function(path, 60*time.Second, append(awsEnv, "SF2LOKI_LAMBDA_REFRESH=1ns")...)
	before := sim.Calls("secretsmanager.GetSecretValue")
	for range 3 {
		rep, inv := invoke(t, ttl)
		bodies = append(bodies, inv.Body)
		if rep == nil || rep.Outcome != job.OutcomeOK {
			t.Fatalf("refresh: %s %s", inv.ErrorType, inv.Body)
		}
	}
	if n := sim.Calls("secretsmanager.GetSecretValue") - before; n != 3 {
		t.Fatalf("with a refresh period shorter than the interval, 3 invocations fetched the secret %d times, want 3", n)
	}

	outputs := append(bodies, f.Output(), ttl.Output())
	for _, s := range []string{secret1, secret2, lokiPass} {
		for i, out := range outputs {
			if bytes.Contains(out, []byte(s)) {
				t.Errorf("output %d contains the secret %q", i, s)
			}
		}
	}
	if !bytes.Contains(f.Output(), []byte(`"secret_references":2`)) {
		t.Errorf("the function never logged loading 2 secret references")
	}
}
