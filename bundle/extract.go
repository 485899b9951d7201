package bundle

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
)

// ErrTargetNotEmpty reports an extraction target that already has content.
var ErrTargetNotEmpty = errors.New("target directory is not empty")

// ExtractOptions controls Extract.
type ExtractOptions struct {
	// Limits bound the archive; the zero value means DefaultLimits.
	Limits Limits
	// Replace allows a non-empty target: its old content is swapped out and
	// removed once the new tree is complete.
	Replace bool
	// Progress receives the number of content bytes written; nil means none.
	Progress cas.Progress
}

// Extracted describes a completed extraction.
type Extracted struct {
	Dir     string  `json:"dir"`
	Content Content `json:"payload"`
	Files   int     `json:"files"`
}

// Extract restores the payload of a file or tree artifact under dest: a tree
// becomes dest's content, a file becomes dest/<its recorded name>.
//
// Everything is written into a fresh staging directory next to dest, through
// an os.Root (no path can leave it), and verified against the layer's recorded
// uncompressed digest before dest is touched; only then is the staging
// directory renamed onto dest (atomically exchanged with it under Replace). On
// any failure dest is left as it was and the staging directory is removed.
// Archive entries are held to FORMAT.md: relative clean paths, regular files
// and directories only, file modes 0644 or 0755, directory mode 0755, within
// the limits. dest must not exist, be an empty directory, or (with Replace) be
// a directory; a symbolic link is refused.
func Extract(ctx context.Context, st cas.Store, art *Loaded, dest string, opts ExtractOptions) (Extracted, error) {
	lim := opts.Limits
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	prog := opts.Progress
	if prog == nil {
		prog = cas.NoProgress
	}
	if len(art.Payloads) != 1 {
		return Extracted{}, fmt.Errorf("%s has %d payloads, want one file or tree: %w", art.Desc.Digest, len(art.Payloads), ErrNotArtifact)
	}
	layer := art.Payloads[0]
	c, err := contentOf(layer)
	if err != nil {
		return Extracted{}, fmt.Errorf("%s: %w", art.Desc.Digest, err)
	}
	if c.Type == "file" && (c.Size > lim.MaxFile || c.Size > lim.MaxBytes) {
		return Extracted{}, fmt.Errorf("%s holds %d bytes, over the limit of %d: %w", art.Desc.Digest, c.Size, min(lim.MaxBytes, lim.MaxFile), ErrLimit)
	}
	staging, replace, err := makeStaging(dest, opts.Replace)
	if err != nil {
		return Extracted{}, err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(staging)
		}
	}()
	rc, err := OpenPayload(ctx, st, layer)
	if err != nil {
		return Extracted{}, err
	}
	defer rc.Close()
	prog.Start(c.Size)
	defer prog.Done()
	body := io.Reader(&progressReader{r: rc, add: prog.Add})
	files := 0
	if c.Type == "file" {
		err = writeFile(staging, c.Name, 0o644, body)
		files = 1
	} else {
		files, err = unpackInto(staging, body, lim)
	}
	if err == nil {
		// Reading to the end checks the uncompressed digest and size.
		_, err = io.Copy(io.Discard, body)
	}
	if err != nil {
		// Damaged compressed bytes fail in the decompressor before any digest
		// is reached: name the damage rather than its symptom.
		if verr := checkBlob(ctx, st, layer); verr != nil {
			err = verr
		}
		return Extracted{}, fmt.Errorf("extracting %s: %w", art.Desc.Digest, err)
	}
	if err := syncTree(staging); err != nil {
		return Extracted{}, err
	}
	if err := install(staging, dest, replace); err != nil {
		return Extracted{}, err
	}
	done = true
	return Extracted{Dir: dest, Content: c, Files: files}, nil
}

// checkBlob reads a stored blob to its end, verifying its digest and size.
func checkBlob(ctx context.Context, st cas.Store, desc ocispec.Descriptor) error {
	rc, err := st.Fetch(ctx, desc)
	if err != nil {
		return err
	}
	defer rc.Close()
	vr, err := cas.NewVerifyReader(rc, desc)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, vr)
	return err
}

// contentOf reads what a payload layer holds from its annotations.
func contentOf(layer ocispec.Descriptor) (Content, error) {
	var c Content
	switch layer.MediaType {
	case MediaTypeTree:
		c.Type = "tree"
	case MediaTypeFile:
		c.Type = "file"
		c.Name = layer.Annotations[ocispec.AnnotationTitle]
		if c.Name == "" || strings.ContainsAny(c.Name, "/\\\x00") || c.Name == "." || c.Name == ".." {
			return c, fmt.Errorf("file name %q: %w", c.Name, ErrUnsafeEntry)
		}
	default:
		return c, fmt.Errorf("payload of media type %q is neither a file nor a tree: %w", layer.MediaType, ErrNotArtifact)
	}
	var size int64
	if _, err := fmt.Sscan(layer.Annotations[AnnotationContentSize], &size); err != nil || size < 0 {
		return c, fmt.Errorf("payload %s has no valid %s: %w", layer.Digest, AnnotationContentSize, ErrNotArtifact)
	}
	c.Digest, c.Size = digest.Digest(layer.Annotations[AnnotationContentDigest]), size
	return c, nil
}

