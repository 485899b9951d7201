package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// treeArtifact stores tarBytes as the tree payload of an artifact, with the
// content annotations a packer would write (contentDigest "" means the true
// digest of tarBytes), and loads it back.
func treeArtifact(t *testing.T, l *cas.Layout, tarBytes []byte, contentDigest digest.Digest) *Loaded {
	t.Helper()
	ctx := context.Background()
	var z bytes.Buffer
	zw, err := NewZstdWriter(&z)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(tarBytes)
	zw.Close()
	layer, err := PushBytes(ctx, l, MediaTypeTree, z.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if contentDigest == "" {
		contentDigest = digest.FromBytes(tarBytes)
	}
	layer.Annotations = map[string]string{
		AnnotationContentDigest: contentDigest.String(),
		AnnotationContentSize:   strconv.Itoa(len(tarBytes)),
		ocispec.AnnotationTitle: "tree.tar.zst",
	}
	desc, err := Write(ctx, l, Artifact{Kind: "submission", Record: map[string]string{"x": "y"}, Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		t.Fatal(err)
	}
	art, err := Load(ctx, l, desc)
	if err != nil {
		t.Fatal(err)
	}
	return art
}

func newLayout(t *testing.T) *cas.Layout {
	t.Helper()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// listTree returns "path mode [content]" for everything under dir.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s := filepath.ToSlash(rel) + " " + strconv.FormatUint(uint64(fi.Mode().Perm()), 8)
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			s += " " + string(b)
		} else if !fi.IsDir() {
			s += " " + fi.Mode().Type().String()
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func TestExtractTreeRoundTrip(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "sub", "deep"), 0o755)
	os.WriteFile(filepath.Join(src, "a.txt"), []byte("alpha"), 0o644)
	os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(src, "sub", "deep", "b.txt"), []byte("beta"), 0o600)
	os.MkdirAll(filepath.Join(src, "empty"), 0o700)
	l := newLayout(t)
	layer, err := PackTree(l, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	desc, err := Write(ctx, l, Artifact{Kind: "submission", Record: map[string]string{}, Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		t.Fatal(err)
	}
	art, err := Load(ctx, l, desc)
	if err != nil {
		t.Fatal(err)
	}
	old := setUmask(0o077)
	defer setUmask(old)
	dest := filepath.Join(t.TempDir(), "out")
	prog := &countingProgress{}
	res, err := Extract(ctx, l, art, dest, ExtractOptions{Progress: prog})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 3 || res.Content.Type != "tree" || res.Content.Digest.String() != layer.Annotations[AnnotationContentDigest] {
		t.Errorf("Extract = %+v", res)
	}
	// Modes as the format records them (0644, 0755; directories 0755), whatever
	// the umask.
	want := []string{"a.txt 644 alpha", "empty 755", "run.sh 755 #!/bin/sh\n", "sub 755", "sub/deep 755", "sub/deep/b.txt 644 beta"}
	if got := listTree(t, dest); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("extracted\n%q\nwant\n%q", got, want)
	}
	if prog.started != res.Content.Size || prog.added != res.Content.Size || !prog.done {
		t.Errorf("progress %+v, want %d bytes", prog, res.Content.Size)
	}
	// Packing what was extracted gives the same content.
	again, err := PackTree(l, dest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Annotations[AnnotationContentDigest] != layer.Annotations[AnnotationContentDigest] {
		t.Errorf("repacked content %s, want %s", again.Annotations[AnnotationContentDigest], layer.Annotations[AnnotationContentDigest])
	}
}

type countingProgress struct {
	started, added int64
	done           bool
}

func (p *countingProgress) Start(n int64) { p.started = n }
func (p *countingProgress) Add(n int64)   { p.added += n }
func (p *countingProgress) Done()         { p.done = true }

func TestExtractFile(t *testing.T) {
	l := newLayout(t)
	ctx := context.Background()
	layer, err := PushData(ctx, l, "notes.txt", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	desc, err := Write(ctx, l, Artifact{Kind: "trace", Record: map[string]string{}, Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		t.Fatal(err)
	}
	art, err := Load(ctx, l, desc)
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "out")
	if _, err := Extract(ctx, l, art, dest, ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := listTree(t, dest); len(got) != 1 || got[0] != "notes.txt 644 hello" {
		t.Errorf("extracted %q", got)
	}
}

// TestExtractRefusesHostileTrees: every hostile archive is refused, and
// neither the target nor any staging directory is left behind.
func TestExtractRefusesHostileTrees(t *testing.T) {
	reg := func(name string, size int64) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Size: size, Mode: 0o644}
	}
	dir := func(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755} }
	hugeHeader := func() []byte {
		// A header claiming a terabyte with no body behind it.
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(reg("big", 1<<40))
		return buf.Bytes()
	}
	cases := []struct {
		name   string
		tar    []byte
		digest digest.Digest // "" for the true one
		want   error
	}{
		{"parent path", tarOf(t, reg("../evil", 1)), "", ErrUnsafeEntry},
		{"parent path inside", tarOf(t, dir("a/"), reg("a/../../evil", 1)), "", ErrUnsafeEntry},
		{"absolute path", tarOf(t, reg("/tmp/evil", 1)), "", ErrUnsafeEntry},
		{"symlink out", tarOf(t, &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/tmp"}), "", ErrUnsafeEntry},
		{"symlink then file through it", tarOf(t, &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../.."}, reg("l/evil", 1)), "", ErrUnsafeEntry},
		{"hard link", tarOf(t, reg("a", 1), &tar.Header{Name: "b", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}), "", ErrUnsafeEntry},
		{"char device", tarOf(t, &tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}), "", ErrUnsafeEntry},
		{"block device", tarOf(t, &tar.Header{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8}), "", ErrUnsafeEntry},
		{"fifo", tarOf(t, &tar.Header{Name: "p", Typeflag: tar.TypeFifo}), "", ErrUnsafeEntry},
		{"duplicate", tarOf(t, reg("a", 1), reg("a", 1)), "", ErrUnsafeEntry},
		{"setuid file", tarOf(t, &tar.Header{Name: "su", Typeflag: tar.TypeReg, Size: 1, Mode: 0o4755}), "", ErrUnsafeEntry},
		{"world-writable file", tarOf(t, &tar.Header{Name: "w", Typeflag: tar.TypeReg, Size: 1, Mode: 0o666}), "", ErrUnsafeEntry},
		{"odd directory mode", tarOf(t, &tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o777}), "", ErrUnsafeEntry},
		{"file over the file limit", tarOf(t, reg("a", 11)), "", ErrLimit},
		{"huge size in a header", hugeHeader(), "", ErrLimit},
		{"too many entries", tarOf(t, reg("a", 1), reg("b", 1), reg("c", 1), reg("d", 1)), "", ErrLimit},
		{"file where a directory goes", tarOf(t, reg("a", 1), reg("a/b", 1)), "", nil},
		{"content digest mismatch", tarOf(t, reg("a", 1)), digest.FromString("something else"), cas.ErrDigestMismatch},
	}
	lim := Limits{MaxFiles: 3, MaxBytes: 100, MaxFile: 10}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLayout(t)
			art := treeArtifact(t, l, c.tar, c.digest)
			parent := t.TempDir()
			dest := filepath.Join(parent, "out")
			_, err := Extract(context.Background(), l, art, dest, ExtractOptions{Limits: lim})
			if err == nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Extract = %v, want %v", err, c.want)
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Errorf("left behind in the parent: %v", left)
			}
		})
	}
}

