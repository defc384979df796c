package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv/toolcache"
)

// Timeouts of the process lifecycle. Readiness is generous because parallel test binaries share
// two cores; a healthy server is ready in a few seconds.
const (
	readyTimeout  = 2 * time.Minute
	readyPoll     = 100 * time.Millisecond
	stopGrace     = 5 * time.Second
	startAttempts = 3
	logTailLines  = 40
)

// errAddrInUse marks a start that failed because a picked port was taken in the meantime; the
// caller retries with fresh ports.
var errAddrInUse = errors.New("address already in use")

// process is a server child process whose output goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid once done is closed
}

// startProcess starts bin in its own process group, with output appended to logPath. The
// process is killed when the test binary dies (see procAttr).
func startProcess(name, logPath, bin string, args, env []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testenv: %s log: %w", name, err)
	}
	// The child holds its own copy of the descriptor.
	defer func() { _ = logFile.Close() }()
	fmt.Fprintf(logFile, "$ %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testenv: start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process group: SIGTERM, then SIGKILL after stopGrace. It is idempotent.
func (p *process) stop() {
	if p == nil || p.exited() {
		return
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
}

// tail returns the last lines of the process log.
func (p *process) tail() string {
	return fmt.Sprintf("--- last lines of %s log (%s) ---\n%s", p.name, p.logPath, toolcache.TailFile(p.logPath, logTailLines))
}

// waitReady polls check until it succeeds, the process exits, or the timeout passes. Its error
// carries the log tail; it wraps errAddrInUse when the process died on a taken port.
func (p *process) waitReady(ctx context.Context, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var last error
	for {
		if p.exited() {
			exitErr := p.waitErr
			if exitErr == nil {
				exitErr = errors.New("exit status 0")
			}
			err := fmt.Errorf("testenv: %s exited during startup (%w)\n%s", p.name, exitErr, p.tail())
			if bytes.Contains(readFileQuiet(p.logPath), []byte("address already in use")) {
				return fmt.Errorf("%w: %w", errAddrInUse, err)
			}
			return err
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testenv: %s not ready after %v: %w (last check: %w)\n%s", p.name, readyTimeout, ctx.Err(), last, p.tail())
		case <-time.After(readyPoll):
		}
	}
}

// freePorts returns n distinct loopback TCP ports that were free a moment ago. Holding all
// listeners until every port is picked keeps the n ports distinct.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testenv: pick a free port: %w", err)
		}
		defer func() { _ = l.Close() }()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// retryOnPortConflict runs start up to startAttempts times while it fails with errAddrInUse.
func retryOnPortConflict[T any](start func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range startAttempts {
		v, err = start()
		if !errors.Is(err, errAddrInUse) {
			return v, err
		}
	}
	return v, err
}

func readFileQuiet(path string) []byte {
	data, _ := os.ReadFile(path)
	return data
}

// waitServing waits until url answers "ok" over TLS, trusting the self-signed certificate the
// process writes to crtPath when it starts (returned), with token as bearer token when set.
// The process is stopped when it never does.
func (p *process) waitServing(ctx context.Context, crtPath, url, token string) ([]byte, error) {
	var client *http.Client
	var crt []byte
	err := p.waitReady(ctx, func(ctx context.Context) error {
		if client == nil {
			b, err := os.ReadFile(crtPath)
			if err != nil {
				return err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(b) {
				return fmt.Errorf("no certificate in %s yet", crtPath)
			}
			crt, client = b, &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		}
		body, err := httpGet(ctx, client, url, token)
		if err == nil && strings.TrimSpace(body) != "ok" {
			err = fmt.Errorf("%s: %s", url, body)
		}
		return err
	})
	if client != nil {
		client.CloseIdleConnections()
	}
	if err != nil {
		p.stop()
		return nil, err
	}
	return crt, nil
}
