package doctor

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/store"
	"github.com/sf2loki/sf2loki/store/configmap"
	s3store "github.com/sf2loki/sf2loki/store/s3"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// An S3 endpoint that refuses this host's requests as signed too far from its own time
// (RequestTimeTooSkewed, which the s3 store reports as ErrIntegrity) fails the read and the
// conditional-write probe with the advice to fix the host's clock: not the advice for an
// endpoint that ignores preconditions (another store) nor for a wrong state section. An
// endpoint that does ignore preconditions still gets the advice to change the store.
func TestStoreChecksOnASkewedClockAdviseFixingTheClock(t *testing.T) {
	srv := testenv.StartVersitygw(t)
	client := srv.SkewedClient(-time.Hour)
	bucket := srv.NewBucket(t)
	s3backend := func(key string) store.Backend {
		b, err := s3store.New(t.Context(), s3store.Options{Bucket: bucket, Key: key, Client: client})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ignoring := storetest.NewMemory()
	ignoring.SetHook(func(op storetest.Op) storetest.Fault {
		if op == storetest.OpStore {
			return storetest.IgnorePrecondition
		}
		return storetest.None
	})

	tests := []struct {
		name    string
		s       Store
		want    map[string]string // check ID -> a substring of its fix; the check must FAIL
		wantNot string            // a substring no fix may hold
	}{
		{
			name:    "skewed clock",
			s:       Store{Store: store.New(s3backend("state.json"), store.Options{}), Type: "s3", Probe: s3backend("state.json.probe")},
			want:    map[string]string{"store.read": "NTP", "store.probe": "NTP"},
			wantNot: "If-None-Match",
		},
		{
			name:    "endpoint ignoring preconditions",
			s:       Store{Store: store.New(storetest.NewMemory(), store.Options{}), Type: "s3", Probe: ignoring},
			want:    map[string]string{"store.probe": "If-None-Match"},
			wantNot: "NTP",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Run(context.Background(), StoreChecks(tt.s), Options{})
			if err != nil {
				t.Fatal(err)
			}
			results := map[string]Result{}
			for _, r := range rep.Results {
				results[r.ID] = r
				if strings.Contains(r.Fix, tt.wantNot) {
					t.Errorf("%s: fix %q mentions %q", r.ID, r.Fix, tt.wantNot)
				}
			}
			for id, want := range tt.want {
				r, ok := results[id]
				if !ok {
					t.Errorf("no %s result", id)
					continue
				}
				if r.Status != StatusFail {
					t.Errorf("%s: status %s, want FAIL (%s)", id, r.Status, r.Message)
				}
				if !strings.Contains(r.Fix, want) {
					t.Errorf("%s: fix %q does not mention %q (message: %s)", id, r.Fix, want, r.Message)
				}
			}
		})
	}
}

// Documents that share one ConfigMap share its 1 MiB, all keys together. Doctor's size check
// measures the document against the room the ConfigMap's other keys leave it, not against the
// document cap alone, and says how to make room. Here a 650 KiB document beside 300 KiB of
// other keys fills 93% of the ConfigMap, while it is only 68% of the cap.
func TestStoreReadWarnsWhenASharedConfigMapIsNearlyFull(t *testing.T) {
	ctx := t.Context()
	k := testenv.StartKube(t)
	ns := k.NewNamespace(t)
	shared := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Data:       map[string]string{"other.json": strings.Repeat("o", 300<<10)},
	}
	if _, err := k.AdminClient(t).CoreV1().ConfigMaps(ns).Create(ctx, shared, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	newStore := func() *store.Store {
		b, err := configmap.New(configmap.Options{Namespace: ns, Name: "shared", RESTConfig: k.RESTConfig(k.AdminToken)})
		if err != nil {
			t.Fatal(err)
		}
		return store.New(b, store.Options{Logger: slog.New(slog.DiscardHandler)})
	}
	w, err := newStore().Claim(ctx, storetest.Req(1, "a"), store.Snapshot{Absent: true})
	if err != nil {
		t.Fatal(err)
	}
	big := store.Change{Set: map[string]json.RawMessage{"big": store.StringValue(strings.Repeat("x", 650<<10))}}
	if err := w.Commit(ctx, big); err != nil {
		t.Fatal(err)
	}

	r := Store{Store: newStore(), Type: "configmap"}.checkRead(ctx)
	if r.Status != StatusWarn {
		t.Fatalf("store.read on a shared ConfigMap 93%% full: %s %q; want WARN", r.Status, r.Message)
	}
	if !strings.Contains(r.Message, "other keys") {
		t.Errorf("the message does not say the ConfigMap's other keys take room: %q", r.Message)
	}
	if !strings.Contains(r.Fix, "state.configmap.name") {
		t.Errorf("the fix %q does not say to give the document a ConfigMap of its own (state.configmap.name)", r.Fix)
	}
}