// makeStaging checks dest (checkTarget) and makes the staging directory an
// extraction writes into, next to dest with mode 0755. replace reports
// whether dest's old content is to be swapped out. The caller removes
// staging unless it installs it.
func makeStaging(dest string, allowReplace bool) (staging string, replace bool, err error) {
	if replace, err = checkTarget(dest, allowReplace); err != nil {
		return "", false, err
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", false, err
	}
	if staging, err = os.MkdirTemp(parent, "."+filepath.Base(dest)+".feval-unpack-"); err != nil {
		return "", false, err
	}
	if err := os.Chmod(staging, 0o755); err != nil {
		os.RemoveAll(staging)
		return "", false, err
	}
	return staging, replace, nil
}

// checkTarget reports whether dest holds content to be replaced, refusing what
// cannot be extracted onto.
func checkTarget(dest string, allowReplace bool) (replace bool, err error) {
	fi, err := os.Lstat(dest)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return false, fmt.Errorf("%s is a symbolic link: give the directory it points to", dest)
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s exists and is not a directory", dest)
	}
	f, err := os.Open(dest)
	if err != nil {
		return false, err
	}
	names, err := f.Readdirnames(1)
	f.Close()
	if len(names) == 0 && (err == nil || errors.Is(err, io.EOF)) {
		return false, nil
	}
	if !allowReplace {
		return false, fmt.Errorf("%s: %w", dest, ErrTargetNotEmpty)
	}
	return true, nil
}

// Unpack writes a normalised tar stream under dest, which must not exist yet or
// be empty, refusing unsafe entries and anything over limits. It writes in
// place; Extract is the all-or-nothing form.
func Unpack(r io.Reader, dest string, lim Limits) error {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	_, err := unpackInto(dest, r, lim)
	return err
}

// unpackInto writes a tar stream's entries under dir through an os.Root, so
// that no entry can name a place outside dir, and returns the number of files.
func unpackInto(dir string, r io.Reader, lim Limits) (int, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	files := 0
	err = walkTar(r, lim, func(hdr *tar.Header, body io.Reader) error {
		name := strings.TrimSuffix(hdr.Name, "/")
		if hdr.Typeflag == tar.TypeDir {
			if hdr.Mode != 0o755 {
				return fmt.Errorf("directory %q has mode %#o, want 0755: %w", hdr.Name, hdr.Mode, ErrUnsafeEntry)
			}
			return mkdirAll(root, name)
		}
		if hdr.Mode != 0o644 && hdr.Mode != 0o755 {
			return fmt.Errorf("file %q has mode %#o, want 0644 or 0755: %w", hdr.Name, hdr.Mode, ErrUnsafeEntry)
		}
		if d := filepath.Dir(filepath.FromSlash(name)); d != "." {
			if err := mkdirAll(root, d); err != nil {
				return err
			}
		}
		files++
		return writeRootFile(root, name, os.FileMode(hdr.Mode), io.LimitReader(body, hdr.Size), hdr.Size)
	})
	return files, err
}

func mkdirAll(root *os.Root, name string) error {
	if err := root.MkdirAll(filepath.FromSlash(name), 0o755); err != nil {
		return err
	}
	return root.Chmod(filepath.FromSlash(name), 0o755)
}

// writeFile creates dir/name (which must not exist) with mode and r's content.
func writeFile(dir, name string, mode os.FileMode, r io.Reader) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return writeRootFile(root, name, mode, r, -1)
}

// writeRootFile creates name in root, failing if it exists (a symbolic link
// included), writes r to it and sets mode exactly, whatever the umask. want >= 0
// is the size the content must have.
func writeRootFile(root *os.Root, name string, mode os.FileMode, r io.Reader, want int64) error {
	p := filepath.FromSlash(name)
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, r)
	if err == nil && want >= 0 && n != want {
		err = fmt.Errorf("entry %q is truncated: %d of %d bytes", name, n, want)
	}
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncTree flushes the file system holding dir, so that what the rename makes
// visible is on disk.
func syncTree(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// install moves the finished staging directory onto dest. With replace, the
// two are exchanged atomically where the file system can, else dest is moved
// aside first; the old content is removed afterwards.
func install(staging, dest string, replace bool) error {
	if !replace {
		// rename(2) itself, which replaces an empty directory (os.Rename
		// refuses any existing directory).
		if err := unix.Rename(staging, dest); err != nil {
			return fmt.Errorf("moving the extracted tree into place: %w", err)
		}
		return syncDir(filepath.Dir(dest))
	}
	err := unix.Renameat2(unix.AT_FDCWD, staging, unix.AT_FDCWD, dest, unix.RENAME_EXCHANGE)
	if err != nil {
		// No atomic exchange here: move the old tree aside, then the new in.
		old := staging + ".old"
		if err := os.Rename(dest, old); err != nil {
			return fmt.Errorf("moving %s aside: %w", dest, err)
		}
		if err := os.Rename(staging, dest); err != nil {
			os.Rename(old, dest)
			return fmt.Errorf("moving the extracted tree into place: %w", err)
		}
		staging = old
	}
	if err := syncDir(filepath.Dir(dest)); err != nil {
		return err
	}
	// staging now holds the old content.
	return os.RemoveAll(staging)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

type progressReader struct {
	r   io.Reader
	add func(int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.add(int64(n))
	}
	return n, err
}
