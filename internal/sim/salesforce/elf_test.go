package salesforce

import (
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func (e *env) download(id string, gz bool) (reply, []byte) {
	e.t.Helper()
	enc := "identity"
	if gz {
		enc = "gzip"
	}
	return e.get(ver+"/sobjects/EventLogFile/"+id+"/LogFile", "Accept-Encoding", enc)
}

func (e *env) elfRecord(id string) map[string]any {
	e.t.Helper()
	_, p, ec := e.query("SELECT Id, CreatedDate, LogFileLength, LogFileFieldNames, LogFileFieldTypes, Sequence, Interval, LogDate FROM EventLogFile WHERE Id = '" + id + "'")
	if ec != "" || len(p.Records) != 1 {
		e.t.Fatalf("listing %s: %s %d", id, ec, len(p.Records))
	}
	return p.Records[0]
}

var (
	tsRE  = regexp.MustCompile(`^\d{14}\.\d{3}$`)
	tsdRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)
)

func TestEventLogFileCSV(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	logDate := time.Date(2026, 6, 30, 9, 0, 0, 0, time.UTC)
	special := map[string]bool{}
	for _, et := range []string{"Login", "Logout", "API", "RestApi", "Report", "URI", "ApexExecution", "ApexUnexpectedException", "ApiTotalUsage", "LightningPageView"} {
		id := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: et, Interval: IntervalHourly, LogDate: logDate, Rows: 500}))
		rec := e.elfRecord(id)
		resp, body := e.download(id, false)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/csv" {
			t.Fatalf("%s: %d %s", et, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) || float64(len(body)) != rec["LogFileLength"].(float64) {
			t.Fatalf("%s: length %d, Content-Length %s, LogFileLength %v", et, len(body), cl, rec["LogFileLength"])
		}
		r := csv.NewReader(bytes.NewReader(body))
		rows, err := r.ReadAll()
		if err != nil {
			t.Fatalf("%s: CSV does not parse: %v", et, err)
		}
		header := rows[0]
		if strings.Join(header, ",") != rec["LogFileFieldNames"] || len(strings.Split(rec["LogFileFieldTypes"].(string), ",")) != len(header) {
			t.Fatalf("%s: header %v vs LogFileFieldNames %v", et, header, rec["LogFileFieldNames"])
		}
		if len(rows) != 501 {
			t.Fatalf("%s: %d rows", et, len(rows)-1)
		}
		col := map[string]int{}
		for i, h := range header {
			col[h] = i
		}
		reqIDs := map[string]bool{}
		prev := ""
		for _, row := range rows[1:] {
			if row[col["EVENT_TYPE"]] != et {
				t.Fatalf("%s: EVENT_TYPE %q", et, row[col["EVENT_TYPE"]])
			}
			ts, tsd := row[col["TIMESTAMP"]], row[col["TIMESTAMP_DERIVED"]]
			if !tsRE.MatchString(ts) || !tsdRE.MatchString(tsd) {
				t.Fatalf("%s: timestamps %q %q", et, ts, tsd)
			}
			pt := must[time.Time](t)(time.Parse("2006-01-02T15:04:05.000Z", tsd))
			if pt.Format("20060102150405.000") != ts || pt.Before(logDate) || !pt.Before(logDate.Add(time.Hour)) || tsd < prev {
				t.Fatalf("%s: TIMESTAMP %s / TIMESTAMP_DERIVED %s out of the bucket or order", et, ts, tsd)
			}
			prev = tsd
			if reqIDs[row[col["REQUEST_ID"]]] {
				t.Fatalf("%s: duplicate REQUEST_ID", et)
			}
			reqIDs[row[col["REQUEST_ID"]]] = true
			for _, v := range row {
				if strings.ContainsAny(v, "\n") {
					special["newline"] = true
				}
				if strings.Contains(v, `"`) {
					special["quote"] = true
				}
				if strings.Contains(v, ",") {
					special["comma"] = true
				}
			}
		}
		if !bytes.HasPrefix(body, []byte(`"EVENT_TYPE","TIMESTAMP"`)) {
			t.Errorf("%s: header not quoted: %.40s", et, body)
		}
	}
	if len(special) != 3 {
		t.Errorf("generated values lack embedded newlines/quotes/commas: %v", special)
	}
}

