package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// maxOutputDepth is the deepest directory nesting copied out of /out: deeper
// trees are refused (a program can nest directories without bound by
// working in relative paths; the host cannot hold that).
const maxOutputDepth = 128

// hostPathMax is the longest host path copy-out creates (PATH_MAX less the
// terminating NUL).
const hostPathMax = unix.PathMax - 1

// copyOutTimeout bounds one copy-out: a base plus time for the output limit
// at a slow disk's speed. The output is bounded before the copy starts, so a
// copy that takes longer than this is the host's trouble, not the program's.
func copyOutTimeout(outputBytes int64) time.Duration {
	return 30*time.Second + time.Duration(outputBytes/(8<<20))*time.Second
}

// copyStats counts what copyTree did.
type copyStats struct {
	files, bytes, skipped int64
}

// copyLimits bound what one copy-out may write on the host.
type copyLimits struct {
	// bytes bounds the sum of the apparent sizes of the regular files copied,
	// counted once per name: a hard link is written as a copy, and a sparse
	// file as its full length.
	bytes int64
	// entries bounds the files and directories created.
	entries int64
}

// outputRefusedError reports that the program's output cannot be copied to
// the host as it is: larger, or with more entries, than the output limits
// once written out, nested too deep, or with paths too long for the host, or
// the host ran out of space for it. Run classes such a run
// ClassOutputExceeded and copies nothing.
type outputRefusedError struct {
	// Reason says what was wrong, in words.
	Reason string
	// Err is the host's error, when the host refused the write.
	Err error
}

func (e *outputRefusedError) Error() string {
	if e.Err != nil {
		return "output refused: " + e.Reason + ": " + e.Err.Error()
	}
	return "output refused: " + e.Reason
}

func (e *outputRefusedError) Unwrap() error { return e.Err }

// copyTree copies the regular files and directories below src to dst, which
// must exist. It first measures src as the host will hold it and refuses,
// with an *outputRefusedError, output over lim, deeper than maxOutputDepth,
// or whose host paths would pass hostPathMax. It never follows a symbolic
// link on either side: src is written by the program (which has exited by
// now), and its symlinks, devices, FIFOs and sockets are skipped and counted.
// Existing names in dst are not overwritten. On any error, what it created
// in dst is removed again. ctx ends the copy early.
func copyTree(ctx context.Context, src, dst string, lim copyLimits) (copyStats, error) {
	var st copyStats
	s, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, fmt.Errorf("opening %s: %w", src, err)
	}
	defer unix.Close(s)
	m := &measure{lim: lim, base: len(dst), ctx: ctx}
	if err := m.dir(s, "", 1); err != nil {
		return st, err
	}
	d, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, fmt.Errorf("opening %s: %w", dst, err)
	}
	defer unix.Close(d)
	c := &copier{ctx: ctx, st: &st, buf: make([]byte, 1<<20)}
	err = c.dir(s, d, "")
	if err != nil {
		for _, name := range c.created {
			_ = os.RemoveAll(filepath.Join(dst, name))
		}
		st = copyStats{}
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
			err = &outputRefusedError{Reason: "the host has no space for it", Err: err}
		}
	}
	return st, err
}

// measure walks the output before anything is copied.
type measure struct {
	lim            copyLimits
	base           int // length of the host directory's path
	ctx            context.Context
	bytes, entries int64
}

func (m *measure) dir(fd int, rel string, depth int) error {
	if err := m.ctx.Err(); err != nil {
		return err
	}
	if depth > maxOutputDepth {
		return &outputRefusedError{Reason: fmt.Sprintf("directories nested deeper than %d levels", maxOutputDepth)}
	}
	names, err := readDirNames(fd)
	if err != nil {
		return fmt.Errorf("reading %s: %w", "/"+rel, err)
	}
	for _, name := range names {
		p := rel + "/" + name
		var fi unix.Stat_t
		if err := unix.Fstatat(fd, name, &fi, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		typ := fi.Mode & unix.S_IFMT
		if typ != unix.S_IFDIR && typ != unix.S_IFREG {
			continue
		}
		if m.base+len(p) > hostPathMax {
			return &outputRefusedError{Reason: fmt.Sprintf("a path would be longer than the host's limit of %d bytes", hostPathMax)}
		}
		if m.entries++; m.entries > m.lim.entries {
			return &outputRefusedError{Reason: fmt.Sprintf("more than %d files and directories", m.lim.entries)}
		}
		if typ == unix.S_IFREG {
			if m.bytes += fi.Size; m.bytes > m.lim.bytes {
				return &outputRefusedError{Reason: fmt.Sprintf("more than %d bytes once copied (apparent sizes, every hard link as a copy)", m.lim.bytes)}
			}
			continue
		}
		cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening %s: %w", p, err)
		}
		err = m.dir(cfd, p, depth+1)
		unix.Close(cfd)
		if err != nil {
			return err
		}
	}
	return nil
}

// copier copies a measured tree.
type copier struct {
	ctx     context.Context
	st      *copyStats
	buf     []byte
	created []string // names created directly in the destination
}

func (c *copier) dir(s, d int, rel string) error {
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
			if rel == "" {
				c.created = append(c.created, name)
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
			err = c.dir(cs, cd, p)
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
			n, err := c.file(s, d, name, mode, fi.Size, rel == "")
			if err != nil {
				return fmt.Errorf("copying %s: %w", p, err)
			}
			c.st.files++
			c.st.bytes += n
		default:
			c.st.skipped++
		}
	}
	return nil
}

// file copies at most size bytes, the size measured before the copy.
func (c *copier) file(s, d int, name string, mode uint32, size int64, top bool) (int64, error) {
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
	if top {
		c.created = append(c.created, name)
	}
	outF := os.NewFile(uintptr(out), name)
	var n int64
	r := io.LimitReader(inF, size)
	for {
		if err = c.ctx.Err(); err != nil {
			break
		}
		k, rerr := r.Read(c.buf)
		if k > 0 {
			w, werr := outF.Write(c.buf[:k])
			n += int64(w)
			if werr != nil {
				err = werr
				break
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				err = rerr
			}
			break
		}
	}
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
