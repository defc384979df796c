package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/human"
	"github.com/sf2loki/sf2loki/source/pubsub"
	"github.com/sf2loki/sf2loki/store"
)

// PubSubTopics are one org's Pub/Sub topics whose stored positions store.pubsub ages.
type PubSubTopics struct {
	// Org is the org's name in the multi-org form, whose keys are prefixed org=<Org>:; empty
	// for the single-org form.
	Org string
	// Legacy makes the org read an unprefixed key where it has no prefixed one, as a run does
	// for the first org of a multi-org configuration (job.MarkLegacyFallback).
	Legacy bool
	// Path is the configuration path of the section: sources.pubsub, orgs[1].sources.pubsub.
	Path string
	// Job is the job group whose document holds the positions (empty: no job groups); the
	// state commands of the fix lines name it with --job.
	Job string
	// Topics are the configured topics; pubsub.Wildcard stands for every topic of the org that
	// has a stored position (what the run's discovery found before).
	Topics []string
	// AgeWarning, ReplayLost and Start are the section's age_warning (zero: the source's
	// default, 48h), replay_lost (empty: fail) and start (empty: earliest).
	AgeWarning time.Duration
	ReplayLost string
	Start      string
}

func (p PubSubTopics) keyPrefix() string {
	if p.Org == "" {
		return ""
	}
	return "org=" + p.Org + ":"
}

// reads returns the topic of a stored key the org's run reads as one of its Pub/Sub positions
// (as job.Binding.Reads: the org's own keys, and with Legacy the unprefixed ones).
func (p PubSubTopics) reads(key string) (string, bool) {
	rest := key
	switch {
	case p.Org != "" && strings.HasPrefix(key, p.keyPrefix()):
		rest = strings.TrimPrefix(key, p.keyPrefix())
	case strings.HasPrefix(key, "org="), p.Org != "" && !p.Legacy:
		return "", false
	}
	topic, ok := strings.CutPrefix(rest, pubsub.KeyPrefix)
	return topic, ok && pubsub.ValidTopic(topic)
}

// position returns the key the org's run reads for topic and its value (nil when none): the
// org's own key, else, with Legacy, the unprefixed one.
func (p PubSubTopics) position(cps map[string]store.Checkpoint, topic string) (string, json.RawMessage) {
	key := p.keyPrefix() + pubsub.Key(topic)
	if cp, ok := cps[key]; ok {
		return key, cp.Value
	}
	if p.Legacy {
		if cp, ok := cps[pubsub.Key(topic)]; ok {
			return pubsub.Key(topic), cp.Value
		}
	}
	return key, nil
}

// topics returns the configured topics and, for the wildcard (wildcard true), the org's other
// stored topics, sorted.
func (p PubSubTopics) topics(cps map[string]store.Checkpoint) (listed, found []string, wildcard bool) {
	for _, t := range p.Topics {
		if t == pubsub.Wildcard {
			wildcard = true
		} else if !slices.Contains(listed, t) {
			listed = append(listed, t)
		}
	}
	if wildcard {
		for k := range cps {
			if t, ok := p.reads(k); ok && !slices.Contains(listed, t) && !slices.Contains(found, t) {
				found = append(found, t)
			}
		}
		slices.Sort(found)
	}
	return listed, found, wildcard
}

func (p PubSubTopics) setting(name string) string { return p.Path + "." + name }

// stateDelete is the command that deletes key from the document holding p's positions.
func (p PubSubTopics) stateDelete(key string) string {
	if p.Job != "" {
		return fmt.Sprintf("`sf2loki state delete --job %s %s`", p.Job, key)
	}
	return fmt.Sprintf("`sf2loki state delete %s`", key)
}

func (p PubSubTopics) start() string {
	if p.Start == "" {
		return "earliest"
	}
	return p.Start
}

// topicAge is the verdict on one topic's stored position.
type topicAge struct {
	status  Status // INFO: no position (the check passes); PASS: young or of unknown age; WARN or FAIL: a finding
	line    string // the detail line
	finding string // the message of a WARN or FAIL
	fix     string // of a WARN or FAIL
}

// lost says what a run does with a position past the retention, by replay_lost.
func (p PubSubTopics) lost() (Status, string) {
	switch p.ReplayLost {
	case string(pubsub.ReplayLostEarliest):
		return StatusWarn, fmt.Sprintf("resumes it from the oldest event Salesforce retains (%s: earliest): the events published in between may have been missed", p.setting("replay_lost"))
	case string(pubsub.ReplayLostLatest):
		return StatusWarn, fmt.Sprintf("resumes it from now (%s: latest): every event published since the stored position may have been missed", p.setting("replay_lost"))
	}
	return StatusFail, fmt.Sprintf("stops with exit 7 (%s: fail), committing nothing for the topic until a human decides how to resume it", p.setting("replay_lost"))
}

