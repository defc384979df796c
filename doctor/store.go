package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/aws/smithy-go"

	"github.com/sf2loki/sf2loki/internal/human"
	"github.com/sf2loki/sf2loki/store"
)

// Store is the checkpoint store to check.
type Store struct {
	// Store reads the real document. When nil, StoreErr says why it could not be built.
	Store    *store.Store
	StoreErr error
	// Type is the state.store value (file, s3, gcs, configmap).
	Type string
	// Probe is a separate probe object of the same backend (never the real document) for the
	// conditional-write probe. When nil, ProbeErr says why it could not be built, or, when both
	// are nil, ProbeNote says why the backend needs no probe (the check passes with it).
	Probe     store.Backend
	ProbeErr  error
	ProbeNote string
	// FilePath is the document's path for the file backend (permissions, lock file, network
	// filesystem; the probe does not run while its directory is missing).
	FilePath string
	// Kube is the ConfigMap of the configmap backend (permissions by dry run).
	Kube *KubeObject
	// Now is the wall clock for ages. Default time.Now.
	Now func() time.Time
	// PubSub are the Pub/Sub topics whose stored positions store.pubsub ages, one entry per
	// org with the source enabled; with none, there is no such check.
	PubSub []PubSubTopics
}

func (s Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// StoreChecks returns the checks of the checkpoint store: a read of the real document, the
// backend's own permission checks, the age of every stored Pub/Sub position, and the
// conditional-write probe.
func StoreChecks(s Store) []Check {
	checks := []Check{{ID: "store.read", Title: "checkpoint document", Run: s.checkRead}}
	if s.Type == "file" && s.FilePath != "" {
		checks = append(checks, Check{ID: "store.file", Title: "state file permissions and filesystem", Needs: []string{"store.read"},
			Run: func(ctx context.Context) Result { return checkFile(s.FilePath) }})
	}
	if s.Kube != nil {
		checks = append(checks, s.Kube.Check("store.rbac"))
	}
	if len(s.PubSub) > 0 {
		checks = append(checks, Check{ID: "store.pubsub", Title: "Pub/Sub stored positions", Needs: []string{"store.read"}, Run: s.checkPubSub})
	}
	checks = append(checks, Check{ID: "store.probe", Title: "conditional writes (probe object)", Run: s.checkProbe})
	return checks
}

// clockFix is the fix for an object store that refuses this host's requests as signed too
// far from its own time.
const clockFix = "synchronize this host's clock (NTP: chrony, systemd-timesyncd; in a container, the node's clock), then run doctor again"

// clockSkewed reports an error that is this host's clock, not the store: S3 refuses a request
// signed more than 15 minutes from its own time with RequestTimeTooSkewed, which store/s3
// reports as ErrIntegrity, the sentinel of an endpoint that ignores preconditions too.
func clockSkewed(err error) bool {
	var ae smithy.APIError
	return errors.Is(err, store.ErrIntegrity) && errors.As(err, &ae) && ae.ErrorCode() == "RequestTimeTooSkewed"
}

// storeFailure maps a store error onto a FAIL with its fix.
func storeFailure(object string, err error) Result {
	var ce *store.CorruptError
	switch {
	case clockSkewed(err):
		return Fail(clockFix, "%s refuses this host's requests as signed too far from its own time: %v", object, err)
	case errors.As(err, &ce):
		return Fail("restore "+object+" from a backup, or move it aside to restart every source from its lookback (nothing overwrites a corrupt document)",
			"%s is not a readable checkpoint document: %s", object, ce.Reason)
	case errors.Is(err, store.ErrPermission):
		return Fail("give sf2loki read and write access to "+object+" (file mode and owner, IAM policy, or RBAC)", "%v", err)
	case errors.Is(err, store.ErrNoLocation):
		return Fail("create the bucket, namespace or directory that holds "+object+", or fix the state section", "%v", err)
	case errors.Is(err, store.ErrUnavailable):
		return Fail("check the store's endpoint, credentials and network", "cannot reach %s: %v", object, err)
	}
	return Fail("check the state section", "%v", err)
}

func (s Store) checkRead(ctx context.Context) Result {
	if s.Store == nil {
		return Fail("fix the state section (sf2loki config check)", "cannot build the %s store: %v", s.Type, s.StoreErr)
	}
	obj := s.Store.Object()
	snap, err := s.Store.Read(ctx)
	if err != nil {
		return storeFailure(obj, err)
	}
	if snap.Absent {
		return Info("%s does not exist yet: the first run creates it, and every source starts from its lookback", obj)
	}
	doc, now := snap.Doc, s.now()
	limit, others := s.Store.Room() // beside the other keys of a shared object, as the read just found them
	var details []string
	if f := doc.Fence; f != nil {
		line := fmt.Sprintf("fence: epoch %d, holder %q", f.Epoch, f.Holder)
		if f.Lease.Name != "" {
			line += ", lease " + f.Lease.String()
		}
		if f.LeaseUID != "" {
			line += " uid " + f.LeaseUID
		}
		if !f.ClaimedAt.IsZero() {
			line += ", claimed " + ago(now, f.ClaimedAt)
		}
		details = append(details, line)
	} else {
		details = append(details, "fence: none")
	}
	if w := doc.Writer; w != nil {
		details = append(details, fmt.Sprintf("last writer: epoch %d invocation %s seq %d on %s, %s", w.Epoch, w.Invocation, w.Seq, w.Host, ago(now, w.WrittenAt)))
	}
	if !doc.LastCommitAt.IsZero() {
		details = append(details, "last commit: "+ago(now, doc.LastCommitAt))
	}
	keys := make([]string, 0, len(doc.Checkpoints))
	for k := range doc.Checkpoints {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cp := doc.Checkpoints[k]
		line := k + ": "
		if cp.UpdatedAt.IsZero() {
			line += "never updated by sf2loki (imported or legacy)"
		} else {
			line += "updated " + ago(now, cp.UpdatedAt)
		}
		if cp.Epoch > 0 {
			line += fmt.Sprintf(" (epoch %d)", cp.Epoch)
		}
		details = append(details, line)
	}
	size := human.Bytes(int64(snap.Size))
	if limit > 0 {
		size += fmt.Sprintf(" of the %s limit (%.1f%%)", human.Bytes(int64(limit)), 100*float64(snap.Size)/float64(limit))
	}
	if others > 0 {
		size += fmt.Sprintf(", the ConfigMap's other keys taking %s of its 1 MiB", human.Bytes(int64(others)))
	}
	msg := fmt.Sprintf("%s: schema %d, %d checkpoints, fence epoch %d, %s", obj, doc.Schema, len(doc.Checkpoints), doc.FenceEpoch(), size)
	switch {
	case limit > 0 && float64(snap.Size) > 0.8*float64(limit):
		fix := "remove keys no source uses any more with `sf2loki state delete KEY`, or move to a store with a larger limit (s3, gcs)"
		if others > 0 {
			fix = "give this document a ConfigMap of its own (state.configmap.name), or move the other keys out of it; " + fix
		}
		return Warn(fix, "%s: the document is close to the backend's size limit; writes fail above it", msg).With(details...)
	case snap.Legacy:
		return Info("%s (a legacy Python sf2loki document: the first run migrates it to schema 2)", msg).With(details...)
	}
	return Pass("%s", msg).With(details...)
}

func (s Store) checkProbe(ctx context.Context) Result {
	if s.Probe == nil {
		if s.ProbeErr != nil {
			return Fail("fix the state section (sf2loki config check)", "cannot build the probe object: %v", s.ProbeErr)
		}
		return Pass("%s", s.ProbeNote)
	}
	if s.FilePath != "" {
		// The probe's first write would create the state directory (store/file's MkdirAll):
		// doctor must not, so the probe waits for a run to have created it.
		if dir := filepath.Dir(s.FilePath); !dirExists(dir) {
			return Skip("%s does not exist yet and the probe would create it: the first run creates it, run doctor again after it to probe conditional writes", dir)
		}
	}
	err := store.CheckConditionalWrites(ctx, s.Probe)
	switch {
	case err == nil:
		return Pass("%s honors preconditions: a second create-if-absent and a write with a stale version were refused, the current version was accepted; the probe object is deleted", s.Probe)
	case clockSkewed(err):
		return storeFailure(s.Probe.String(), err)
	case errors.Is(err, store.ErrIntegrity):
		return Fail("use a store that honors If-None-Match and If-Match (AWS S3, Google Cloud Storage, versitygw, a recent MinIO or Ceph RGW), or state.store gcs/configmap: without them a stale run can overwrite newer checkpoints",
			"endpoint ignores preconditions: %v", err)
	case errors.Is(err, store.ErrPermission):
		return Fail("allow sf2loki to put, get and delete "+s.Probe.String()+" (the probe object next to the document)", "%v", err)
	}
	return storeFailure(s.Probe.String(), err)
}

// dirExists reports false only when dir does not exist: any other stat error (a file in the
// path, a directory the user may not search) fails the probe's write as it fails the run's,
// creating nothing.
func dirExists(dir string) bool {
	_, err := os.Stat(dir)
	return !errors.Is(err, fs.ErrNotExist)
}

// ago renders the time since t (human.Ago), with a hint for a future t.
func ago(now, t time.Time) string {
	if t.After(now) {
		return human.Ago(now, t) + " (clock ahead?)"
	}
	return human.Ago(now, t)
}
