// Package file keeps the checkpoint document in a local (or shared-volume) file.
//
// The version of the document is a hash of its bytes (every write carries a unique writer
// stamp, so versions never repeat). A write takes an exclusive flock on "<document>.lock" only
// for the read-compare-write section — never for the life of the process — then writes a
// temporary file, fsyncs it, renames it over the document and fsyncs the directory. An
// existing document keeps its mode and owner; if the owner cannot be kept (a different
// non-root user writing), the write is refused rather than silently changing ownership.
//
// The document is the file the path names with its symlinks resolved (the last one too, when
// it points to a file not written yet): a path that is a symlink (/var/lib/sf2loki/state.json
// -> /data/state.json) stays one, the temporary file and the lock sit next to the file it
// points to, and every store that reaches one document, by whatever path, takes one lock.
//
// Across hosts the lock is only as good as the shared filesystem's flock (NFS and friends
// vary): prefer an object store or a ConfigMap there.
package file

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sf2loki/sf2loki/store"
)

// DefaultMaxSize is the default document cap.
const DefaultMaxSize = 16 << 20

// Options configures the file backend. Zero values mean the defaults.
type Options struct {
	// Path of the document, e.g. /var/lib/sf2loki/state.json. Required.
	Path string
	// Mode of a newly created document. Default 0600. An existing document keeps its mode.
	Mode os.FileMode
	// DirMode of a parent directory created on the first write. Default 0750.
	DirMode os.FileMode
	// LockWait bounds how long a write waits for the lock file (LockPath). Default 10s.
	LockWait time.Duration
	// MaxSize is the largest document written, in bytes. Default 16 MiB.
	MaxSize int
}

// Backend is a store.Backend over one file.
type Backend struct {
	o Options
}

// New returns a file backend.
func New(o Options) (*Backend, error) {
	if o.Path == "" {
		return nil, errors.New("file store: path is required")
	}
	abs, err := absolute(o.Path)
	if err != nil {
		return nil, fmt.Errorf("file store: path %q: %w", o.Path, err)
	}
	o.Path = abs
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	if o.DirMode == 0 {
		o.DirMode = 0o750
	}
	if o.LockWait <= 0 {
		o.LockWait = 10 * time.Second
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	return &Backend{o: o}, nil
}

// Path returns the document's absolute path, as configured.
func (b *Backend) Path() string { return b.o.Path }

// LockPath returns the path of the lock file guarding writes: next to the document, its
// symlinks resolved (see resolve).
func (b *Backend) LockPath() string {
	doc, err := b.resolve()
	if err != nil {
		doc = b.o.Path
	}
	return doc + ".lock"
}

// maxLinks bounds the symlinks followed to the document, as the system does.
const maxLinks = 40

// resolve returns the path of the document the backend's path reaches (Resolve): the path a
// write replaces and whose "<path>.lock" guards it, one for every configured path that reaches
// the document.
func (b *Backend) resolve() (string, error) { return Resolve(b.o.Path) }

// Resolve returns the path of the document a configured path reaches, as the system opens it:
// absolute (a relative path is the working directory's, not cleaned), every symlink resolved
// with each '..' taken after the symlinks before it, a last symlink that points to a file not
// written yet followed (a link made before the first run), and for a path that does not exist
// yet the symlinks of its longest existing prefix resolved. Two configured paths that reach one
// document resolve alike, whether it exists yet or not. An error to look at the path is left to
// the operation on it, except a symlink that cannot be read or a loop of them.
func Resolve(path string) (string, error) {
	p, err := absolute(path)
	if err != nil {
		return "", classify("resolving", path, err)
	}
	for range maxLinks {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real, nil
		}
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return existingPrefix(p), nil
		}
		dir, _ := splitPath(p)
		realDir, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return p, nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", classify("reading the symlink", p, err)
		}
		if !filepath.IsAbs(target) {
			// Not Join: it would clean a '..' after a symlink of target away; EvalSymlinks
			// takes each '..' after the symlinks before it, as the system does.
			target = realDir + string(filepath.Separator) + target
		}
		p = target
	}
	return "", fmt.Errorf("%w: %s: more than %d symlinks lead to the document (a loop?): point state.file.path (or the job group's state_path) at the file itself",
		store.ErrNoLocation, path, maxLinks)
}