func TestExtractTarget(t *testing.T) {
	l := newLayout(t)
	art := treeArtifact(t, l, tarOf(t, &tar.Header{Name: "new.txt", Typeflag: tar.TypeReg, Size: 3, Mode: 0o644}), "")
	ctx := context.Background()

	t.Run("empty directory", func(t *testing.T) {
		dest := t.TempDir()
		if _, err := Extract(ctx, l, art, dest, ExtractOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := listTree(t, dest); len(got) != 1 || got[0] != "new.txt 644 xxx" {
			t.Errorf("extracted %q", got)
		}
	})
	t.Run("non-empty refused", func(t *testing.T) {
		dest := t.TempDir()
		os.WriteFile(filepath.Join(dest, "old.txt"), []byte("old"), 0o644)
		_, err := Extract(ctx, l, art, dest, ExtractOptions{})
		if !errors.Is(err, ErrTargetNotEmpty) {
			t.Fatalf("Extract = %v, want ErrTargetNotEmpty", err)
		}
		if got := listTree(t, dest); len(got) != 1 || got[0] != "old.txt 644 old" {
			t.Errorf("target changed: %q", got)
		}
	})
	t.Run("non-empty replaced", func(t *testing.T) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "out")
		os.MkdirAll(filepath.Join(dest, "sub"), 0o755)
		os.WriteFile(filepath.Join(dest, "sub", "old.txt"), []byte("old"), 0o644)
		if _, err := Extract(ctx, l, art, dest, ExtractOptions{Replace: true}); err != nil {
			t.Fatal(err)
		}
		if got := listTree(t, dest); len(got) != 1 || got[0] != "new.txt 644 xxx" {
			t.Errorf("extracted %q", got)
		}
		if left, _ := os.ReadDir(parent); len(left) != 1 {
			t.Errorf("parent holds %v, want only out", left)
		}
	})
	t.Run("failed replace keeps the old content", func(t *testing.T) {
		bad := treeArtifact(t, l, tarOf(t, &tar.Header{Name: "../x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}), "")
		dest := t.TempDir()
		os.WriteFile(filepath.Join(dest, "old.txt"), []byte("old"), 0o644)
		if _, err := Extract(ctx, l, bad, dest, ExtractOptions{Replace: true}); !errors.Is(err, ErrUnsafeEntry) {
			t.Fatalf("Extract = %v, want ErrUnsafeEntry", err)
		}
		if got := listTree(t, dest); len(got) != 1 || got[0] != "old.txt 644 old" {
			t.Errorf("target changed: %q", got)
		}
	})
	t.Run("symlink target refused", func(t *testing.T) {
		parent := t.TempDir()
		real := filepath.Join(parent, "real")
		os.Mkdir(real, 0o755)
		link := filepath.Join(parent, "link")
		os.Symlink(real, link)
		if _, err := Extract(ctx, l, art, link, ExtractOptions{}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("Extract = %v, want a refusal of the symbolic link", err)
		}
	})
	t.Run("file target refused", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "f")
		os.WriteFile(dest, []byte("x"), 0o644)
		if _, err := Extract(ctx, l, art, dest, ExtractOptions{Replace: true}); err == nil {
			t.Fatal("Extract onto a file succeeded")
		}
	})
}

