package config

import (
	"fmt"

	"github.com/sf2loki/sf2loki/shape"
	"github.com/sf2loki/sf2loki/source/apexlog"
)

// ApexLogSource configures the ApexLog source.
type ApexLogSource struct {
	Enabled             bool     `yaml:"enabled" desc:"Ship ApexLog debug logs (Tooling API), one entry per log: the body as the line, the log's fields as structured metadata."`
	Users               []string `yaml:"users" desc:"Only the logs of these usernames (LogUser.Username); empty: every user's."`
	Lookback            Duration `yaml:"lookback" default:"1h" desc:"How far back the source starts with no checkpoint (by StartTime)."`
	Start               Time     `yaml:"start" example:"2024-06-01T00:00:00Z" desc:"Instead of lookback: the RFC 3339 time (by StartTime) the source starts from with no checkpoint; ignored once it has one."`
	MaxBodyBytes        ByteSize `yaml:"max_body_bytes" default:"5MiB" desc:"Larger logs are not downloaded: their entry carries the metadata, body_skipped=true and body_skip_reason=size. At most 1GiB."`
	DownloadMaxAge      Duration `yaml:"download_max_age" default:"2h" desc:"A log whose body keeps failing to download holds the source back until this long after its transaction ended (StartTime + DurationMilliseconds, Salesforce's clock; the log is written then), then ships as metadata with body_skip_reason=download_failed."`
	PageSize            int      `yaml:"page_size" default:"200" min:"1" desc:"Logs listed per query (SOQL LIMIT, at most 2000); each log costs one more call for its body."`
	DownloadConcurrency int      `yaml:"download_concurrency" default:"8" min:"1" desc:"Bodies downloaded at once, ahead of the job and shipped in order (at most 16; 1 = one at a time)."`
	MaxRecordsPerRun    int      `yaml:"max_records_per_run" default:"0" min:"0" desc:"Logs one run ships (0 = only batch.max_records). Stopped there, the key leaves the run not caught_up: it is listed under waiting in the run report, and the next run goes on after the last log shipped."`
	Overlap             Duration `yaml:"overlap" default:"5m" desc:"Window (by StartTime) listed again every run for logs written after later-started ones were shipped (a log is written when its transaction ends), de-duplicated against remembered ids (0 = off)."`
	MaxOverlapIDs       int      `yaml:"max_overlap_ids" default:"500" min:"1" desc:"Log ids remembered in the overlap window (kept in the checkpoint, 8 bytes each); with more logs in the window it shrinks to the newest, with a warning."`
	LateProbe           bool     `yaml:"late_probe" default:"true" desc:"Each listing also fetches logs older than the overlap window with an Id above every Id read (written late); they are shipped, logged and counted as late_rows. Off: such logs are missed silently."`
}

// ApexLogOptions returns the source options the section maps to (Client, Shaper and labels are
// the caller's).
func (s ApexLogSource) ApexLogOptions() apexlog.Options {
	overlap := s.Overlap.D()
	if overlap == 0 {
		overlap = -1 // off; the option's zero value means the default
	}
	return apexlog.Options{
		Overlap: overlap, MaxOverlapIDs: s.MaxOverlapIDs, NoLateProbe: !s.LateProbe,
		Users: s.Users, Lookback: s.Lookback.D(), Start: s.Start.T(), MaxBodyBytes: s.MaxBodyBytes.Int(), DownloadMaxAge: s.DownloadMaxAge.D(),
		PageSize: s.PageSize, MaxRecordsPerRun: s.MaxRecordsPerRun, DownloadConcurrency: s.DownloadConcurrency,
	}
}

func validateApexLog(s ApexLogSource, path string, errs *Errors) {
	if !s.Enabled {
		return
	}
	for i, u := range s.Users {
		if !apexlog.ValidUsername(u) {
			errs.add(fmt.Sprintf("%s.users[%d]", path, i), "%q is not a username (letters, digits and . _ %% + - @)", u)
		}
	}
	if s.Lookback == 0 {
		errs.add(path+".lookback", "must be positive")
	}
	switch {
	case s.MaxBodyBytes == 0:
		errs.add(path+".max_body_bytes", "must be positive")
	case s.MaxBodyBytes > maxRecordBytes: // Salesforce truncates a debug log at about 20 MB
		errs.add(path+".max_body_bytes", "%s is too large; at most 1GiB", s.MaxBodyBytes)
	}
	if s.DownloadMaxAge == 0 {
		errs.add(path+".download_max_age", "must be positive")
	}
	if s.PageSize > apexlog.MaxPageSize {
		errs.add(path+".page_size", "%d is above %d", s.PageSize, apexlog.MaxPageSize)
	}
	if s.DownloadConcurrency > apexlog.MaxDownloadConcurrency {
		errs.add(path+".download_concurrency", "%d is above %d", s.DownloadConcurrency, apexlog.MaxDownloadConcurrency)
	}
}

// claims names the ApexLog category for the overlap guard.
func (s ApexLogSource) claims(path string) []shape.Claim {
	if !s.Enabled {
		return nil
	}
	return []shape.Claim{{Source: apexlog.Name, Name: "ApexLog", Path: path + ".enabled"}}
}