// absolute is p made absolute from the working directory without cleaning it: filepath.Abs
// would take a '..' after a symlink lexically, where the system takes it from the link's target.
func absolute(p string) (string, error) {
	if filepath.IsAbs(p) {
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return wd + string(filepath.Separator) + p, nil
}

// existingPrefix is the absolute path p, which does not exist, with the symlinks of its longest
// existing prefix resolved; the rest, which holds no symlink, is cleaned.
func existingPrefix(p string) string {
	var rest []string // the components after prefix, which does not exist
	for prefix := p; ; {
		if r, err := filepath.EvalSymlinks(prefix); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		}
		dir, name := splitPath(prefix)
		if dir == prefix {
			return filepath.Clean(p)
		}
		rest = append([]string{name}, rest...)
		prefix = dir
	}
}

// splitPath splits p at its last separator without cleaning it (filepath.Dir would take a
// '..' after a symlink lexically).
func splitPath(p string) (dir, name string) {
	i := strings.LastIndexByte(p, filepath.Separator)
	switch {
	case i < 0:
		return ".", p
	case i == 0:
		return string(filepath.Separator), p[1:]
	}
	return p[:i], p[i+1:]
}

// shown names the document in an error: its path, and the configured one when that reaches
// it through a symlink.
func (b *Backend) shown(doc string) string {
	if doc == b.o.Path {
		return doc
	}
	return fmt.Sprintf("%s (the configured state path %s leads there through a symlink)", doc, b.o.Path)
}

// String implements store.Backend.
func (b *Backend) String() string { return "file " + b.o.Path }

// MaxSize implements store.Backend.
func (b *Backend) MaxSize() int { return b.o.MaxSize }

func version(data []byte) store.Version {
	sum := sha256.Sum256(data)
	return store.Version(hex.EncodeToString(sum[:16]))
}

// classify wraps err with the store sentinel for its kind, naming the path.
func classify(what, path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: %s %s: %w (check the owner and mode of the file and its directory)", store.ErrPermission, what, path, err)
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: %s %s: %w (the file system is read-only: point state.file.path (or the job group's state_path) at a writable volume)", store.ErrPermission, what, path, err)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: %s %s: %w (a part of the path is a file, not a directory: fix state.file.path (or the job group's state_path))", store.ErrNoLocation, what, path, err)
	default:
		return fmt.Errorf("%w: %s %s: %w", store.ErrUnavailable, what, path, err)
	}
}

