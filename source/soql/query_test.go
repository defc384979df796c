package soql

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/salesforce"
	"github.com/sf2loki/sf2loki/source/keyset"
)

// TestRowKeysOutliveTheirPage: a row's key is copied out of the page (into blocks shared by the
// keys of consecutive rows), so the keys of thousands of rows, a key longer than a block among
// them, read the same after the pages they came from were overwritten.
func TestRowKeysOutliveTheirPage(t *testing.T) {
	q := &querier{Query: keyset.Query{Object: "LoginHistory", TSField: "LoginTime", Kind: keyset.ByID}}
	var keys, want []string
	for page := range 4 {
		var recs []string
		for i := range 1000 {
			id := fmt.Sprintf("0Ya%03d%012d", page, i)
			if page == 2 && i == 500 {
				id = strings.Repeat("L", keyBlock+100) // longer than a block
			}
			want = append(want, id)
			recs = append(recs, fmt.Sprintf(`{"attributes":{"type":"LoginHistory"},"Id":%q,"LoginTime":"2026-06-30T01:00:%02d.000+0000"}`, id, i%60))
		}
		body := []byte(`{"totalSize":1000,"done":true,"records":[` + strings.Join(recs, ",") + `]}`)
		p, err := salesforce.DecodeRowPage(body)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Rows {
			row, err := q.parse(r)
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, row.pos.Key)
		}
		for i := range body {
			body[i] = 'x' // the page's memory, read over by the next page
		}
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("key %d reads %.40q, want %.40q", i, keys[i], want[i])
		}
	}
}
