package aws

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Account and Region appear in the ARNs the simulator makes.
const (
	Account = "123456789012"
	Region  = "us-east-1"
)

// Server is the simulated Secrets Manager and SSM. The zero value is not usable; call New.
type Server struct {
	mu      sync.Mutex
	now     func() time.Time
	secrets map[string]*secret // by name
	params  map[string]*parameter
	denied  map[string]bool // secret names and parameter names
	calls   map[string]int  // by X-Amz-Target
	busy    map[string]int  // by X-Amz-Target: requests still to refuse as throttled
	seq     int
}

type secret struct {
	name, arn string
	created   time.Time
	versions  []*secretVersion // oldest first
}

type secretVersion struct {
	id     string
	value  string
	stages []string
	at     time.Time
}

type parameter struct {
	name, typ string
	versions  []string // values; version n is versions[n-1]
	modified  time.Time
}

// New returns an empty simulator; now is its clock (nil: time.Now).
func New(now func() time.Time) *Server {
	if now == nil {
		now = time.Now
	}
	return &Server{now: now, secrets: map[string]*secret{}, params: map[string]*parameter{},
		denied: map[string]bool{}, calls: map[string]int{}, busy: map[string]int{}}
}

// Calls returns how many requests named operation ("secretsmanager.GetSecretValue",
// "AmazonSSM.GetParameter", ...) were received, failed ones included.
func (s *Server) Calls(operation string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[operation]
}

// PutSecret creates the secret name or gives it a new AWSCURRENT value; it returns the ARN.
func (s *Server) PutSecret(name, value string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := s.secrets[name]
	if sec == nil {
		sec = s.newSecretLocked(name)
	}
	s.putVersionLocked(sec, value)
	return sec.arn
}

// PutParameter creates or overwrites the parameter name (type String, StringList or
// SecureString).
func (s *Server) PutParameter(name, typ, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.params[name]
	if p == nil {
		p = &parameter{name: name}
		s.params[name] = p
	}
	p.typ = typ
	p.versions = append(p.versions, value)
	p.modified = s.now()
}

// Deny makes every request for the secret or parameter name answer AccessDeniedException (on
// == false lifts it).
func (s *Server) Deny(name string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denied[name] = on
}

// Throttle makes the next n requests of operation ("AmazonSSM.GetParameter", ...) answer
// ThrottlingException, as both services do when a caller exceeds their request rate.
func (s *Server) Throttle(operation string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy[operation] = n
}

func (s *Server) newSecretLocked(name string) *secret {
	s.seq++
	// Secrets Manager appends a hyphen and six random characters to the name in the ARN.
	sec := &secret{name: name, created: s.now(),
		arn: fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s-%s", Region, Account, name, suffix(s.seq))}
	s.secrets[name] = sec
	return sec
}

func suffix(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, 6)
	for i := range b {
		b[i] = alphabet[n%len(alphabet)]
		n = n/len(alphabet) + 7*i + 3
	}
	return string(b)
}

func (s *Server) putVersionLocked(sec *secret, value string) *secretVersion {
	s.seq++
	for _, v := range sec.versions {
		v.stages = removeStage(v.stages, "AWSPREVIOUS")
		if hasStage(v.stages, "AWSCURRENT") {
			v.stages = append(removeStage(v.stages, "AWSCURRENT"), "AWSPREVIOUS")
		}
	}
	v := &secretVersion{id: fmt.Sprintf("EXAMPLE1-90ab-cdef-fedc-ba987%07d", s.seq), value: value,
		stages: []string{"AWSCURRENT"}, at: s.now()}
	sec.versions = append(sec.versions, v)
	return v
}

func hasStage(stages []string, st string) bool {
	for _, x := range stages {
		if x == st {
			return true
		}
	}
	return false
}

func removeStage(stages []string, st string) []string {
	out := stages[:0:0]
	for _, x := range stages {
		if x != st {
			out = append(out, x)
		}
	}
	return out
}

// apiError is an error answer of the JSON protocol.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return e.typ + ": " + e.msg }

func errorf(status int, typ, format string, args ...any) *apiError {
	return &apiError{status: status, typ: typ, msg: fmt.Sprintf(format, args...)}
}