// Load implements store.Backend. Reading needs no lock: rename is atomic, so the bytes are
// always one complete version, and the version is computed from exactly those bytes.
func (b *Backend) Load(ctx context.Context) ([]byte, store.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	f, err := os.Open(b.o.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", store.ErrAbsent
	}
	if err != nil {
		return nil, "", classify("reading", b.o.Path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > int64(b.o.MaxSize) {
		return nil, "", fmt.Errorf("%w: %s is %d bytes, more than %d", store.ErrTooLarge, b.o.Path, st.Size(), b.o.MaxSize)
	}
	data, err := store.ReadLimited(f, b.o.MaxSize)
	if err != nil {
		if errors.Is(err, store.ErrTooLarge) {
			return nil, "", fmt.Errorf("%s: %w", b.o.Path, err)
		}
		return nil, "", classify("reading", b.o.Path, err)
	}
	return data, version(data), nil
}

// Store implements store.Backend.
func (b *Backend) Store(ctx context.Context, data []byte, expect store.Version) (store.Version, error) {
	if len(data) > b.o.MaxSize {
		return "", fmt.Errorf("%w: %d bytes exceeds %d", store.ErrTooLarge, len(data), b.o.MaxSize)
	}
	doc, err := b.resolve()
	if err != nil {
		return "", err
	}
	unlock, err := b.lock(ctx, doc, expect == "")
	if err != nil {
		return "", err
	}
	defer unlock()
	cur, err := os.ReadFile(doc)
	var st os.FileInfo
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if expect != "" {
			return "", fmt.Errorf("%w: %s does not exist (expected version %s)", store.ErrConflict, b.shown(doc), expect)
		}
	case err != nil:
		return "", classify("reading", b.shown(doc), err)
	default:
		if expect == "" || version(cur) != expect {
			return "", fmt.Errorf("%w: %s changed (expected version %q, found %s)", store.ErrConflict, b.shown(doc), expect, version(cur))
		}
		if st, err = os.Stat(doc); err != nil {
			return "", classify("inspecting", b.shown(doc), err)
		}
	}
	if err := b.replace(doc, data, st); err != nil {
		return "", err
	}
	return version(data), nil
}

// replace writes data to a temporary file in the directory of doc (the document, its symlinks
// resolved), with the mode and owner of the current document (st, nil when creating), and
// renames it over doc durably.
func (b *Backend) replace(doc string, data []byte, st os.FileInfo) (err error) {
	dir := filepath.Dir(doc)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(doc)+".tmp-*")
	if err != nil {
		return classify("creating a temporary file in", dir, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	mode := b.o.Mode
	if st != nil {
		mode = st.Mode().Perm()
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && (int(sys.Uid) != os.Geteuid() || int(sys.Gid) != os.Getegid()) {
			if err := tmp.Chown(int(sys.Uid), int(sys.Gid)); err != nil {
				return fmt.Errorf("%w: %s is owned by uid %d gid %d and replacing it as uid %d would change its owner: %w "+
					"(run as the owner, or fix ownership)", store.ErrPermission, b.shown(doc), sys.Uid, sys.Gid, os.Geteuid(), err)
			}
		}
	}
	if err := tmp.Chmod(mode); err != nil {
		return classify("setting the mode of", tmp.Name(), err)
	}
	if _, err := tmp.Write(data); err != nil {
		return classify("writing", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return classify("syncing", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return classify("closing", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), doc); err != nil {
		return classify("renaming over", b.shown(doc), err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return classify("opening directory", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return classify("syncing directory", dir, err)
	}
	return nil
}

// Delete implements store.Backend. It removes the document; a symlink to it is kept.
func (b *Backend) Delete(ctx context.Context) error {
	doc, err := b.resolve()
	if err != nil {
		return err
	}
	unlock, err := b.lock(ctx, doc, false)
	if errors.Is(err, store.ErrAbsent) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Remove(doc); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return classify("removing", b.shown(doc), err)
	}
	return syncDir(filepath.Dir(doc))
}

// lock takes the exclusive write lock of doc (the document, its symlinks resolved),
// "<doc>.lock", polling until LockWait or ctx ends. create allows creating the parent
// directory.
func (b *Backend) lock(ctx context.Context, doc string, create bool) (func(), error) {
	path := doc + ".lock"
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if !create {
			return nil, store.ErrAbsent
		}
		if err := os.MkdirAll(filepath.Dir(path), b.o.DirMode); err != nil {
			return nil, classify("creating directory", filepath.Dir(path), err)
		}
		f, err = os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	}
	if err != nil {
		return nil, classify("opening lock file", path, err)
	}
	deadline := time.Now().Add(b.o.LockWait)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, classify("locking", path, err)
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("%w: %s is locked by another process for more than %s", store.ErrUnavailable, path, b.o.LockWait)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("%w: waiting for %s: %w", store.ErrUnavailable, path, ctx.Err())
		case <-time.After(wait):
		}
	}
}
