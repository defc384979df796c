package eventlogfile

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/salesforce"
)

// TestHTMLDownloadIsAFailedDownload: a download answered 200 with an HTML page (a proxy's or a
// maintenance page) is not the file's CSV. Read as one, a one-line page is a header without rows
// (the file would be finished as empty), a longer one a header and rows (shipped as events). It
// is a failed download instead (the client's retries answered so too): nothing is shipped, the
// type stops at the file for the run with an error that says an HTML page came, and the next
// run downloads the file again and ships it whole.
func TestHTMLDownloadIsAFailedDownload(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault simsf.Fault
	}{
		{"a maintenance page", simsf.Fault{Kind: simsf.KindDownload, Times: -1, HTMLBody: true}},
		{"a page of many lines", simsf.Fault{Kind: simsf.KindDownload, Times: -1, Status: http.StatusOK,
			Body: "<!DOCTYPE html>\n<html>\n<head><title>Proxy</title></head>\n<body>\n<p>Sign in to continue</p>\n</body>\n</html>\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, simsf.Options{})
			e.addFile(simsf.EventLogFileSpec{Rows: 50, CreatedDate: epoch.Add(-2 * time.Hour)})
			e.org.AddFault(c.fault)
			src := e.source(Options{})
			cursors := map[string]json.RawMessage{}
			res := e.run(src, cursors, 1000, nil)
			err := res.errs[Key("Login")]
			if res.entries != 0 || len(res.skips) != 0 || !errors.Is(err, salesforce.ErrBadResponse) || !strings.Contains(err.Error(), "HTML page") {
				t.Fatalf("HTML answer: %d entries, skips %v, error %v; want nothing shipped or skipped, and an error naming the HTML page",
					res.entries, res.skips, err)
			}
			if raw, ok := cursors[Key("Login")]; ok || res.counts["file_failed"] != 1 {
				t.Fatalf("HTML answer: cursor %s, counts %v; want no cursor and file_failed", raw, res.counts)
			}
			e.org.ClearFaults()
			res = e.run(src, cursors, 1000, nil)
			if res.entries != 50 || len(res.errs) > 0 {
				t.Fatalf("next run: %d entries, errors %v; want the file's 50 rows", res.entries, res.errs)
			}
		})
	}
}