func TestEventLogFileGzipAndCRLF(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	id := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "API", Rows: 300, CRLF: true}))
	_, plain := e.download(id, false)
	resp, zipped := e.download(id, true)
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("no gzip: %v", resp.Header)
	}
	zr := must[*gzip.Reader](t)(gzip.NewReader(bytes.NewReader(zipped)))
	unz := must[[]byte](t)(io.ReadAll(zr))
	if !bytes.Equal(unz, plain) {
		t.Fatal("gzip body differs from the plain one")
	}
	e3 := newEnv(t, Options{GzipLevel: gzip.BestSpeed})
	e3.login()
	id3 := must[string](t)(e3.org.AddEventLogFile(EventLogFileSpec{EventType: "API", Rows: 300, CRLF: true}))
	_, plain3 := e3.download(id3, false)
	_, zipped3 := e3.download(id3, true)
	unz3 := must[[]byte](t)(io.ReadAll(must[*gzip.Reader](t)(gzip.NewReader(bytes.NewReader(zipped3)))))
	if !bytes.Equal(unz3, plain3) || len(zipped3) >= len(plain3)/2 {
		t.Fatalf("GzipLevel BestSpeed: equal=%v, %d compressed vs %d plain bytes", bytes.Equal(unz3, plain3), len(zipped3), len(plain3))
	}
	if !bytes.Contains(plain, []byte("\"\r\n\"")) {
		t.Error("CRLF line endings expected")
	}
	rows := must[[][]string](t)(csv.NewReader(bytes.NewReader(plain)).ReadAll())
	if len(rows) != 301 {
		t.Errorf("%d rows", len(rows))
	}
	e2 := newEnv(t, Options{DisableGzip: true})
	e2.login()
	id2 := must[string](t)(e2.org.AddEventLogFile(EventLogFileSpec{EventType: "API", Rows: 10}))
	if resp, _ := e2.download(id2, true); resp.Header.Get("Content-Encoding") != "" {
		t.Error("DisableGzip ignored")
	}
}

func fileBytes(t *testing.T, seed int64, spec EventLogFileSpec) (string, []byte) {
	t.Helper()
	org := New(Options{Seed: seed, Now: func() time.Time { return epoch }})
	id := must[string](t)(org.AddEventLogFile(spec))
	var b bytes.Buffer
	noErr(t, org.EventLogFileContent(id, &b))
	return id, b.Bytes()
}

