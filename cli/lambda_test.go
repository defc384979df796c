package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestBareBinaryIsABootstrapOnlyInsideLambda(t *testing.T) {
	t.Setenv("AWS_LAMBDA_RUNTIME_API", "")
	if got := lambdaArgs([]string{"bootstrap"}); !slices.Equal(got, []string{"bootstrap"}) {
		t.Errorf("outside Lambda: %q", got)
	}
	t.Setenv("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001")
	if got := lambdaArgs([]string{"bootstrap"}); !slices.Equal(got, []string{"bootstrap", "lambda"}) {
		t.Errorf("inside Lambda with no command: %q", got)
	}
	if got := lambdaArgs([]string{"sf2loki", "version"}); !slices.Equal(got, []string{"sf2loki", "version"}) {
		t.Errorf("inside Lambda with a command: %q", got)
	}
}

func TestLambdaCommandOutsideLambdaIsAUsageError(t *testing.T) {
	t.Setenv("AWS_LAMBDA_RUNTIME_API", "")
	var out, errOut bytes.Buffer
	if code := Main([]string{"sf2loki", "lambda"}, &out, &errOut); code != ExitConfig || !strings.Contains(errOut.String(), "AWS_LAMBDA_RUNTIME_API is not set") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}
