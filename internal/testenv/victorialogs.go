package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// VictoriaLogs is a running VictoriaLogs server, the Loki-compatible receiver of the e2e suite.
type VictoriaLogs struct {
	// URL is the server's base URL, e.g. "http://127.0.0.1:41234".
	URL string

	proc *process
}

// victoriaLogsArgs are the flags besides the listen address and data path. Generated test data
// carries timestamps far in the past and future; VictoriaLogs silently drops rows outside its
// retention window, so the window is as wide as it accepts.
var victoriaLogsArgs = []string{
	"-retentionPeriod=100y",
	"-futureRetention=100y",
	"-loggerLevel=WARN",
}

// StartVictoriaLogs starts VictoriaLogs on a random loopback port with its data in a test
// temporary directory, and stops it when the test ends.
func StartVictoriaLogs(t testing.TB) *VictoriaLogs {
	t.Helper()
	bin := needTool(t, "VictoriaLogs", ToolVictoriaLogs)
	dir := t.TempDir()
	vl, err := retryOnPortConflict(func() (*VictoriaLogs, error) {
		return startVictoriaLogs(t.Context(), bin, dir)
	})
	if err != nil {
		t.Fatal(err)
	}
	cleanupServer(t, vl.proc)
	return vl
}

func startVictoriaLogs(ctx context.Context, bin, dir string) (*VictoriaLogs, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	args := append([]string{
		"-httpListenAddr=" + addr,
		"-storageDataPath=" + filepath.Join(dir, "data"),
	}, victoriaLogsArgs...)
	p, err := startProcess("victoria-logs", filepath.Join(dir, "victoria-logs.log"), bin, args, nil)
	if err != nil {
		return nil, err
	}
	vl := &VictoriaLogs{URL: "http://" + addr, proc: p}
	if err := p.waitReady(ctx, func(ctx context.Context) error {
		_, err := vl.do(ctx, http.MethodGet, "/health", nil)
		return err
	}); err != nil {
		p.stop()
		return nil, err
	}
	return vl, nil
}

// PushURL is the Loki push endpoint with message parsing disabled, so every pushed line comes
// back byte for byte as _msg.
func (v *VictoriaLogs) PushURL() string {
	return v.URL + "/insert/loki/api/v1/push?disable_message_parsing=1"
}

// Flush makes every ingested row searchable now rather than after the ~1 s buffering delay.
func (v *VictoriaLogs) Flush(ctx context.Context) error {
	_, err := v.do(ctx, http.MethodPost, "/internal/force_flush", nil)
	return err
}

// QueryContext flushes, runs a LogsQL query and returns one map per row (fields such as _msg,
// _time, _stream, labels and structured metadata, all values as strings).
func (v *VictoriaLogs) QueryContext(ctx context.Context, logsql string) ([]map[string]any, error) {
	return v.queryAs(ctx, nil, logsql)
}

// QueryTenant is Query in the tenant accountID:projectID (VictoriaLogs' AccountID and
// ProjectID request headers; Query reads tenant 0:0).
func (v *VictoriaLogs) QueryTenant(t testing.TB, accountID, projectID, logsql string) []map[string]any {
	t.Helper()
	rows, err := v.queryAs(t.Context(), http.Header{"AccountID": {accountID}, "ProjectID": {projectID}}, logsql)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func (v *VictoriaLogs) queryAs(ctx context.Context, h http.Header, logsql string) ([]map[string]any, error) {
	if err := v.Flush(ctx); err != nil {
		return nil, err
	}
	body, err := v.doAs(ctx, h, http.MethodPost, "/select/logsql/query", url.Values{"query": {logsql}})
	if err != nil {
		return nil, err
	}
	var rows []map[string]any
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 0, 64*1024), 64<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			return nil, fmt.Errorf("victoria-logs query %q: bad result line %q: %w", logsql, line, err)
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// Query is QueryContext that fails the test on error.
func (v *VictoriaLogs) Query(t testing.TB, logsql string) []map[string]any {
	t.Helper()
	rows, err := v.QueryContext(t.Context(), logsql)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// do sends a request (form-encoded when form is non-nil) and returns the body of a 2xx answer.
func (v *VictoriaLogs) do(ctx context.Context, method, path string, form url.Values) (string, error) {
	return v.doAs(ctx, nil, method, path, form)
}

// doAs is do with the request headers h (a tenant's).
func (v *VictoriaLogs) doAs(ctx context.Context, h http.Header, method, path string, form url.Values) (string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, v.URL+path, body)
	if err != nil {
		return "", err
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("victoria-logs %s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("victoria-logs %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("victoria-logs %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
	}
	return string(data), nil
}
