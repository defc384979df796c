package salesforce

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DataSet sizes the deterministic data Populate generates. Zero fields take
// their default; a negative count means none.
type DataSet struct {
	// Window is how far back from now generated timestamps reach (default 24h).
	Window time.Duration
	// EventTypes are the EventLogFile types generated (default: Login,
	// Logout, API, RestApi, Report, URI, ApexExecution, ApexCallout,
	// ApexUnexpectedException, ApiTotalUsage).
	EventTypes []string
	// HourlyFiles is the number of past hours with an Hourly file per type
	// (default 6); DailyFiles the number of past days with a Daily file per
	// type (default 2).
	HourlyFiles int
	DailyFiles  int
	// RowsPerFile is the row count of each generated file (default 200);
	// BytesPerFile, when set, sizes each file by bytes instead (e.g. 1 GiB:
	// bodies are generated while streaming, never held in memory).
	RowsPerFile  int
	BytesPerFile int64
	// Record counts (defaults: 500, 100, 300, 500, 500, 20, 50).
	LoginHistory         int
	SetupAuditTrail      int
	AuditEvents          int
	LoginEvents          int
	ApiEvents            int
	ApiAnomalyEventStore int
	ApexLogs             int
	// TieGroup rows of Audit_Event__c (CreatedDate) and LoginEvent
	// (EventDate) share one timestamp (default 250: more than one 200-row
	// page); ApexLogTieGroup ApexLogs share one StartTime (default 10).
	TieGroup        int
	ApexLogTieGroup int
	// LateRows rows per object are timestamped just before now but become
	// visible only LateDelay later (defaults 5 and 10m).
	LateRows  int
	LateDelay time.Duration
}

func (d DataSet) withDefaults() DataSet {
	n := func(v *int, def int) {
		if *v == 0 {
			*v = def
		} else if *v < 0 {
			*v = 0
		}
	}
	if d.Window <= 0 {
		d.Window = 24 * time.Hour
	}
	if d.EventTypes == nil {
		d.EventTypes = slices.Clone(simulatedEventTypes)
	}
	n(&d.HourlyFiles, 6)
	n(&d.DailyFiles, 2)
	n(&d.RowsPerFile, 200)
	n(&d.LoginHistory, 500)
	n(&d.SetupAuditTrail, 100)
	n(&d.AuditEvents, 300)
	n(&d.LoginEvents, 500)
	n(&d.ApiEvents, 500)
	n(&d.ApiAnomalyEventStore, 20)
	n(&d.ApexLogs, 50)
	n(&d.TieGroup, 250)
	n(&d.ApexLogTieGroup, 10)
	n(&d.LateRows, 5)
	if d.LateDelay <= 0 {
		d.LateDelay = 10 * time.Minute
	}
	return d
}