// ServeHTTP implements the JSON protocol of both services.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	s.mu.Lock()
	s.calls[target]++
	throttled := s.busy[target] > 0
	if throttled {
		s.busy[target]--
	}
	s.mu.Unlock()
	var out any
	var err error
	if throttled {
		err = errorf(http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
	} else {
		out, err = s.handle(r, target)
	}
	w.Header().Set("X-Amzn-RequestId", fmt.Sprintf("sim-%d", time.Now().UnixNano()))
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = errorf(http.StatusInternalServerError, "InternalServiceError", "%v", err)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(ae.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": ae.typ, "message": ae.msg})
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) handle(r *http.Request, target string) (any, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		return nil, errorf(http.StatusNotFound, "UnknownOperationException", "%s %s is not an operation", r.Method, r.URL.Path)
	}
	service, op, ok := strings.Cut(target, ".")
	if !ok {
		return nil, errorf(http.StatusBadRequest, "UnknownOperationException", "missing or malformed X-Amz-Target %q", target)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-amz-json-1.1") {
		return nil, errorf(http.StatusBadRequest, "SerializationException", "Content-Type %q is not application/x-amz-json-1.1", ct)
	}
	signing := map[string]string{"secretsmanager": "secretsmanager", "AmazonSSM": "ssm"}[service]
	if signing == "" {
		return nil, errorf(http.StatusBadRequest, "UnknownOperationException", "unknown service in X-Amz-Target %q", target)
	}
	if err := checkSignature(r, signing); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "SerializationException", "reading the body: %v", err)
	}
	decode := func(v any) error {
		if err := json.Unmarshal(body, v); err != nil {
			return errorf(http.StatusBadRequest, "SerializationException", "the body is not valid JSON: %v", err)
		}
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch target {
	case "secretsmanager.GetSecretValue":
		var in getSecretValueInput
		if err := decode(&in); err != nil {
			return nil, err
		}
		return s.getSecretValueLocked(in)
	case "secretsmanager.CreateSecret":
		var in createSecretInput
		if err := decode(&in); err != nil {
			return nil, err
		}
		return s.createSecretLocked(in)
	case "secretsmanager.PutSecretValue":
		var in putSecretValueInput
		if err := decode(&in); err != nil {
			return nil, err
		}
		return s.putSecretValueLocked(in)
	case "AmazonSSM.GetParameter":
		var in getParameterInput
		if err := decode(&in); err != nil {
			return nil, err
		}
		return s.getParameterLocked(in)
	case "AmazonSSM.PutParameter":
		var in putParameterInput
		if err := decode(&in); err != nil {
			return nil, err
		}
		return s.putParameterLocked(in)
	}
	return nil, errorf(http.StatusBadRequest, "UnknownOperationException", "operation %s is not simulated", op)
}

// checkSignature requires a Signature Version 4 Authorization header scoped to service; the
// signature is not verified (the simulator holds no keys).
func checkSignature(r *http.Request, service string) error {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return errorf(http.StatusBadRequest, "MissingAuthenticationTokenException", "Request is missing Authentication Token")
	}
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 Credential=")
	if !ok {
		return errorf(http.StatusBadRequest, "IncompleteSignatureException", "Authorization header is not AWS4-HMAC-SHA256")
	}
	cred, _, _ := strings.Cut(rest, ",")
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[0] == "" || parts[4] != "aws4_request" {
		return errorf(http.StatusBadRequest, "IncompleteSignatureException", "malformed credential scope %q", cred)
	}
	if parts[3] != service {
		return errorf(http.StatusBadRequest, "InvalidSignatureException", "credential should be scoped to correct service: '%s'", service)
	}
	return nil
}

// Running is a Server listening on a loopback port.
type Running struct {
	*Server
	// URL is the endpoint of both services, e.g. http://127.0.0.1:41234.
	URL string
	srv *http.Server
}

// Listen serves s on a free loopback port until Close.
func Listen(s *Server) (*Running, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("simulated aws: %w", err)
	}
	r := &Running{Server: s, URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Close stops the server.
func (r *Running) Close() error { return r.srv.Close() }

// Start runs a new simulator until the test ends.
func Start(t testing.TB) *Running {
	t.Helper()
	r, err := Listen(New(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