func setUmask(m int) int { return syscall.Umask(m) }

// FuzzUnpack: arbitrary archives never panic, and whatever is written stays
// inside the target as regular files and directories with the format's modes.
func FuzzUnpack(f *testing.F) {
	f.Add(tarOf(f, &tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 3, Mode: 0o644}))
	f.Add(tarOf(f, &tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}, &tar.Header{Name: "d/b", Typeflag: tar.TypeReg, Size: 1, Mode: 0o755}))
	f.Add(tarOf(f, &tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: ".."}, &tar.Header{Name: "l/x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add(tarOf(f, &tar.Header{Name: "../x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add([]byte("not a tar"))
	lim := Limits{MaxFiles: 50, MaxBytes: 1 << 16, MaxFile: 1 << 14}
	f.Fuzz(func(t *testing.T, b []byte) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "out")
		if err := os.Mkdir(dest, 0o755); err != nil {
			t.Fatal(err)
		}
		unpackInto(dest, bytes.NewReader(b), lim)
		if left, _ := os.ReadDir(parent); len(left) != 1 {
			t.Fatalf("written beside the target: %v", left)
		}
		var total int64
		filepath.Walk(dest, func(p string, fi os.FileInfo, err error) error {
			if err != nil || p == dest {
				return err
			}
			switch {
			case fi.IsDir():
				if fi.Mode().Perm() != 0o755 {
					t.Fatalf("%s: directory mode %v", p, fi.Mode())
				}
			case fi.Mode().IsRegular():
				if m := fi.Mode().Perm(); m != 0o644 && m != 0o755 {
					t.Fatalf("%s: file mode %v", p, fi.Mode())
				}
				total += fi.Size()
			default:
				t.Fatalf("%s: %v is neither a file nor a directory", p, fi.Mode())
			}
			return nil
		})
		if total > lim.MaxBytes {
			t.Fatalf("wrote %d bytes, over the limit", total)
		}
	})
}
