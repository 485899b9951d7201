//go:build unix

package cas

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockExclusive takes an exclusive flock on path, creating it if needed, and
// returns the function that releases it. The lock is released by the kernel if the
// process dies.
func lockExclusive(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// LockExclusive exposes the store lock for feval's private state files, which
// follow the same read-merge-replace discipline as index.json.
func (l *Layout) LockExclusive() (func(), error) {
	return lockExclusive(l.root + "/" + lockFile)
}
