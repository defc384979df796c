package toolcache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// debianEtcd is where Debian's etcd-server package installs etcd.
const debianEtcd = "/usr/bin/etcd"

// ErrEtcdMissing is returned when etcd is not installed and cannot be installed here.
var ErrEtcdMissing = errors.New("toolcache: etcd is not installed")

// ensureEtcd finds etcd, installing Debian's etcd-server with apt-get when running as root.
func ensureEtcd(ctx context.Context, tb *Toolbox) (string, bool, error) {
	if p, ok := findEtcd(); ok {
		return p, false, nil
	}
	if os.Geteuid() != 0 {
		return "", false, fmt.Errorf("%w: install the Debian package etcd-server (sudo apt-get install etcd-server)", ErrEtcdMissing)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", false, fmt.Errorf("%w and apt-get is not available: install etcd 3.4+ on PATH", ErrEtcdMissing)
	}
	root, err := tb.root()
	if err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", false, fmt.Errorf("toolcache: create tool cache: %w", err)
	}
	// apt-get fails rather than waits when another apt-get holds its lock, so parallel test
	// binaries take turns here.
	unlock, err := lockFile(ctx, filepath.Join(root, "etcd-apt.lock"), func() {
		tb.progressf("etcd: waiting for another process that is installing it")
	})
	if err != nil {
		return "", false, fmt.Errorf("toolcache: lock etcd install: %w", err)
	}
	defer unlock()
	if p, ok := findEtcd(); ok {
		return p, false, nil
	}
	logPath := filepath.Join(root, "etcd-apt.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", false, fmt.Errorf("toolcache: install etcd: %w", err)
	}
	defer func() { _ = logFile.Close() }()
	tb.progressf("etcd: installing Debian package etcd-server with apt-get (log: %s)", logPath)
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{
		{"update"},
		{"install", "-y", "--no-install-recommends", "etcd-server"},
	} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = logFile, logFile
		fmt.Fprintf(logFile, "$ apt-get %v\n", args)
		if err := cmd.Run(); err != nil {
			return "", false, fmt.Errorf("toolcache: apt-get %s: %w\n--- last lines of %s ---\n%s",
				args[0], err, logPath, TailFile(logPath, 30))
		}
	}
	if p, ok := findEtcd(); ok {
		return p, true, nil
	}
	return "", false, fmt.Errorf("%w: apt-get installed etcd-server but %s is missing", ErrEtcdMissing, debianEtcd)
}

func findEtcd() (string, bool) {
	if isExecutable(debianEtcd) {
		return debianEtcd, true
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, true
		}
	}
	return "", false
}
