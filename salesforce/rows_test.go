package salesforce

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"
)

// recordPage decodes b as fetchPage does (the map-based oracle).
func recordPage(b []byte) (*pageJSON, error) {
	var pj pageJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&pj); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("data after the result")
	}
	return &pj, nil
}

// paths lists every value path of m as Record.Get walks it: objects themselves and their members,
// "attributes" left out below the top level too.
func paths(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		if k == "attributes" {
			continue
		}
		out[prefix+k] = v
		if sub, ok := v.(map[string]any); ok {
			paths(prefix+k+".", sub, out)
		}
	}
}

// sameAsRecord checks that every row of rp holds exactly the values the map-based decoding of
// the same bytes holds, in the form the SOQL source writes them.
func sameAsRecord(t *testing.T, b []byte, rp *RowPage) {
	t.Helper()
	pj, err := recordPage(b)
	if err != nil {
		t.Fatalf("encoding/json refuses what DecodeRowPage accepted: %v\n%s", err, b)
	}
	if len(pj.Records) != len(rp.Rows) || rp.TotalSize != derefInt(pj.TotalSize) || rp.NextRecordsURL != pj.NextRecordsURL {
		t.Fatalf("page: rows %d/%d, totalSize %d, next %q vs %q", len(rp.Rows), len(pj.Records), rp.TotalSize, rp.NextRecordsURL, pj.NextRecordsURL)
	}
	for i, rec := range pj.Records {
		row := rp.Rows[i]
		want := map[string]any{}
		paths("", rec, want)
		got := map[string]bool{}
		for j := range row.Len() {
			got[row.Name(j)] = true
		}
		if len(got) != len(want) || len(got) != row.Len() {
			t.Fatalf("row %d: fields %v, want the paths of %v", i, slices.Sorted(mapsKeys(got)), rec)
		}
		for path, v := range want {
			j := row.Index(path, 3)
			if j < 0 {
				t.Fatalf("row %d: no %s", i, path)
			}
			val, kind := row.Value(j), row.Kind(j)
			// Plain: exactly the strings read from the body whose bytes a JSON string holds as
			// they are.
			plain := kind == ValueString && row.fields[j].flags&fieldEsc == 0 && !bytes.ContainsFunc(val, func(r rune) bool {
				return r < 0x20 || r == '"' || r == '\\' || r >= utf8.RuneSelf
			})
			if row.Plain(j) != plain {
				t.Fatalf("row %d %s: Plain %v for %v %q", i, path, row.Plain(j), kind, val)
			}
			// Span: where the value lies in the row's text, unless it is null or was decoded.
			text := row.Text()
			if len(text) < 2 || text[0] != '{' || text[len(text)-1] != '}' {
				t.Fatalf("row %d: Text %q is not the record object", i, text)
			}
			if s, e, ok := row.Span(j); ok != (kind != ValueNull && row.fields[j].flags&fieldEsc == 0) {
				t.Fatalf("row %d %s: Span ok=%v for %v (flags %b)", i, path, ok, kind, row.fields[j].flags)
			} else if ok && !bytes.Equal(text[s:e], val) {
				t.Fatalf("row %d %s: Text[Span] = %q, Value = %q", i, path, text[s:e], val)
			}
			switch x := v.(type) {
			case nil:
				if kind != ValueNull || val != nil {
					t.Fatalf("row %d %s: %v %q, want null", i, path, kind, val)
				}
			case string:
				if kind != ValueString || string(val) != x {
					t.Fatalf("row %d %s: %v %q, want string %q", i, path, kind, val, x)
				}
			case json.Number:
				if kind != ValueNumber || string(val) != x.String() {
					t.Fatalf("row %d %s: %v %q, want number %s", i, path, kind, val, x)
				}
			case bool:
				if kind != ValueBool || string(val) != fmt.Sprint(x) {
					t.Fatalf("row %d %s: %v %q, want %v", i, path, kind, val, x)
				}
			default:
				wantJSON, _ := json.Marshal(x)
				gotJSON, err := ObjectJSON(val)
				if kind != ValueObject || err != nil || !bytes.Equal(gotJSON, wantJSON) {
					t.Fatalf("row %d %s: %v %s (%v), want %s", i, path, kind, gotJSON, err, wantJSON)
				}
			}
			if s, ok := row.String(path); ok != (kind == ValueString || kind == ValueNumber || kind == ValueBool) {
				t.Fatalf("row %d %s: String ok=%v for %v", i, path, ok, kind)
			} else if rs, rok := rec.String(path); ok && (!rok || rs != s) && !dottedName(rec, path) {
				t.Fatalf("row %d %s: String %q, Record.String %q %v", i, path, s, rs, rok)
			}
		}
	}
}

