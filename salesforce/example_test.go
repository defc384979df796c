package salesforce_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/sftest"
	simsf "github.com/sf2loki/sf2loki/internal/sim/salesforce"
	"github.com/sf2loki/sf2loki/salesforce"
)

// Example shows the calls a source makes: describe once, query with an
// explicit field list (2000-row pages), build SOQL only with the helpers,
// tell a throttled org from other failures, and download an EventLogFile
// as a stream.
func Example() {
	org := simsf.New(simsf.Options{Seed: 1, Logger: slog.New(slog.DiscardHandler)})
	org.AddUser(sftest.User, simsf.AllPermissions())
	_ = org.AddJWTApp(sftest.ClientID, sftest.Key().Certificate, sftest.User)
	uid, _ := org.UserID(sftest.User)
	since := time.Now().Add(-time.Hour).UTC()
	for i := range 3 {
		_, _ = org.Insert("LoginHistory", simsf.Record{"UserId": uid, "LoginTime": since.Add(time.Duration(i) * time.Minute), "Status": "Success"})
	}
	fileID, _ := org.AddEventLogFile(simsf.EventLogFileSpec{EventType: "Login", Rows: 10})
	srv, _ := org.Start()
	defer func() { _ = srv.Close() }()

	c, err := salesforce.New(salesforce.Options{
		LoginURL:      srv.URL, // the org's My Domain in production
		ClientID:      sftest.ClientID,
		Username:      sftest.User,
		PrivateKeyPEM: sftest.Key().KeyPEM,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	d, err := c.Describe(ctx, "LoginHistory")
	if err != nil {
		fmt.Println(err)
		return
	}
	soql := "SELECT " + strings.Join(d.SelectableFields(), ",") + " FROM LoginHistory" +
		" WHERE LoginTime >= " + salesforce.FormatDateTime(since) +
		" ORDER BY LoginTime ASC, Id ASC"
	n := 0
	for r, err := range c.Records(ctx, soql) {
		if errors.Is(err, salesforce.ErrRequestLimit) {
			fmt.Println("org out of API calls: stop the run")
			return
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		if _, ok := r.Time("LoginTime"); ok {
			n++
		}
	}
	fmt.Println("rows:", n)

	blob, err := c.DownloadEventLogFile(ctx, fileID)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = blob.Close() }()
	body, _ := io.ReadAll(blob) // a real source streams this into a CSV reader
	fmt.Println("csv lines:", strings.Count(string(body), "\n"))

	st := c.Stats()
	fmt.Println("calls:", st.Calls[salesforce.KindDescribe], "describe,", st.Calls[salesforce.KindQuery], "query,",
		st.Calls[salesforce.KindEventLogFile], "download")
	// Output:
	// rows: 3
	// csv lines: 11
	// calls: 1 describe, 1 query, 1 download
}