// Populate generates a realistic, deterministic data set anchored to the
// org's current time: the synthetic users, EventLogFiles (Hourly and Daily,
// some appearing later, one Daily file regenerated in place an hour from
// now), LoginHistory, SetupAuditTrail, Audit_Event__c, the LoginEvent /
// ApiEvent Big Objects, ApiAnomalyEventStore, ApexLogs with bodies and an
// active TraceFlag. Same seed and clock give the same data.
func (o *Org) Populate(ds DataSet) error {
	ds = ds.withDefaults()
	now := o.now().UTC().Truncate(time.Millisecond)
	seed := uint64(o.opts.Seed)
	users := syntheticUsers()
	for _, u := range users {
		o.mu.RLock()
		exists := o.byID[to15(u.id)] != nil
		o.mu.RUnlock()
		if exists {
			continue
		}
		local, _, _ := strings.Cut(u.username, "@")
		if _, err := o.Insert("User", Record{"Id": u.id, "Username": u.username, "Name": local, "LastName": local,
			"Email": u.username, "IsActive": true, "UserType": "Standard", "TimeZoneSidKey": "GMT",
			"CreatedDate": now.Add(-90 * 24 * time.Hour)}); err != nil {
			return err
		}
	}
	if err := o.populateELF(ds, now, seed); err != nil {
		return err
	}
	type gen struct {
		object string
		count  int
		tsKey  string
		tie    bool
		row    func(r *rng, u synthUser, ts time.Time) Record
	}
	gens := []gen{
		{"LoginHistory", ds.LoginHistory, "LoginTime", false, loginHistoryRow},
		{"SetupAuditTrail", ds.SetupAuditTrail, "CreatedDate", false, setupAuditRow},
		{"Audit_Event__c", ds.AuditEvents, "CreatedDate", true, auditEventRow},
		{"LoginEvent", ds.LoginEvents, "EventDate", true, loginEventRow},
		{"ApiEvent", ds.ApiEvents, "EventDate", false, apiEventRow},
		{"ApiAnomalyEventStore", ds.ApiAnomalyEventStore, "EventDate", false, anomalyRow},
	}
	for _, g := range gens {
		if g.count == 0 {
			continue
		}
		r := newRNG(seed ^ hashString(g.object))
		stamps := make([]time.Time, g.count)
		for i := range stamps {
			stamps[i] = now.Add(-time.Duration(r.next()%uint64(ds.Window.Milliseconds())) * time.Millisecond)
		}
		if g.tie && ds.TieGroup > 0 {
			tie := now.Add(-ds.Window / 3).Truncate(time.Second)
			for i := 0; i < ds.TieGroup && i < len(stamps); i++ {
				stamps[i] = tie
			}
		}
		sort.Slice(stamps, func(i, j int) bool { return stamps[i].Before(stamps[j]) })
		recs := make([]Record, 0, g.count+ds.LateRows)
		for _, ts := range stamps {
			rec := g.row(r, pick(r, users), ts)
			rec[g.tsKey] = ts
			recs = append(recs, rec)
		}
		if _, err := o.Insert(g.object, recs...); err != nil {
			return fmt.Errorf("populate %s: %w", g.object, err)
		}
		// Late rows: timestamped before now, visible only LateDelay later.
		for i := 0; i < ds.LateRows; i++ {
			ts := now.Add(-time.Duration(1+r.intn(300)) * time.Second)
			rec := g.row(r, pick(r, users), ts)
			rec[g.tsKey] = ts
			ids, err := o.Insert(g.object, rec)
			if err != nil {
				return err
			}
			if err := o.SetVisibleAfter(ids[0], now.Add(ds.LateDelay)); err != nil {
				return err
			}
		}
	}
	if err := o.populateApex(ds, now, seed, users); err != nil {
		return err
	}
	return nil
}