// dottedName reports whether path is not a walk of rec's members: a member name holds a dot
// itself (Salesforce field names never do; Record.Get cannot reach them).
func dottedName(rec Record, path string) bool {
	_, ok := rec.Get(path)
	return !ok
}

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

var rowPages = []string{
	`{"totalSize":2,"done":true,"records":[` +
		`{"attributes":{"type":"LoginHistory","url":"/services/data/v62.0/sobjects/LoginHistory/0Ya1"},"Id":"0Ya1","LoginTime":"2026-06-30T01:00:00.000+0000","Status":"Success","LoginUrl":null,"CountryIso":"FR","Latitude":48.85,"Count__c":12899.0,"Big__c":123456789012345678,"Active":true,"Inactive":false},` +
		` {"attributes":{"type":"LoginHistory"},"Id":"0Ya2","LoginTime":"2026-06-30T01:00:01.000+0000","Status":"Failed: \"quoted\" \\ back\/slash \n\t\u00e9\u2028 \ud83d\ude00 lone \ud800 x \udc00","Browser":"Firefox été 😀"}]}`,
	`{"totalSize":3,"done":false,"nextRecordsUrl":"/services/data/v62.0/query/01g-2000","records":[` +
		`{"attributes":{"type":"SetupAuditTrail"},"Id":"0Ym1","CreatedBy":{"attributes":{"type":"User"},"Username":"a@example.com","Profile":{"attributes":{"type":"Profile"},"Name":"Admin"}},"Display":"x"},` +
		`{"attributes":{"type":"SetupAuditTrail"},"Id":"0Ym2","CreatedBy":null,"Display":""},` +
		`{"Id":"0Ym3","BillingAddress":{"city":"Paris","street":"1 <rue> & co","geocodeAccuracy":null,"latitude":48.8},"Tags":["a",1,{"b":null}],"Empty":{},"EmptyList":[]}]}`,
	"{ \"done\" : true , \"records\" : [ ] , \"extra\" : {\"a\":[1,2,{\"b\":\"c\"}]} }\n",
	`{"totalSize":1,"done":true,"records":[{"Id":"0Ya3","Name":"bad utf-8 ` + "\xff\xfe" + ` here","Key\u0041":"escaped key"}]}`,
	// Names are guessed by their place in the previous record and compared with the prefix of
	// the enclosing object and the key in place: the same key under other prefixes, at the
	// same place, escaped, and as an object of its own.
	`{"totalSize":6,"done":true,"records":[` +
		`{"Name":"a","Owner":{"Name":"o1","Id":"1"},"Other":{"Name":"x"}},` +
		`{"Owner":{"Name":"o2"},"Name":"b","Other":{"Id":"2","Name":"y"}},` +
		`{"Other":{"Name":"z"},"Owner":{"N\u0061me":"o3"},"N\u0061me":"c"},` +
		`{"Name":{"Name":"nested name"},"Owner":null,"Other":{"Other":{"Name":"deep"}}},` +
		`{"Nam":"short","Owner":{"Name2":"long"},"Othe":{"rName":"split"}},` +
		`{"Name":"longer than the guess","Owner":{"Name":"x"},"Other":{"rName":"y"}}]}`,
	// Names guessed by place are compared as sent only when they need no escape: names with a
	// quote, a backslash or a control character at the same place in consecutive records, keys
	// that look like attributes, and attributes written with an escape.
	`{"totalSize":3,"done":true,"records":[` +
		`{"attribute\u0073":{"type":"A"},"Q\"uote":"1","Back\\slash":"2","Tab\tKey":"3","attributesX":"4","Nested":{"attributes":5,"Q\"uote":"n1"}},` +
		`{"attributes":{"type":"A"},"Q\"uote":"5","Back\\slash":"6","Tab\tKey":"7","attributesX":"8","Nested":{"attribute\u0073":[1],"Q\"uote":"n2"}},` +
		`{"attributes":null,"Q\u0022uote":"9","Back\u005cslash":"10","Tab\u0009Key":"11","attributes\u0058":"12","Nested":{"Q\"uote":"n3"}}]}`,
}

