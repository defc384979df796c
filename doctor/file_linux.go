//go:build linux

package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// networkFilesystems are statfs magic numbers of filesystems whose flock may not work across
// hosts (or at all).
var networkFilesystems = map[uint32]string{
	0x6969:     "NFS",
	0x517B:     "SMB",
	0xFF534D42: "CIFS",
	0xFE534D42: "SMB2",
	0x65735546: "FUSE",
	0x00C36400: "CephFS",
	0x01021997: "9P",
	0x5346414F: "AFS",
	0x47504653: "GPFS",
	0x0BD00BD0: "Lustre",
}

const accessX, accessW, accessR = 0x1, 0x2, 0x4

// checkFile checks the file store's real paths without writing them: the directory must take
// new files (tmp + rename), the document and its lock file must be readable and writable by
// this user, the owner must be one sf2loki may keep, and flock on a network filesystem earns a
// warning. A directory that does not exist yet is judged as the first write meets it: that
// write creates it (and any missing parents) in its nearest existing ancestor, which must
// take new directories.
func checkFile(path string) Result {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs // as the file backend resolves it
	}
	dir := filepath.Dir(path)
	uid := os.Geteuid()
	existing, st, err := existingAncestor(dir)
	if err != nil {
		return Fail("fix state.file.path, or the permissions of the directories above it", "the state directory: %v", err)
	}
	if !st.IsDir() {
		return Fail("fix state.file.path", "%s is not a directory", existing)
	}
	if existing != dir {
		if err := syscall.Access(existing, accessW|accessX); err != nil {
			return Fail(fmt.Sprintf("create %s writable by uid %d, or give uid %d write access to %s (the first write creates the missing directories)", dir, uid, uid, existing),
				"%s does not exist and uid %d cannot create it in %s: %v", dir, uid, existing, err)
		}
		r := Info("%s does not exist yet: the first run creates it in %s, which uid %d may write", dir, existing, uid)
		if name := networkFilesystem(existing); name != "" {
			r = Warn("with more than one host, prefer state.store s3, gcs or configmap; on one host this is fine",
				"%s does not exist yet and will be created on %s (the first run creates it): flock across hosts depends on that filesystem", dir, name)
		}
		return r.With(path+": absent (created by the first write)", path+".lock: absent (created by the first write)")
	}
	if err := syscall.Access(dir, accessW|accessX); err != nil {
		return Fail(fmt.Sprintf("give uid %d write access to %s (each write is a temporary file renamed over the document)", uid, dir),
			"cannot create files in %s: %v", dir, err)
	}
	var details []string
	for _, p := range []string{path, path + ".lock"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			details = append(details, p+": absent (created by the first write)")
			continue
		}
		if err != nil {
			return Fail("fix the permissions of "+p, "%v", err)
		}
		if err := syscall.Access(p, accessR|accessW); err != nil {
			return Fail(fmt.Sprintf("chown or chmod %s so that uid %d can read and write it (a root `state set` may have left it 0600 root)", p, uid),
				"uid %d cannot read and write %s (mode %s): %v", uid, p, fi.Mode().Perm(), err)
		}
		line := fmt.Sprintf("%s: mode %s", p, fi.Mode().Perm())
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			line += fmt.Sprintf(", owner uid %d", sys.Uid)
			if p == path && int(sys.Uid) != uid && uid != 0 {
				return Fail(fmt.Sprintf("chown %s to uid %d, or run sf2loki as uid %d", p, uid, sys.Uid),
					"%s is owned by uid %d but sf2loki runs as uid %d: the file store refuses writes that would change a document's owner", p, sys.Uid, uid)
			}
		}
		details = append(details, line)
	}
	if name := networkFilesystem(dir); name != "" {
		return Warn("with more than one host, prefer state.store s3, gcs or configmap; on one host this is fine",
			"%s is on %s: flock across hosts depends on that filesystem", dir, name).With(details...)
	}
	return Pass("%s is writable by uid %d on a local filesystem", dir, uid).With(details...)
}

// existingAncestor returns dir and its FileInfo when it exists, otherwise its nearest existing
// ancestor: where a first write's MkdirAll starts creating. Any error but "does not exist" (a
// path component that is a file, a directory the user may not search) is returned, as the
// write would meet it.
func existingAncestor(dir string) (string, os.FileInfo, error) {
	for {
		st, err := os.Stat(dir)
		if err == nil {
			return dir, st, nil
		}
		if parent := filepath.Dir(dir); errors.Is(err, fs.ErrNotExist) && parent != dir {
			dir = parent
			continue
		}
		return "", nil, err
	}
}

// networkFilesystem names the network filesystem dir is on, or returns "" for a local one.
func networkFilesystem(dir string) string {
	var fsst syscall.Statfs_t
	if err := syscall.Statfs(dir, &fsst); err != nil {
		return ""
	}
	return networkFilesystems[uint32(fsst.Type)]
}