func (o *Org) populateELF(ds DataSet, now time.Time, seed uint64) error {
	for ti, et := range ds.EventTypes {
		r := newRNG(seed ^ hashString("elf:"+et))
		for h := ds.HourlyFiles; h >= 1; h-- {
			logDate := now.Truncate(time.Hour).Add(-time.Duration(h) * time.Hour)
			created := logDate.Add(time.Hour + time.Duration(5+r.intn(40))*time.Minute)
			spec := EventLogFileSpec{EventType: et, Interval: IntervalHourly, LogDate: logDate, CreatedDate: created,
				Sequence: 1, Rows: ds.RowsPerFile, TargetBytes: ds.BytesPerFile}
			if created.After(now) {
				spec.VisibleAt = created
			}
			if _, err := o.AddEventLogFile(spec); err != nil {
				return err
			}
			// A late sibling for the oldest hour of the first type.
			if ti == 0 && h == ds.HourlyFiles {
				spec.Sequence, spec.Rows, spec.TargetBytes = 2, max(1, ds.RowsPerFile/10), ds.BytesPerFile/10
				spec.CreatedDate = now.Add(30 * time.Minute)
				spec.VisibleAt = spec.CreatedDate
				if _, err := o.AddEventLogFile(spec); err != nil {
					return err
				}
			}
		}
		for d := ds.DailyFiles; d >= 1; d-- {
			logDate := now.Truncate(24 * time.Hour).Add(-time.Duration(d) * 24 * time.Hour)
			created := logDate.Add(24*time.Hour + 2*time.Hour + time.Duration(r.intn(60))*time.Minute)
			spec := EventLogFileSpec{EventType: et, Interval: IntervalDaily, LogDate: logDate, CreatedDate: created,
				Rows: ds.RowsPerFile, TargetBytes: ds.BytesPerFile}
			if created.After(now) {
				spec.VisibleAt = created
			}
			id, err := o.AddEventLogFile(spec)
			if err != nil {
				return err
			}
			if ti == 0 && d == ds.DailyFiles {
				if err := o.RegenerateEventLogFile(id, now.Add(time.Hour), ds.RowsPerFile+ds.RowsPerFile/4); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (o *Org) populateApex(ds DataSet, now time.Time, seed uint64, users []synthUser) error {
	if ds.ApexLogs > 0 {
		r := newRNG(seed ^ hashString("ApexLog"))
		stamps := make([]time.Time, ds.ApexLogs)
		for i := range stamps {
			stamps[i] = now.Add(-time.Duration(r.next()%uint64(ds.Window.Milliseconds())) * time.Millisecond)
		}
		tie := now.Add(-ds.Window / 4).Truncate(time.Second)
		for i := 0; i < len(stamps) && i < ds.ApexLogTieGroup; i++ {
			stamps[i] = tie
		}
		sort.Slice(stamps, func(i, j int) bool { return stamps[i].Before(stamps[j]) })
		for i, ts := range stamps {
			size := 512 + r.intn(8192)
			if i == len(stamps)/2 {
				size = 6 << 20 // larger than the usual 5 MiB body cap
			}
			if _, err := o.AddApexLog(ApexLogSpec{LogUser: pick(r, users).id, StartTime: ts,
				Operation: pick(r, []string{"/apex/AccountPage", "/services/data/v62.0/sobjects/Account", "Batch Apex", "AccountTrigger on Account trigger event BeforeUpdate"}),
				Request:   pick(r, []string{"API", "Application"}), Status: pick(r, []string{"Success", "Success", "Attempt to de-reference a null object"}),
				Location: pick(r, []string{"Monitoring", "SystemLog"}), DurationMilliseconds: 1 + r.intn(5000), BodyBytes: size}); err != nil {
				return err
			}
		}
	}
	_, err := o.Insert("TraceFlag", Record{"TracedEntityId": users[len(users)-1].id, "LogType": "USER_DEBUG",
		"StartDate": now.Add(-time.Hour), "ExpirationDate": now.Add(12 * time.Hour), "CreatedDate": now.Add(-time.Hour)})
	return err
}

func ip(r *rng) string {
	return strconv.Itoa(10+r.intn(200)) + "." + strconv.Itoa(r.intn(256)) + "." + strconv.Itoa(r.intn(256)) + "." + strconv.Itoa(1+r.intn(254))
}

func key16(r *rng) string {
	b := make([]byte, 16)
	for i := range b {
		b[i] = base62[r.intn(62)]
	}
	return string(b)
}

func loginHistoryRow(r *rng, u synthUser, _ time.Time) Record {
	return Record{
		"UserId": u.id, "LoginType": pick(r, []string{"Application", "Remote Access 2.0", "SAML Sfdc Initiated SSO", "Other Apex API"}),
		"SourceIp": ip(r), "LoginUrl": "acme.my.salesforce.com", "Browser": pick(r, []string{"Chrome 124", "Safari 17", "Unknown"}),
		"Platform": pick(r, []string{"Mac OSX", "Windows 10", "Unknown"}), "Status": pick(r, []string{"Success", "Success", "Success", "Invalid Password"}),
		"Application": pick(r, []string{"Browser", "sf2loki", "Salesforce for iOS"}), "ClientVersion": "N/A",
		"ApiType": pick(r, []string{"N/A", "REST API"}), "ApiVersion": pick(r, []string{"N/A", "62.0"}),
		"CountryIso": pick(r, []string{"US", "DE", "FR", "GB"}), "TlsProtocol": "TLS 1.3", "CipherSuite": "TLS_AES_256_GCM_SHA384",
	}
}

func setupAuditRow(r *rng, u synthUser, _ time.Time) Record {
	acts := [][3]string{
		{"changedPassword", "Manage Users", "Changed password for user %s"},
		{"PermSetAssign", "Manage Users", "Permission set \"Event Monitoring, Read\" assigned to %s"},
		{"loginAsGrantedToSfdc", "Manage Users", "Granted login access, duration 7 days, to %s"},
		{"changedSessionTimeout", "Session Settings", "Changed session timeout from 2 hours to 15 minutes (%s)"},
	}
	a := pick(r, acts)
	return Record{"Action": a[0], "Section": a[1], "Display": fmt.Sprintf(a[2], u.username), "CreatedById": u.id,
		"DelegateUser": "", "CreatedByContext": pick(r, []string{"", "Apex"}), "CreatedByIssuer": ""}
}

func auditEventRow(r *rng, u synthUser, ts time.Time) Record {
	return Record{
		"Event_Time__c": ts, "Action__c": pick(r, []string{"Create", "Update", "Delete", "Export"}), "Actor__c": u.username,
		"Details__c":  pick(r, []string{"exported 1,204 rows\nfrom report \"Pipeline\"", "updated Account 0015g00000AbCdE", ""}),
		"Severity__c": float64(r.intn(10)), "Success__c": r.intn(5) != 0, "Source_Ip__c": ip(r), "OwnerId": u.id, "CreatedById": u.id,
	}
}

func loginEventRow(r *rng, u synthUser, _ time.Time) Record {
	return Record{
		"UserId": u.id, "Username": u.username, "LoginType": pick(r, []string{"Application", "Remote Access 2.0"}), "SourceIp": ip(r),
		"Status": pick(r, []string{"Success", "Success", "Invalid Password"}), "Browser": "Chrome 124", "Platform": "Mac OSX",
		"Application": "Browser", "LoginUrl": "acme.my.salesforce.com", "CountryIso": "US", "Country": "United States",
		"City": pick(r, []string{"San Francisco", "New York", "Austin"}), "SessionKey": key16(r), "LoginKey": key16(r),
		"TlsProtocol": "TLS 1.3", "CipherSuite": "TLS_AES_256_GCM_SHA384", "AdditionalInfo": `{"via":"sso","note":"a, \"b\""}`,
		"EvaluationTime": float64(r.intn(100)) / 10, "PolicyOutcome": "NoAction", "SessionLevel": "STANDARD",
	}
}

func apiEventRow(r *rng, u synthUser, _ time.Time) Record {
	ent := pick(r, entities)
	return Record{
		"UserId": u.id, "Username": u.username, "SourceIp": ip(r), "Operation": pick(r, []string{"Query", "QueryMore", "Describe"}),
		"QueriedEntities": ent, "Query": "SELECT Id, Name\nFROM " + ent + " LIMIT 10", "RowsProcessed": float64(r.intn(2000)),
		"Records": `{"totalSize":1,"done":true}`, "Application": "sf2loki", "Client": "sf2loki/1.0", "ApiType": "REST",
		"ApiVersion": 62.0, "ElapsedTime": int64(r.intn(900)), "SessionKey": key16(r), "LoginKey": key16(r),
		"UserAgent": pick(r, userAgents), "PolicyOutcome": "NoAction",
	}
}

func anomalyRow(r *rng, u synthUser, ts time.Time) Record {
	return Record{"UserId": u.id, "Username": u.username, "Score": float64(r.intn(100)) / 100, "SourceIp": ip(r),
		"Operation": "dataExport", "QueriedEntities": "Account", "RowsProcessed": float64(r.intn(100000)),
		"Summary": "Unusual volume of rows, \"Account\" exported\ncompared to the 30-day baseline", "CreatedDate": ts}
}