func TestEventLogFileDeterministic(t *testing.T) {
	spec := EventLogFileSpec{EventType: "Report", Interval: IntervalHourly, Rows: 2000}
	id1, a := fileBytes(t, 7, spec)
	id2, b := fileBytes(t, 7, spec)
	_, c := fileBytes(t, 8, spec)
	if id1 != id2 || !bytes.Equal(a, b) {
		t.Fatal("same seed produced different files")
	}
	if bytes.Equal(a, c) {
		t.Fatal("different seeds produced the same file")
	}
	// Populate is deterministic too.
	dump := func(seed int64) string {
		e := newEnv(t, Options{Seed: seed})
		noErr(t, e.org.Populate(DataSet{RowsPerFile: 20}))
		e.login()
		recs, _ := e.drain("SELECT Id, EventType, CreatedDate, LogFileLength FROM EventLogFile ORDER BY Id")
		var sb strings.Builder
		for _, r := range recs {
			sb.WriteString(r["Id"].(string) + r["CreatedDate"].(string) + strconv.FormatFloat(r["LogFileLength"].(float64), 'f', 0, 64))
			_, body := e.download(r["Id"].(string), false)
			sb.Write(body)
		}
		for _, obj := range []string{"LoginHistory", "LoginEvent", "ApexLog"} {
			recs, _ := e.drain("SELECT FIELDS(STANDARD) FROM " + obj)
			for _, r := range recs {
				for _, k := range []string{"Id", "LoginTime", "EventDate", "EventIdentifier", "StartTime", "SourceIp", "LogLength"} {
					if v, ok := r[k]; ok {
						sb.WriteString(k + "=" + strings.TrimSpace(strings.ReplaceAll(toString(v), "\n", " ")) + ";")
					}
				}
			}
		}
		return sb.String()
	}
	if first, second := dump(3), dump(3); first != second {
		t.Fatal("Populate is not deterministic")
	}
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

func TestDailyRegeneration(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	id := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "Login", Interval: IntervalDaily, Rows: 100,
		LogDate: time.Date(2026, 6, 29, 0, 0, 0, 0, time.UTC), CreatedDate: epoch.Add(-8 * time.Hour)}))
	_, before := e.download(id, false)
	created := e.elfRecord(id)["CreatedDate"]
	noErr(t, e.org.RegenerateEventLogFile(id, epoch.Add(time.Hour), 150))
	if _, now := e.download(id, false); !bytes.Equal(now, before) || e.elfRecord(id)["CreatedDate"] != created {
		t.Fatal("a scheduled regeneration applied early")
	}
	e.clock.Advance(time.Hour)
	rec := e.elfRecord(id)
	_, after := e.download(id, false)
	if rec["CreatedDate"] != sfDateTime(epoch.Add(time.Hour)) || rec["LogFileLength"].(float64) != float64(len(after)) {
		t.Fatalf("regenerated record %v (body %d bytes)", rec, len(after))
	}
	if !bytes.HasPrefix(after, before) {
		t.Fatal("regenerated body is not a superset of the old one")
	}
	rows := must[[][]string](t)(csv.NewReader(bytes.NewReader(after)).ReadAll())
	if len(rows) != 151 {
		t.Fatalf("regenerated rows %d", len(rows)-1)
	}
}

func TestEventLogFileVisibilityAndReadiness(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	late := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "URI", Interval: IntervalHourly, Sequence: 2, VisibleAt: epoch.Add(10 * time.Minute)}))
	notReady := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "URI", Interval: IntervalHourly, ReadyAt: epoch.Add(time.Minute)}))
	partial := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "URI", Interval: IntervalHourly, Rows: 100, PartialUntil: epoch.Add(time.Minute)}))
	list := func() int {
		_, p, _ := e.query("SELECT Id FROM EventLogFile WHERE EventType = 'URI' AND Interval = 'Hourly'")
		return len(p.Records)
	}
	if n := list(); n != 2 {
		t.Fatalf("listed %d files before the late one appears", n)
	}
	if resp, _ := e.download(late, false); resp.StatusCode != http.StatusNotFound {
		t.Errorf("download of a not yet visible file: %d", resp.StatusCode)
	}
	if resp, _ := e.download(notReady, false); resp.StatusCode != http.StatusNotFound {
		t.Errorf("download before ReadyAt: %d", resp.StatusCode)
	}
	_, half := e.download(partial, false)
	var content bytes.Buffer
	if err := e.org.EventLogFileContent(partial, &content); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(half, content.Bytes()[:content.Len()/2]) {
		t.Errorf("partial body is %d bytes, want the first %d of %d", len(half), content.Len()/2, content.Len())
	}
	e.clock.Advance(10 * time.Minute)
	if n := list(); n != 3 {
		t.Fatalf("listed %d files after the late one appeared", n)
	}
	for _, id := range []string{late, notReady} {
		if resp, _ := e.download(id, false); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", id, resp.StatusCode)
		}
	}
	_, full := e.download(partial, false)
	if !bytes.HasPrefix(full, half) || len(full) <= len(half) {
		t.Error("full body does not extend the partial one")
	}
}

func TestLogFileLengthAboveAndBelowTheBody(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	for _, delta := range []int64{100, -100} {
		id := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "Login", Rows: 20, LengthDelta: delta}))
		_, body := e.download(id, false)
		if got := int64(e.elfRecord(id)["LogFileLength"].(float64)); got != int64(len(body))+delta {
			t.Errorf("delta %d: LogFileLength %d for a %d-byte body", delta, got, len(body))
		}
	}
}

