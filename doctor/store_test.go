package doctor

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/store"
	s3store "github.com/sf2loki/sf2loki/store/s3"
	"github.com/sf2loki/sf2loki/store/storetest"
)

// skewedSigner signs each request again as a host whose clock is off by offset would.
type skewedSigner struct {
	creds  aws.Credentials
	region string
	offset time.Duration
}

func (s skewedSigner) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Del("Authorization")
	req.Header.Del("X-Amz-Date")
	err := v4.NewSigner().SignHTTP(req.Context(), s.creds, req, req.Header.Get("X-Amz-Content-Sha256"), "s3", s.region, time.Now().Add(s.offset))
	if err != nil {
		return nil, err
	}
	return http.DefaultTransport.RoundTrip(req)
}

// An S3 endpoint that refuses this host's requests as signed too far from its own time
// (RequestTimeTooSkewed, which the s3 store reports as ErrIntegrity) fails the read and the
// conditional-write probe with the advice to fix the host's clock: not the advice for an
// endpoint that ignores preconditions (another store) nor for a wrong state section. An
// endpoint that does ignore preconditions still gets the advice to change the store.
func TestStoreChecksOnASkewedClockAdviseFixingTheClock(t *testing.T) {
	srv := testenv.StartVersitygw(t)
	client := awss3.New(awss3.Options{
		Region: srv.Region, BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
		HTTPClient: &http.Client{Transport: skewedSigner{
			creds:  aws.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey},
			region: srv.Region, offset: -time.Hour,
		}},
	})
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