// TestDecodeRowPageMatchesRecords: the map-free decoder yields, for every field path, the value
// the map-based decoding yields (strings unescaped as encoding/json does, numbers as sent,
// relationships flattened, compound values as their JSON).
func TestDecodeRowPageMatchesRecords(t *testing.T) {
	for i, s := range rowPages {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			b := []byte(s)
			rp, err := DecodeRowPage(b)
			if err != nil {
				t.Fatal(err)
			}
			sameAsRecord(t, b, rp)
		})
	}
}

// TestDecodeRowPageRefusesWhatIsNotAQueryResult: malformed JSON and results without done or
// records are errors, as they are for Query.
func TestDecodeRowPageRefusesWhatIsNotAQueryResult(t *testing.T) {
	for _, s := range []string{
		``, `[]`, `{"done":true}`, `{"records":[]}`, `{"done":true,"records":null}`,
		`{"done":false,"records":[]}`, `{"done":true,"records":[{"Id":"x"]}`, `{"done":true,"records":[{"Id":"x\q"}]}`,
		`{"done":true,"records":[{"Id":"x` + "\x01" + `"}]}`, `{"done":true,"records":[{"N":01}]}`, `{"done":true,"records":[{"N":1.}]}`,
		`{"done":true,"records":[{"N":-}]}`, `{"done":true,"records":[{"B":tru}]}`, `{"done":true,"records":[]} x`,
		`{"done":true,"records":[{"Id":"x"}],}`, `{"done":"yes","records":[]}`, `{"totalSize":1.5,"done":true,"records":[]}`,
		`{"done":true,"records":[` + strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100) + `]}`,
		// A name twice in one record, the second time where the previous record had another.
		`{"done":true,"records":[{"Name":"a","Id":"1"},{"Name":"a","N\u0061me":"b"}]}`,
		`{"done":true,"records":[{"Owner":{"Name":"a","Id":"1"}},{"Owner":{"Name":"a","Name":"b"}}]}`,
		// The name guessed by place needed an escape, and the next record has it unescaped.
		`{"done":true,"records":[{"Q\"uote":"1"},{"Q"uote":"2"}]}`,
		`{"done":true,"records":[{"Back\\slash":"1"},{"Back\slash":"2"}]}`,
		`{"done":true,"records":[{"Tab\tKey":"1"},{"Tab` + "\t" + `Key":"2"}]}`,
	} {
		if _, err := DecodeRowPage([]byte(s)); err == nil {
			t.Errorf("DecodeRowPage(%q) accepted it", s)
		}
	}
}

// FuzzDecodeRowPage: whatever DecodeRowPage accepts, encoding/json accepts too, with the same
// values.
func FuzzDecodeRowPage(f *testing.F) {
	for _, s := range rowPages {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rp, err := DecodeRowPage(bytes.Clone(b))
		if err != nil {
			return
		}
		sameAsRecord(t, b, rp)
	})
}