// grade ages the stored value raw of topic (key) by the source's own rule (pubsub.PositionAge).
func (p PubSubTopics) grade(topic, key string, raw json.RawMessage, now time.Time) topicAge {
	name := fmt.Sprintf("%s (key %s)", topic, key)
	if p.Org != "" {
		name = fmt.Sprintf("%s (org %s, key %s)", topic, p.Org, key)
	}
	startsAt := fmt.Sprintf("the next run starts it at its start (%s)", p.start())
	age, kind, ok, err := pubsub.PositionAge(raw, now)
	switch {
	case err != nil:
		return topicAge{status: StatusWarn,
			line: fmt.Sprintf("%s: unusable stored position: %v", name, err),
			finding: fmt.Sprintf("%s: the stored value is not a position the source can read (%v): %s, logging a warning and counting cursor_reset; %s",
				name, err, startsAt, "events between the lost position and that start may be missed or shipped again"),
			fix: fmt.Sprintf("restore %s from a backup to resume %s where it was, or %s to accept the restart at its start", key, topic, p.stateDelete(key))}
	case !ok:
		return topicAge{status: StatusInfo, line: fmt.Sprintf("%s: no position stored: %s", name, startsAt)}
	case age < 0:
		return topicAge{status: StatusPass, line: fmt.Sprintf("%s: replay id of unknown age (no advanced_at: a value written by the Python original); a run refreshes it with a keepalive's newer id unless %s is 0", name, p.setting("refresh_after"))}
	}
	position := fmt.Sprintf("replay id, not advanced for %s", human.Round(age))
	what := fmt.Sprintf("the stored replay id has not advanced for %s", human.Round(age))
	if kind == "latest_at" {
		position = fmt.Sprintf("latest_at, last found quiet at %s, %s ago", now.Add(-age).UTC().Format(time.RFC3339), human.Round(age))
		what = "the stored position is " + position
	}
	warnAt := p.AgeWarning
	if warnAt <= 0 {
		warnAt = pubsub.DefaultAgeWarning
	}
	line := name + ": " + position
	status, then := p.lost()
	switch {
	case age > pubsub.Lifetime:
		return topicAge{status: status, line: line,
			finding: fmt.Sprintf("%s: %s, past Salesforce's ~72h retention, so the position is lost: the next run %s", name, what, then),
			fix:     p.lostFix(topic, key, status)}
	case age >= warnAt:
		return topicAge{status: StatusWarn, line: line,
			finding: fmt.Sprintf("%s: %s, past %s (%s); Salesforce keeps about 72h, so the position is lost in %s, and a run after that %s",
				name, what, p.setting("age_warning"), warnAt, human.Round(pubsub.Lifetime-age), then),
			fix: fmt.Sprintf("run the job before %s's position is 72h old: a run moves a quiet topic's position forward (a replay id by %s, which needs run.max_duration above ~5m to see a keepalive; a latest_at by a pull that meets nothing); if it cannot run in time, choose what a run does with the lost position (%s: fail, earliest or latest)",
				topic, p.setting("refresh_after"), p.setting("replay_lost"))}
	}
	return topicAge{status: StatusPass, line: line}
}

// lostFix is the fix for a position past the retention.
func (p PubSubTopics) lostFix(topic, key string, status Status) string {
	if status == StatusFail {
		return fmt.Sprintf("decide how to resume %s: set %s to earliest (the oldest retained event; duplicates) or latest (from now) for the next run and back to fail after it, or %s to start it at its start (%s); the events between the stored position and the oldest retained one are lost either way",
			topic, p.setting("replay_lost"), p.stateDelete(key), p.start())
	}
	return fmt.Sprintf("nothing stops the next run; the events it may miss on %s may still be in EventLogFile or the stored event objects (LoginEvent, ApiEvent, ...), which a backfill or a soql source can ship", topic)
}

// checkPubSub ages the stored position of every configured Pub/Sub topic: the age_warning
// note and the replay_lost refusal of the next run, told before it.
func (s Store) checkPubSub(ctx context.Context) Result {
	obj := s.Store.Object()
	snap, err := s.Store.Read(ctx)
	if err != nil {
		return storeFailure(obj, err)
	}
	var cps map[string]store.Checkpoint
	if !snap.Absent {
		cps = snap.Doc.Checkpoints
	}
	now := s.now()
	var ages []topicAge
	var details, starts []string
	for _, p := range s.PubSub {
		listed, found, wildcard := p.topics(cps)
		for _, t := range append(listed, found...) {
			key, raw := p.position(cps, t)
			a := p.grade(t, key, raw, now)
			ages = append(ages, a)
			details = append(details, a.line)
		}
		if wildcard && len(found) == 0 {
			details = append(details, fmt.Sprintf("* (%s.topics): no other topic of the org has a stored position: each topic it discovers starts at its start (%s)", p.Path, p.start()))
		}
		if start := p.setting("start") + ": " + p.start(); !slices.Contains(starts, start) {
			starts = append(starts, start)
		}
	}
	worst, stored := StatusInfo, 0
	for _, a := range ages {
		if a.status != StatusInfo {
			stored++
		}
		if rank(a.status) > rank(worst) {
			worst = a.status
		}
	}
	switch worst {
	case StatusInfo: // a first run, or an EARLIEST pull cut short before it stored anything: not a problem
		return Pass("no Pub/Sub topic has a stored position yet: the next run starts each at its start (%s)", strings.Join(starts, ", ")).With(details...)
	case StatusPass:
		return Pass("%d of %d Pub/Sub topics have a stored position, none older than its age_warning (Salesforce keeps about 72h)", stored, len(ages)).With(details...)
	}
	var findings, fixes []string
	for _, st := range []Status{StatusFail, StatusWarn} {
		for _, a := range ages {
			if a.status == st {
				findings = append(findings, a.finding)
				if !slices.Contains(fixes, a.fix) {
					fixes = append(fixes, a.fix)
				}
			}
		}
	}
	r := Warn(strings.Join(fixes, "; "), "%s", strings.Join(findings, "; "))
	if worst == StatusFail {
		r = Fail(strings.Join(fixes, "; "), "%s", strings.Join(findings, "; "))
	}
	return r.With(details...)
}

// rank orders the statuses of store.pubsub's topics from harmless to worst.
func rank(s Status) int {
	return slices.Index([]Status{StatusInfo, StatusPass, StatusWarn, StatusFail}, s)
}
