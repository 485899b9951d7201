package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing/fstest"

	"github.com/feval/feval/cas"
	"github.com/klauspost/compress/zstd"
)

// Limits bound what Unpack and ReadTree accept from untrusted archives.
type Limits struct {
	MaxFiles int   // entries, directories included
	MaxBytes int64 // total uncompressed file bytes
	MaxFile  int64 // bytes of any one file
}

// DefaultLimits suit submissions: 10,000 entries, 1 GiB in total, 512 MiB per file.
var DefaultLimits = Limits{MaxFiles: 10000, MaxBytes: 1 << 30, MaxFile: 512 << 20}

// ErrUnsafeEntry reports an archive entry that would escape or confuse the tree it
// is unpacked into: an absolute or parent path, a link, a device, a duplicate.
var ErrUnsafeEntry = errors.New("unsafe archive entry")

// ErrLimit reports an archive over one of its Limits.
var ErrLimit = errors.New("archive exceeds limit")

// NewZstdWriter returns feval's pinned zstd encoder: default level (about zstd -3),
// one goroutine, checksums on, 8 MiB window. It writes each frame of a tree
// layer (TreeFrameSize). The options are part of the format: changing them
// changes compressed digests (uncompressed digests stay). How the input is cut
// into Write calls does not change the output.
func NewZstdWriter(w io.Writer) (*zstd.Encoder, error) {
	return zstd.NewWriter(w,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(true),
		zstd.WithWindowSize(1<<23),
		zstd.WithLowerEncoderMem(false),
	)
}

// NewZstdReader returns a decoder bounded to a 64 MiB window.
func NewZstdReader(r io.Reader) (*zstd.Decoder, error) {
	return zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20), zstd.WithDecoderMaxMemory(1<<30))
}

// zstdReaders keeps decoders for reuse: a new decoder allocates its history
// buffers (about 10 MB for a tree of a few MB), which is most of what reading
// a small tree costs.
var zstdReaders sync.Pool

// getZstdReader is NewZstdReader from the pool; give the decoder back with
// putZstdReader once it is no longer read (never Close it).
func getZstdReader(r io.Reader) (*zstd.Decoder, error) {
	if zr, ok := zstdReaders.Get().(*zstd.Decoder); ok {
		if err := zr.Reset(r); err == nil {
			return zr, nil
		}
		zr.Close()
	}
	return NewZstdReader(r)
}

// putZstdReader releases the decoder's input and returns it to the pool.
func putZstdReader(zr *zstd.Decoder) {
	if err := zr.Reset(nil); err != nil {
		zr.Close()
		return
	}
	zstdReaders.Put(zr)
}

// WriteTar writes the directory root as a normalised tar stream: entries in
// byte-wise path order, directories before their contents, paths relative with
// '/' separators, mode 0755 for directories and executables and 0644 for other
// files, mtime 0, uid and gid 0, no user or group names. Symbolic links and special
// files are refused, so a tree means the same thing wherever it is unpacked.
func WriteTar(w io.Writer, root string, prog func(n int64)) error {
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		if !d.Type().IsRegular() && !d.IsDir() {
			return fmt.Errorf("%s: %w: only regular files and directories can be packed", p, ErrUnsafeEntry)
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return err
	}
	rel := make([]string, len(paths))
	for i, p := range paths {
		r, _ := filepath.Rel(root, p)
		rel[i] = filepath.ToSlash(r)
	}
	idx := make([]int, len(paths))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return rel[idx[a]] < rel[idx[b]] })
	tw := tar.NewWriter(w)
	buf := make([]byte, 1<<20)
	for _, i := range idx {
		fi, err := os.Lstat(paths[i])
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: rel[i], Mode: 0o644, Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, rel[i]+"/", 0o755
		case fi.Mode().IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
			if fi.Mode()&0o100 != 0 {
				hdr.Mode = 0o755
			}
		default:
			return fmt.Errorf("%s: %w", paths[i], ErrUnsafeEntry)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(paths[i])
			if err != nil {
				return err
			}
			n, err := io.CopyBuffer(tw, io.LimitReader(f, hdr.Size), buf)
			f.Close()
			if err != nil {
				return err
			}
			if n != hdr.Size {
				return fmt.Errorf("%s changed while being packed", paths[i])
			}
			if prog != nil {
				prog(n)
			}
		}
	}
	return tw.Close()
}