func TestExplicitEventLogFileBody(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	body := "\"EVENT_TYPE\",\"TIMESTAMP_DERIVED\",\"QUERY\"\n\"API\",\"2026-06-30T01:00:00.000Z\",\"SELECT a,\n\"\"b\"\"\"\n"
	id := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "API", Body: []byte(body)}))
	_, got := e.download(id, false)
	rec := e.elfRecord(id)
	if string(got) != body || rec["LogFileFieldNames"] != "EVENT_TYPE,TIMESTAMP_DERIVED,QUERY" || rec["LogFileLength"].(float64) != float64(len(body)) {
		t.Fatalf("explicit body: %q %v", got, rec)
	}
}

func TestDownloadConnectionReset(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	id := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "API", Rows: 5000}))
	e.org.ResetDownloadsAfter(100000, 1)
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+ver+"/sobjects/EventLogFile/"+id+"/LogFile", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) || n != 100000 {
		t.Fatalf("read %d bytes, err %v; want 100000 and unexpected EOF", n, err)
	}
	if resp, _ := e.download(id, false); resp.StatusCode != http.StatusOK {
		t.Errorf("second download: %d", resp.StatusCode)
	}
}

// TestLargeDownloadFlatMemory streams a 200 MiB EventLogFile through HTTP
// and samples the heap while reading: the generator must not hold the file.
func TestLargeDownloadFlatMemory(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	const size = 200 << 20
	id := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "API", Interval: IntervalHourly, TargetBytes: size}))
	length := int64(e.elfRecord(id)["LogFileLength"].(float64))
	if length < size*95/100 || length > size*105/100 {
		t.Fatalf("LogFileLength %d, want about %d", length, size)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}
	}()
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+ver+"/sobjects/EventLogFile/"+id+"/LogFile", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	close(stop)
	wg.Wait()
	if err != nil || n != length {
		t.Fatalf("read %d of %d bytes: %v", n, length, err)
	}
	if peak.Load() == 0 {
		t.Fatal("no heap sample was taken while streaming")
	}
	grew := int64(peak.Load()) - int64(base)
	t.Logf("heap in use: base %d MiB, peak %d MiB while streaming %d MiB", base>>20, peak.Load()>>20, n>>20)
	if grew > 32<<20 {
		t.Fatalf("heap grew by %d MiB while streaming a %d MiB file", grew>>20, n>>20)
	}
}

func TestOversizedField(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	id := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "API", Rows: 11, OversizedField: 2 << 20}))
	resp, body := e.download(id, false)
	if resp.StatusCode != http.StatusOK || float64(len(body)) != e.elfRecord(id)["LogFileLength"].(float64) {
		t.Fatalf("%d, %d bytes vs LogFileLength %v", resp.StatusCode, len(body), e.elfRecord(id)["LogFileLength"])
	}
	rows := must[[][]string](t)(csv.NewReader(bytes.NewReader(body)).ReadAll())
	if len(rows) != 12 {
		t.Fatalf("%d rows", len(rows)-1)
	}
	longest := 0
	for _, v := range rows[6] {
		longest = max(longest, len(v))
	}
	if longest != 2<<20 || !strings.Contains(strings.Join(rows[6], ""), "with \"quotes\" and commas\nline") {
		t.Fatalf("longest field of the middle row: %d bytes", longest)
	}
}

