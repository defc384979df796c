package testenv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"google.golang.org/api/googleapi"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestE2EVictoriaLogsLokiPushIsQueryable pushes Loki JSON (one entry eleven years old, one a
// year ahead, one line that looks like JSON) and reads every entry back with its labels and
// structured metadata, byte for byte.
func TestE2EVictoriaLogsLokiPushIsQueryable(t *testing.T) {
	vl := testenv.StartVictoriaLogs(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	entries := []struct {
		ts   time.Time
		line string
	}{
		{now.AddDate(-11, 0, 0), "old event"},
		{now, `{"EVENT_TYPE":"API","n":1}`},
		{now.AddDate(1, 0, 0), "future event"},
	}
	var values [][]any
	for _, e := range entries {
		values = append(values, []any{strconv.FormatInt(e.ts.UnixNano(), 10), e.line, map[string]string{"event_type": "API"}})
	}
	body, err := json.Marshal(map[string]any{"streams": []any{map[string]any{
		"stream": map[string]string{"job": "sf2loki-smoke", "org": "00D000000000001"},
		"values": values,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, vl.PushURL(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	respBody, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("push: %s: %s", resp.Status, respBody)
	}

	rows := vl.Query(t, `{job="sf2loki-smoke"} | sort by (_time)`)
	if len(rows) != len(entries) {
		t.Fatalf("query returned %d rows, want %d: %v", len(rows), len(entries), rows)
	}
	for i, row := range rows {
		want := entries[i]
		if row["_msg"] != want.line {
			t.Errorf("row %d _msg = %q, want %q", i, row["_msg"], want.line)
		}
		got, err := time.Parse(time.RFC3339Nano, row["_time"].(string))
		if err != nil || !got.Equal(want.ts) {
			t.Errorf("row %d _time = %v (%v), want %v", i, row["_time"], err, want.ts)
		}
		for field, value := range map[string]string{"job": "sf2loki-smoke", "org": "00D000000000001", "event_type": "API"} {
			if row[field] != value {
				t.Errorf("row %d field %s = %v, want %q", i, field, row[field], value)
			}
		}
	}
}

func statusCode(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestE2EVersitygwConditionalWrites proves the S3 server enforces create-if-absent
// (If-None-Match: *) and compare-and-swap (If-Match) with 412 PreconditionFailed.
func TestE2EVersitygwConditionalWrites(t *testing.T) {
	srv := testenv.StartVersitygw(t)
	bucket := srv.NewBucket(t)
	c := srv.Client()
	ctx := t.Context()
	put := func(body string, ifNoneMatch, ifMatch *string) (*s3.PutObjectOutput, error) {
		return c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String("lease.json"),
			Body: strings.NewReader(body), IfNoneMatch: ifNoneMatch, IfMatch: ifMatch,
		})
	}
	first, err := put("v1", aws.String("*"), nil)
	if err != nil {
		t.Fatalf("create-if-absent on a new key: %v", err)
	}
	_, err = put("v1 again", aws.String("*"), nil)
	if statusCode(err) != http.StatusPreconditionFailed || errorCode(err) != "PreconditionFailed" {
		t.Fatalf("second create-if-absent: err = %v (status %d, code %q), want 412 PreconditionFailed", err, statusCode(err), errorCode(err))
	}
	if _, err := put("v2", nil, first.ETag); err != nil {
		t.Fatalf("If-Match with the current ETag: %v", err)
	}
	_, err = put("v3", nil, first.ETag)
	if statusCode(err) != http.StatusPreconditionFailed || errorCode(err) != "PreconditionFailed" {
		t.Fatalf("If-Match with a stale ETag: err = %v (status %d, code %q), want 412 PreconditionFailed", err, statusCode(err), errorCode(err))
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("lease.json")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = out.Body.Close() }()
	if got, _ := io.ReadAll(out.Body); string(got) != "v2" {
		t.Fatalf("object = %q, want the one successful overwrite %q", got, "v2")
	}
}

// TestE2EKubeLeaseConflict creates a Lease on a dedicated kube-apiserver and proves an update
// carrying a stale resourceVersion is refused with 409 Conflict.
func TestE2EKubeLeaseConflict(t *testing.T) {
	k := testenv.StartKube(t)
	ns := k.NewNamespace(t)
	leases := k.AdminClient(t).CoordinationV1().Leases(ns)
	ctx := t.Context()
	holder := "a"
	created, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "sf2loki"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := created.DeepCopy()
	holderB := "b"
	fresh.Spec.HolderIdentity = &holderB
	if _, err := leases.Update(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update with the current resourceVersion: %v", err)
	}
	stale := created.DeepCopy() // still carries the first resourceVersion
	holderC := "c"
	stale.Spec.HolderIdentity = &holderC
	_, err = leases.Update(ctx, stale, metav1.UpdateOptions{})
	var status apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &status) || status.Status().Code != http.StatusConflict {
		t.Fatalf("update with a stale resourceVersion: err = %v, want 409 Conflict", err)
	}
}

// TestE2EKubeUserNeedsRBAC proves a pre-provisioned user is authenticated but forbidden (403)
// until Kube.Grant gives it Leases (a Role and a RoleBinding), and that the grant reaches no
// other user.
func TestE2EKubeUserNeedsRBAC(t *testing.T) {
	k := testenv.SharedKube(t)
	ns := k.NewNamespace(t)
	ctx := t.Context()
	user := func(name string) kubernetes.Interface {
		c, err := kubernetes.NewForConfig(k.RESTConfig(k.UserToken(name)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	user1, user2 := user("user-1"), user("user-2")
	listLeases := func(c kubernetes.Interface) error {
		_, err := c.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		return err
	}
	forbidden := func(err error) bool {
		var status apierrors.APIStatus
		return apierrors.IsForbidden(err) && errors.As(err, &status) && status.Status().Code == http.StatusForbidden
	}
	if err := listLeases(user1); !forbidden(err) {
		t.Fatalf("user-1 before any binding: err = %v, want 403 Forbidden", err)
	}

	k.Grant(t, ns, "user-1", rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		Verbs: []string{"get", "list", "create", "update"}})
	// The RBAC authorizer reads bindings through an informer: allow it to catch up.
	err := waitFor(ctx, 30*time.Second, func() error { return listLeases(user1) })
	if err != nil {
		t.Fatalf("user-1 after the RoleBinding: %v", err)
	}
	if err := listLeases(user2); !forbidden(err) {
		t.Fatalf("user-2, not bound: err = %v, want 403 Forbidden", err)
	}
}

// waitFor retries f until it succeeds or the timeout passes, returning its last error.
func waitFor(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestE2EGCSPreconditions proves fake-gcs-server, reached over HTTP, refuses a create-if-absent
// write on an existing object with 412 and serves the object that won.
func TestE2EGCSPreconditions(t *testing.T) {
	g := testenv.StartGCS(t)
	bucket := g.NewBucket(t)
	obj := g.Client().Bucket(bucket).Object("lease.json")
	ctx := t.Context()
	write := func(body string) error {
		w := obj.If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
		if _, err := io.WriteString(w, body); err != nil {
			return err
		}
		return w.Close()
	}
	if err := write("first"); err != nil {
		t.Fatalf("create-if-absent on a new object: %v", err)
	}
	err := write("second")
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) || gerr.Code != http.StatusPreconditionFailed {
		t.Fatalf("second create-if-absent: err = %v, want 412", err)
	}
	r, err := obj.NewReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	if got, _ := io.ReadAll(r); !slices.Equal(got, []byte("first")) {
		t.Fatalf("object = %q, want %q", got, "first")
	}
}
