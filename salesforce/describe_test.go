package salesforce

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
)

func describeBody() map[string]any {
	return map[string]any{
		"name": "LoginHistory", "label": "Login History", "queryable": true, "custom": false,
		"fields": []map[string]any{
			{"name": "Id", "type": "id", "filterable": true, "sortable": true},
			{"name": "LoginTime", "type": "datetime", "filterable": true, "sortable": true},
			{"name": "UserId", "type": "reference", "relationshipName": "User", "referenceTo": []string{"User"}},
			{"name": "Blob", "type": "base64"},
			{"name": "Address", "type": "address"},
			{"name": "Street", "type": "textarea"},
		},
	}
}

func TestDescribeIsCachedAndSingleFlight(t *testing.T) {
	org := newTestOrg(t)
	var calls atomic.Int64
	release := make(chan struct{})
	org.handle("GET /services/data/v60.0/sobjects/{obj}/describe", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-release
		if r.PathValue("obj") != "LoginHistory" {
			writeSFError(w, 404, CodeNotFound, "The requested resource does not exist")
			return
		}
		writeJSON(w, 200, describeBody())
	})
	c := org.client(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			d, err := c.Describe(context.Background(), "LoginHistory")
			if err != nil || d.Name != "LoginHistory" {
				t.Error(d, err)
			}
		})
	}
	close(release)
	wg.Wait()
	d, err := c.Describe(context.Background(), "LoginHistory")
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || c.Stats().Calls[KindDescribe] != 1 {
		t.Fatalf("describe calls = %d, want 1", calls.Load())
	}
	if got := d.SelectableFields(); !reflect.DeepEqual(got, []string{"Id", "LoginTime", "UserId", "Street"}) {
		t.Errorf("SelectableFields = %v", got)
	}
	if f, ok := d.Field("UserId"); !ok || f.RelationshipName != "User" || f.ReferenceTo[0] != "User" {
		t.Errorf("Field(UserId) = %+v, %v", f, ok)
	}
}

func TestDescribeFailureIsNotCached(t *testing.T) {
	org := newTestOrg(t)
	var calls atomic.Int64
	org.handle("GET /services/data/v60.0/sobjects/LoginHistory/describe", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			writeSFError(w, 403, CodeInsufficientAccess, "no")
			return
		}
		writeJSON(w, 200, describeBody())
	})
	c := org.client(t)
	if _, err := c.Describe(context.Background(), "LoginHistory"); err == nil {
		t.Fatal("first describe succeeded")
	}
	if _, err := c.Describe(context.Background(), "LoginHistory"); err != nil {
		t.Fatalf("second describe: %v", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("calls = %d, want 2", calls.Load())
	}
}

func TestDescribeRejectsBadNames(t *testing.T) {
	org := newTestOrg(t)
	c := org.client(t)
	for _, name := range []string{"", "../limits", "Account/describe", "Account?x=1"} {
		if _, err := c.Describe(context.Background(), name); !errors.Is(err, ErrInvalidSOQLValue) {
			t.Errorf("Describe(%q) = %v", name, err)
		}
	}
	if c.Stats().TotalCalls() != 0 {
		t.Fatalf("calls made for invalid names: %v", c.Stats().Calls)
	}
}

func TestDescribeGlobalCached(t *testing.T) {
	org := newTestOrg(t)
	org.handle("GET /services/data/v60.0/sobjects/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"encoding": "UTF-8", "maxBatchSize": 200, "sobjects": []map[string]any{
			{"name": "Account", "queryable": true, "keyPrefix": "001"},
			{"name": "LoginEvent", "queryable": true},
			{"name": "My_Event__e", "queryable": false, "custom": true},
		}})
	})
	c := org.client(t)
	for range 3 {
		g, err := c.DescribeGlobal(context.Background())
		if err != nil || len(g.SObjects) != 3 || g.SObjects[2].Name != "My_Event__e" || g.SObjects[2].Queryable {
			t.Fatalf("DescribeGlobal = %+v, %v", g, err)
		}
	}
	if n := c.Stats().Calls[KindDescribeGlobal]; n != 1 {
		t.Fatalf("calls = %d, want 1", n)
	}
}
