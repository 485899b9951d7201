package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// copyStats counts what copyTree did.
type copyStats struct {
	files, bytes, skipped int64
}

// copyTree copies the regular files and directories below src to dst, which
// must exist. It never follows a symbolic link on either side: src is written
// by the program (which has exited by now), and its symlinks, devices, FIFOs
// and sockets are skipped and counted. Existing names in dst are not
// overwritten.
func copyTree(src, dst string) (copyStats, error) {
	var st copyStats
	s, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, fmt.Errorf("opening %s: %w", src, err)
	}
	defer unix.Close(s)
	d, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, fmt.Errorf("opening %s: %w", dst, err)
	}
	defer unix.Close(d)
	err = copyDir(s, d, "", &st)
	return st, err
}

func copyDir(s, d int, rel string, st *copyStats) error {
	names, err := readDirNames(s)
	if err != nil {
		return fmt.Errorf("reading %s: %w", "/"+rel, err)
	}
	for _, name := range names {
		p := rel + "/" + name
		var fi unix.Stat_t
		if err := unix.Fstatat(s, name, &fi, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		switch fi.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if err := unix.Mkdirat(d, name, 0o755); err != nil {
				return fmt.Errorf("creating %s: %w", p, err)
			}
			cs, err := unix.Openat(s, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("opening %s: %w", p, err)
			}
			cd, err := unix.Openat(d, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				unix.Close(cs)
				return fmt.Errorf("opening %s: %w", p, err)
			}
			err = copyDir(cs, cd, p, st)
			unix.Close(cs)
			unix.Close(cd)
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			mode := uint32(0o644)
			if fi.Mode&0o111 != 0 {
				mode = 0o755
			}
			n, err := copyFile(s, d, name, mode)
			if err != nil {
				return fmt.Errorf("copying %s: %w", p, err)
			}
			st.files++
			st.bytes += n
		default:
			st.skipped++
		}
	}
	return nil
}

func copyFile(s, d int, name string, mode uint32) (int64, error) {
	in, err := unix.Openat(s, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	inF := os.NewFile(uintptr(in), name)
	defer inF.Close()
	out, err := unix.Openat(d, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return 0, err
	}
	outF := os.NewFile(uintptr(out), name)
	n, err := io.Copy(outF, inF)
	if cerr := outF.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// readDirNames lists a directory descriptor without consuming it, sorted.
func readDirNames(fd int) ([]string, error) {
	dup, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), ".")
	defer f.Close()
	var names []string
	for {
		batch, err := f.Readdirnames(256)
		names = append(names, batch...)
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(names)
	return names, nil
}

// fsFull reports whether the file system at p has no free blocks or inodes.
func fsFull(p string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return false, err
	}
	return st.Bfree == 0 || st.Ffree == 0, nil
}
