package lambda

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sf2loki/sf2loki/config"
)

// ConfigYAMLEnv holds the whole configuration as YAML when no file or object is named.
const ConfigYAMLEnv = "SF2LOKI_CONFIG_YAML"

// Loaded is a configuration read for an execution environment.
type Loaded struct {
	Config *config.Config
	// Secrets are the configuration's secret values, resolved references included: the
	// redactor of every line the function prints needs them all.
	Secrets []string
	// References counts the secret references resolved.
	References int
}

// LoadConfig reads the configuration from path (a file in the package or an s3:// object),
// else from $SF2LOKI_CONFIG_YAML, plus the SF2LOKI_* overrides; resolves its
// ${secretsmanager:...} and ${ssm:...} references through the SDK clients; and restricts it to
// the job group named job (empty: none). onSecret, when set, receives every secret value
// (resolved references included) as soon as it is known, before validation, so whatever prints
// a refusal can scrub it.
func LoadConfig(ctx context.Context, path, job string, onSecret func(string)) (Loaded, error) {
	s3c := sync.OnceValues(func() (*s3.Client, error) { return NewS3Client(ctx, S3Options{}) })
	reader := ObjectReader{Ctx: ctx, S3: s3c}
	yamlEnv := os.Getenv(ConfigYAMLEnv)
	if path == "" && yamlEnv != "" {
		path = "$" + ConfigYAMLEnv
	}
	open := func(p string) (io.ReadCloser, error) {
		if p == "$"+ConfigYAMLEnv {
			return io.NopCloser(strings.NewReader(yamlEnv)), nil
		}
		return reader.Open(p)
	}
	var res *Resolver
	refs := 0
	reference := func(ref string) (string, error) {
		if res == nil {
			awsCfg, err := AWSConfig(ctx, S3Options{})
			if err != nil {
				return "", err
			}
			res = NewResolver(awsCfg)
		}
		refs++
		v, err := res.Resolve(ctx, ref)
		if err == nil && onSecret != nil {
			onSecret(v) // before anything can print it, a failed validation included
		}
		return v, err
	}
	cfg, err := config.Load(config.LoadOptions{Path: path, Open: open, Reference: reference, OnSecret: onSecret})
	if err != nil {
		return Loaded{}, fmt.Errorf("configuration is invalid: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if cfg, err = cfg.ForJob(job); err != nil {
		return Loaded{}, err
	}
	secrets := cfg.Secrets()
	if res != nil {
		secrets = append(secrets, res.Values()...)
	}
	return Loaded{Config: cfg, Secrets: secrets, References: refs}, nil
}

// DeadLetters opens the dead letters of invocations when sink.loki.dead_letter_path is an
// s3:// prefix, keeping its S3 client across the warm invocations of an environment. A nil
// *DeadLetters builds a client for each invocation.
type DeadLetters struct {
	client *s3.Client
	at     string // the location client was built for
}

// Open returns the dead letter of one invocation (nil when dead_letter_path is not an s3://
// prefix): one object per dropped entry, written before the commit.
func (d *DeadLetters) Open(ctx context.Context, cfg *config.Config, invocation string) (io.Writer, error) {
	path := cfg.Sink.Loki.DeadLetterPath
	if _, ok, err := ParseS3URL(path); !ok || err != nil {
		return nil, err
	}
	var c *s3.Client
	if d != nil && d.client != nil && d.at == path {
		c = d.client
	} else {
		o := S3Options{}
		if st := cfg.State; st.Store == "s3" {
			o = S3Options{Endpoint: st.S3.Endpoint, Region: st.S3.Region, PathStyle: st.S3.PathStyle,
				AccessKeyID: st.S3.AccessKeyID, SecretAccessKey: st.S3.SecretAccessKey.Value(), SessionToken: st.S3.SessionToken.Value()}
		}
		o.Proxy = cfg.HTTP.ProxyFunc()
		nc, err := NewS3Client(ctx, o)
		if err != nil {
			return nil, err
		}
		c = nc
		if d != nil {
			d.client, d.at = c, path
		}
	}
	return NewDeadLetter(c, path, invocation, cfg.Run.CommitTimeout.D())
}
