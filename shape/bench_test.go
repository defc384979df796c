package shape

import (
	"strconv"
	"testing"
	"time"
)

var benchFields = []string{"EVENT_TYPE", "TIMESTAMP", "REQUEST_ID", "ORGANIZATION_ID", "USER_ID", "RUN_TIME", "CPU_TIME",
	"URI", "SESSION_KEY", "LOGIN_KEY", "USER_TYPE", "REQUEST_STATUS", "DB_TOTAL_TIME", "API_TYPE", "API_VERSION",
	"CLIENT_NAME", "METHOD_NAME", "ENTITY_NAME", "ROWS_PROCESSED", "REQUEST_SIZE", "RESPONSE_SIZE", "QUERY",
	"TIMESTAMP_DERIVED", "USER_ID_DERIVED", "CLIENT_IP", "URI_ID_DERIVED"}

var benchValues = []string{"API", "20260630010000.000", "4exLFFQZ1234567890", "00Dxx0000001gEH", "005xx000001Sv6R",
	"123", "45", "/services/data/v62.0/query", "abcdefghijklmnop", "qrstuvwxyzabcdef", "Standard", "S", "12345678",
	"R", "62.0", "DataLoader, v62", "query", "Account", "200", "1234", "567890",
	"SELECT Id, Name FROM Account WHERE CreatedDate > 2026-01-01T00:00:00Z", "2026-06-30T01:00:00.123Z",
	"005xx000001Sv6RAAS", "10.1.2.3", "001xx000003DGb2AAG"}

func benchRecord(r *Record, i int) {
	r.Reset()
	for j, n := range benchFields {
		k := String
		if j == 5 || j == 6 {
			k = Number
		}
		r.AppendString(n, k, benchValues[j])
	}
	r.ID = strconv.AppendInt(append(r.ID, "0ATxx0000000001:"...), int64(i), 10)
	r.Time = time.Unix(1782781200, int64(i))
}

func benchShape(b *testing.B, opts Options) {
	s, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	p := s.Plan(Schema{Source: "eventlogfile", Type: "API", Fields: benchFields})
	var r Record
	b.ReportAllocs()
	n := 0
	for i := 0; b.Loop(); i++ {
		benchRecord(&r, i)
		e, _ := p.Shape(&r)
		n += len(e.Line)
	}
	b.SetBytes(int64(n / max(b.N, 1)))
}

// BenchmarkShapePlain: JSON line only.
func BenchmarkShapePlain(b *testing.B) { benchShape(b, Options{}) }

// BenchmarkShapeTypical: two metadata fields, one hashed field, one masked, one sampled type.
func BenchmarkShapeTypical(b *testing.B) {
	benchShape(b, Options{
		Salt: testSalt,
		Transforms: []Transform{
			{Op: OpHash, Fields: []string{"USER_ID"}},
			{Op: OpMask, Fields: []string{"CLIENT_IP"}},
			{Op: OpDropRow, Name: "limits", Match: map[string]string{"URI": "*/limits"}},
		},
		Metadata: []string{"REQUEST_ID", "USER_ID"},
	})
}

// BenchmarkShapePromoted: two fields promoted to stream labels (the label cache's key per row).
func BenchmarkShapePromoted(b *testing.B) {
	benchShape(b, Options{Types: []TypeRule{{Type: "API", Labels: []string{"API_TYPE", "REQUEST_STATUS"}}}})
}
