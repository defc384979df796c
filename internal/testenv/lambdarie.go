package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// LambdaRIE is a running AWS Lambda Runtime Interface Emulator serving one function whose
// bootstrap is a local executable. Like Lambda, it starts the bootstrap on the first invocation,
// keeps it warm between invocations and hands it one invocation at a time; the invocation's
// deadline is AWS_LAMBDA_FUNCTION_TIMEOUT seconds.
type LambdaRIE struct {
	// URL is the emulator's base URL; Invoke posts to URL + InvokePath.
	URL string

	proc *process
}

// InvokePath is the emulator's synchronous invocation endpoint (the Lambda Invoke API's path).
const InvokePath = "/2015-03-31/functions/function/invocations"

// StartLambdaRIE starts the emulator on free loopback ports (its own Runtime API port too, so
// several instances run side by side) with bootstrap as the function, timeout as the function's
// timeout and env added to the environment the bootstrap inherits. It stops when the test ends.
func StartLambdaRIE(t testing.TB, bootstrap string, timeout time.Duration, env []string) *LambdaRIE {
	t.Helper()
	bin := needTool(t, "AWS Lambda Runtime Interface Emulator", ToolLambdaRIE)
	dir := t.TempDir()
	r, err := retryOnPortConflict(func() (*LambdaRIE, error) {
		return startLambdaRIE(t.Context(), bin, dir, bootstrap, timeout, env)
	})
	if err != nil {
		t.Fatal(err)
	}
	cleanupServer(t, r.proc)
	return r
}

func startLambdaRIE(ctx context.Context, bin, dir, bootstrap string, timeout time.Duration, env []string) (*LambdaRIE, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	env = append([]string{
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(int(timeout.Seconds())),
		"AWS_LAMBDA_FUNCTION_NAME=sf2loki", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
	}, env...)
	p, err := startProcess("aws-lambda-rie", filepath.Join(dir, "rie.log"), bin,
		[]string{"--log-level", "info", "--runtime-interface-emulator-address", addr,
			"--runtime-api-address", "127.0.0.1:" + strconv.Itoa(ports[1]), bootstrap}, env)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, func(ctx context.Context) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	}); err != nil {
		p.stop()
		return nil, err
	}
	return &LambdaRIE{URL: "http://" + addr, proc: p}, nil
}

// Invocation is one answer of the emulator.
type Invocation struct {
	// Body is the function's response, or its error as {"errorMessage":...,"errorType":...}.
	Body []byte
	// ErrorType is the errorType of a function error ("" on success).
	ErrorType string
}

// Invoke runs one synchronous invocation with payload and returns the function's answer.
func (r *LambdaRIE) Invoke(ctx context.Context, payload string) (Invocation, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL+InvokePath, strings.NewReader(payload))
	if err != nil {
		return Invocation{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Invocation{}, fmt.Errorf("invoking the function: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Invocation{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Invocation{Body: body}, fmt.Errorf("the emulator answered %s: %s", resp.Status, body)
	}
	inv := Invocation{Body: body}
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte(`{"errorMessage"`)) || bytes.Contains(body, []byte(`"errorType"`)) {
		var e struct {
			ErrorType string `json:"errorType"`
		}
		_ = json.Unmarshal(body, &e)
		inv.ErrorType = e.ErrorType
	}
	return inv, nil
}

// Output returns everything the emulator and the bootstrap wrote so far (the bootstrap's
// stdout and stderr go to the emulator's output, as they go to CloudWatch Logs in Lambda).
func (r *LambdaRIE) Output() []byte { return readFileQuiet(r.proc.logPath) }

// BootstrapPID returns the process id of the running bootstrap (a child of the emulator), or an
// error when none runs (before the first invocation). Linux only: it reads /proc.
func (r *LambdaRIE) BootstrapPID() (int, error) {
	parent := r.proc.cmd.Process.Pid
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces, so cut after the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(parent) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("testenv: no bootstrap runs under the emulator (pid %d)", parent)
}
