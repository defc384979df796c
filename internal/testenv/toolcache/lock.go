package toolcache

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// lockPollInterval is how often a waiting lockFile retries; builds take minutes, so a coarse
// interval costs nothing and keeps the wait cancellable through ctx.
const lockPollInterval = 200 * time.Millisecond

// lockFile takes an exclusive flock on path (created if missing), waiting until it is free or
// ctx ends. onWait runs once if the lock is busy. The lock dies with the process, so a killed
// builder never leaves it held. The returned function releases it.
func lockFile(ctx context.Context, path string, onWait func()) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	waited := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, err
		}
		if !waited && onWait != nil {
			onWait()
		}
		waited = true
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(lockPollInterval):
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