// TestRowPagesReuseOnlyReleasedMemory: a page read after another was released is read into the
// released page's memory; a page that was not released keeps its values whatever is read next.
func TestRowPagesReuseOnlyReleasedMemory(t *testing.T) {
	org := newTestOrg(t)
	org.handle("GET /services/data/v60.0/query", func(w http.ResponseWriter, r *http.Request) {
		queryPage(w, 3, "/services/data/v60.0/query/01g-2", map[string]any{"Id": "001000000000001AAA", "Name": strings.Repeat("a", 4000)})
	})
	org.handle("GET /services/data/v60.0/query/{loc}", func(w http.ResponseWriter, r *http.Request) {
		queryPage(w, 3, "", map[string]any{"Id": "001000000000002AAA", "Name": strings.Repeat("b", 4000)})
	})
	c := org.client(t)
	ctx := context.Background()
	p1, err := c.QueryRows(ctx, "SELECT Id, Name FROM Account")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.NextRowPage(ctx, p1) // p1 kept
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := p1.Rows[0].String("Name"); s != strings.Repeat("a", 4000) {
		t.Fatalf("an unreleased page changed when the next was read: %.20s…", s)
	}
	mem, fields, rows := unsafe.SliceData(p2.body), unsafe.SliceData(p2.mem.fields), unsafe.SliceData(p2.Rows)
	p2.Release()
	p3, err := c.NextRowPage(ctx, p1) // the same answer as p2's
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.SliceData(p3.body) != mem || unsafe.SliceData(p3.mem.fields) != fields || unsafe.SliceData(p3.Rows) != rows {
		t.Fatalf("the page read after a release did not reuse its memory")
	}
	if s, _ := p3.Rows[0].String("Name"); s != strings.Repeat("b", 4000) || len(p2.Rows) != 0 {
		t.Fatalf("page read over released memory: %.20s…, released rows %d", s, len(p2.Rows))
	}
	if s, _ := p1.Rows[0].String("Name"); s != strings.Repeat("a", 4000) {
		t.Fatalf("an unreleased page changed when later pages were read: %.20s…", s)
	}
}

// TestFieldIndexFindsWhatIndexFinds: a FieldIndex used over the rows of several pages, whose
// names differ and come in other orders, finds every path where Row.Index does, with any hint,
// and paths no row has nowhere.
func TestFieldIndexFindsWhatIndexFinds(t *testing.T) {
	var pages []*RowPage
	paths := map[string]bool{"NoSuchField": true, "Owner.NoSuch": true, "": true}
	for _, s := range rowPages {
		p, err := DecodeRowPage([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, p)
		for _, r := range p.Rows {
			for i := range r.Len() {
				paths[r.Name(i)] = true
			}
		}
	}
	list := slices.Sorted(maps.Keys(paths))
	x := NewFieldIndex(list)
	for round := range 2 { // the second round comes back to pages seen before
		for pi, p := range pages {
			for ri, r := range p.Rows {
				for k, path := range list {
					for _, hint := range []int{0, 1, 3, r.Len() - 1, r.Len() + 2, -1} {
						if got, want := x.Find(r, k, hint), r.Index(path, hint); got != want {
							t.Fatalf("round %d page %d row %d: Find(%q, hint %d) = %d, Index = %d", round, pi, ri, path, hint, got, want)
						}
					}
				}
			}
		}
	}
	if got := x.Find(Row{}, 0, 0); got != -1 {
		t.Fatalf("Find in an empty row = %d", got)
	}
}

// TestFieldIndexLocatesWhatIndexFinds: Locate, which remembers where each path was in the
// previous row, answers for every path what Row.Index does, over rows of several pages whose
// names differ and come in other orders, taken in order, backwards and interleaved, and -1 for
// every path of an empty row.
func TestFieldIndexLocatesWhatIndexFinds(t *testing.T) {
	var rows []Row
	paths := map[string]bool{"NoSuchField": true, "Owner.NoSuch": true, "": true}
	for _, s := range rowPages {
		p, err := DecodeRowPage([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, p.Rows...)
		for _, r := range p.Rows {
			for i := range r.Len() {
				paths[r.Name(i)] = true
			}
		}
	}
	list := slices.Sorted(maps.Keys(paths))
	orders := map[string][]int{"in order": nil, "backwards": nil, "interleaved": nil}
	for i := range rows {
		orders["in order"] = append(orders["in order"], i)
		orders["backwards"] = append(orders["backwards"], len(rows)-1-i)
		orders["interleaved"] = append(orders["interleaved"], i, len(rows)-1-i, i)
	}
	for name, order := range orders {
		x := NewFieldIndex(list)
		for _, ri := range order {
			r := rows[ri]
			at := x.Locate(r)
			for k, path := range list {
				if want := r.Index(path, 0); at[k] != want {
					t.Fatalf("%s: row %d: Locate(%q) = %d, Index = %d", name, ri, path, at[k], want)
				}
			}
			if ri%3 == 0 {
				for k, p := range x.Locate(Row{}) {
					if p != -1 {
						t.Fatalf("%s: Locate(%q) in an empty row = %d", name, list[k], p)
					}
				}
			}
		}
	}
}
