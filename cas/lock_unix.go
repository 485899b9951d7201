//go:build unix

package cas

import (
	"errors"
	"io/fs"
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

// createTemp creates a ".ingest-*" temporary file in dir and holds an exclusive
// flock on it for as long as it is open. The kernel drops the lock when the
// writer exits, however it exits, so removeIfAbandoned can tell a file a live
// command is writing from one a killed command left behind.
//
// Between creating the file and locking it, fsck --repair may have taken the
// lock and removed the file; then the file is created afresh.
func createTemp(dir string) (*os.File, error) {
	for {
		f, err := os.CreateTemp(dir, ".ingest-*")
		if err != nil {
			return nil, err
		}
		for {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
			if err != unix.EINTR {
				break
			}
		}
		var st unix.Stat_t
		if err == nil {
			err = unix.Fstat(int(f.Fd()), &st)
		}
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, err
		}
		if st.Nlink > 0 {
			return f, nil
		}
		f.Close() // removed by a repair before we held the lock
	}
}

// abandoned reports whether the temporary file path has no live writer: nobody
// holds its lock. It takes the lock only for the moment of the test.
func abandoned(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return true
}

// removeIfAbandoned removes the temporary file path unless a live process holds
// its lock; it reports whether it removed it.
func removeIfAbandoned(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		// Not something feval could have locked (a link, a FIFO we may not
		// open): it is no write in progress.
		return true, os.Remove(path)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		return false, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}