// File is one regular file of an unpacked tree.
type File struct {
	Path string // slash-separated, relative
	Mode int64  // 0644 or 0755
	Data []byte
}

// ReadTree decodes a normalised tar stream into memory, refusing unsafe entries
// and anything over limits. Directories are implied by file paths.
func ReadTree(r io.Reader, lim Limits) ([]File, error) {
	var files []File
	err := walkTar(r, lim, func(hdr *tar.Header, body io.Reader) error {
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		// Size the buffer from the header (the tar reader delivers exactly
		// hdr.Size bytes or fails), but never allocate more up front than a
		// lying header could cost: the rest grows as bytes arrive.
		var buf bytes.Buffer
		buf.Grow(int(min(hdr.Size, 64<<20)) + bytes.MinRead)
		if _, err := buf.ReadFrom(body); err != nil {
			return err
		}
		b := buf.Bytes()
		files = append(files, File{Path: strings.TrimSuffix(hdr.Name, "/"), Mode: hdr.Mode, Data: b})
		return nil
	})
	return files, err
}

func walkTar(r io.Reader, lim Limits, fn func(*tar.Header, io.Reader) error) error {
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading archive: %w", err)
		}
		if n >= lim.MaxFiles {
			return fmt.Errorf("more than %d entries: %w", lim.MaxFiles, ErrLimit)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		clean := path.Clean(name)
		if name == "" || clean != name || path.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(name, "\\") {
			return fmt.Errorf("entry %q: %w", hdr.Name, ErrUnsafeEntry)
		}
		if seen[clean] {
			return fmt.Errorf("entry %q appears twice: %w", hdr.Name, ErrUnsafeEntry)
		}
		seen[clean] = true
		switch hdr.Typeflag {
		case tar.TypeDir:
		case tar.TypeReg:
			if hdr.Size > lim.MaxFile {
				return fmt.Errorf("entry %q has %d bytes, over %d: %w", hdr.Name, hdr.Size, lim.MaxFile, ErrLimit)
			}
			total += hdr.Size
			if total > lim.MaxBytes {
				return fmt.Errorf("more than %d bytes in total: %w", lim.MaxBytes, ErrLimit)
			}
		default:
			return fmt.Errorf("entry %q of type %q: %w", hdr.Name, hdr.Typeflag, ErrUnsafeEntry)
		}
		if err := fn(hdr, io.LimitReader(tr, hdr.Size)); err != nil {
			return err
		}
	}
}

// TreeFS presents unpacked files as a read-only fs.FS.
func TreeFS(files []File) fs.FS {
	m := fstest.MapFS{}
	for _, f := range files {
		m[f.Path] = &fstest.MapFile{Data: f.Data, Mode: fs.FileMode(f.Mode)}
	}
	return m
}

// LoadTree reads an artifact's single tree payload into memory within lim,
// reporting the bytes read to the context's Progress (cas.WithProgress).
func LoadTree(ctx context.Context, st cas.Store, art *Loaded, lim Limits) ([]File, error) {
	if len(art.Payloads) != 1 {
		return nil, fmt.Errorf("%s has %d payloads, want 1: %w", art.Desc.Digest, len(art.Payloads), ErrNotArtifact)
	}
	p := art.Payloads[0]
	if p.MediaType == MediaTypeFile {
		b, err := ReadPayload(ctx, st, p, lim.MaxFile)
		if err != nil {
			return nil, err
		}
		name := p.Annotations["org.opencontainers.image.title"]
		if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
			return nil, fmt.Errorf("%s: bad file name %q: %w", art.Desc.Digest, name, ErrUnsafeEntry)
		}
		return []File{{Path: name, Mode: 0o644, Data: b}}, nil
	}
	rc, err := OpenPayload(ctx, st, p)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	prog := cas.ProgressFrom(ctx)
	var size int64
	fmt.Sscan(p.Annotations[AnnotationContentSize], &size)
	prog.Start(size)
	defer prog.Done()
	r := &progressReader{r: rc, add: prog.Add}
	files, err := ReadTree(r, lim)
	if err != nil {
		return nil, err
	}
	// Reading to the end verifies the uncompressed digest.
	if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, err
	}
	return files, nil
}