// TestDocumentedEventLogFileShapes: generated files follow Salesforce's documented columns and
// value forms.
func TestDocumentedEventLogFileShapes(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	rowsOf := func(id string) []map[string]string {
		_, body := e.download(id, false)
		recs := must[[][]string](t)(csv.NewReader(bytes.NewReader(body)).ReadAll())
		var out []map[string]string
		for _, r := range recs[1:] {
			m := map[string]string{}
			for i, n := range recs[0] {
				m[n] = r[i]
			}
			out = append(out, m)
		}
		return out
	}
	typesOf := func(id string) map[string]string {
		rec := e.elfRecord(id)
		names, types := strings.Split(rec["LogFileFieldNames"].(string), ","), strings.Split(rec["LogFileFieldTypes"].(string), ",")
		m := map[string]string{}
		for i := range names {
			m[names[i]] = types[i]
		}
		return m
	}

	login := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "Login", Rows: 400}))
	lt := typesOf(login)
	for col, typ := range map[string]string{"LOGIN_TYPE": "String", "LOGIN_SUB_TYPE": "String", "CLIENT_IP": "String", "SOURCE_IP": "IP",
		"CPU_TIME": "Number", "RUN_TIME": "Number", "USER_ID": "Id", "TIMESTAMP_DERIVED": "DateTime"} {
		if lt[col] != typ {
			t.Errorf("Login %s typed %q, want %q", col, lt[col], typ)
		}
	}
	internal, subTypes := 0, map[string]bool{}
	for _, r := range rowsOf(login) {
		if len(r["LOGIN_TYPE"]) != 1 {
			t.Fatalf("LOGIN_TYPE %q is not a one-letter code", r["LOGIN_TYPE"])
		}
		if r["CLIENT_IP"] == "Salesforce.com IP" {
			internal++
		}
		subTypes[r["LOGIN_SUB_TYPE"]] = true
		if len(r["TIMESTAMP"]) != 18 {
			t.Fatalf("Login TIMESTAMP %q", r["TIMESTAMP"])
		}
	}
	if internal == 0 || !subTypes[""] || len(subTypes) < 3 {
		t.Errorf("Login rows: %d with CLIENT_IP Salesforce.com IP, sub-types %v", internal, subTypes)
	}

	callout := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "ApexCallout", Rows: 200}))
	if ct := typesOf(callout); ct["SUCCESS"] != "Boolean" || ct["STATUS_CODE"] != "Number" {
		t.Errorf("ApexCallout types %v", ct)
	}
	vals := map[string]bool{}
	for _, r := range rowsOf(callout) {
		vals[r["SUCCESS"]] = true
		if len(r["TIMESTAMP"]) != 14 {
			t.Fatalf("ApexCallout TIMESTAMP %q, want seconds only", r["TIMESTAMP"])
		}
	}
	if len(vals) != 2 || !vals["0"] || !vals["1"] {
		t.Errorf("ApexCallout SUCCESS values %v, want 0 and 1", vals)
	}

	// An explicit body is typed as documented, or as the spec says.
	body := "\"EVENT_TYPE\",\"SUCCESS\",\"CPU_TIME\",\"MY_COLUMN\"\n\"ApexCallout\",\"1\",\"12\",\"x\"\n"
	explicit := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "ApexCallout", Body: []byte(body)}))
	if got := e.elfRecord(explicit)["LogFileFieldTypes"]; got != "String,Boolean,Number,String" {
		t.Errorf("explicit body typed %v", got)
	}
	given := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: "ApexCallout", Body: []byte(body), FieldTypes: "String,String,String,String"}))
	if got := e.elfRecord(given)["LogFileFieldTypes"]; got != "String,String,String,String" {
		t.Errorf("explicit body with FieldTypes typed %v", got)
	}
}

// TestListedFieldsAsListed: for every simulated event type, ListedFields of a generated file's
// body is the LogFileFieldNames and LogFileFieldTypes its record lists (what a benchmark that
// reads the body without the record relies on).
func TestListedFieldsAsListed(t *testing.T) {
	e := newEnv(t, Options{})
	e.login()
	for _, et := range simulatedEventTypes {
		id := must[string](t)(e.org.AddEventLogFile(EventLogFileSpec{EventType: et, Interval: IntervalHourly, Rows: 3}))
		rec := e.elfRecord(id)
		_, body := e.download(id, false)
		names, types, err := ListedFields(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", et, err)
		}
		if names != rec["LogFileFieldNames"] || types != rec["LogFileFieldTypes"] {
			t.Errorf("%s: ListedFields %q / %q, the record lists %q / %q", et, names, types, rec["LogFileFieldNames"], rec["LogFileFieldTypes"])
		}
	}
}
