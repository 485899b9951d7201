package bundle

import (
	"archive/tar"
	"bytes"
	"errors"
	"testing"
	"time"
)

var bytesTime = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

func tarOf(t testing.TB, hdrs ...*tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func TestReadTreeRefusesUnsafeEntries(t *testing.T) {
	cases := []struct {
		name string
		hdrs []*tar.Header
		want error
	}{
		{"parent path", []*tar.Header{{Name: "../evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}}, ErrUnsafeEntry},
		{"absolute path", []*tar.Header{{Name: "/etc/x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}}, ErrUnsafeEntry},
		{"symlink", []*tar.Header{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}}, ErrUnsafeEntry},
		{"hard link", []*tar.Header{{Name: "l", Typeflag: tar.TypeLink, Linkname: "a"}}, ErrUnsafeEntry},
		{"device", []*tar.Header{{Name: "d", Typeflag: tar.TypeChar}}, ErrUnsafeEntry},
		{"duplicate", []*tar.Header{{Name: "a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}, {Name: "a", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}}, ErrUnsafeEntry},
		{"unclean", []*tar.Header{{Name: "a/./b", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}}, ErrUnsafeEntry},
		{"file too big", []*tar.Header{{Name: "a", Typeflag: tar.TypeReg, Size: 11, Mode: 0o644}}, ErrLimit},
		{"too many files", []*tar.Header{{Name: "a", Typeflag: tar.TypeReg, Mode: 0o644}, {Name: "b", Typeflag: tar.TypeReg, Mode: 0o644}, {Name: "c", Typeflag: tar.TypeReg, Mode: 0o644}}, ErrLimit},
	}
	lim := Limits{MaxFiles: 2, MaxBytes: 100, MaxFile: 10}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadTree(bytes.NewReader(tarOf(t, c.hdrs...)), lim)
			if !errors.Is(err, c.want) {
				t.Fatalf("ReadTree = %v, want %v", err, c.want)
			}
		})
	}
}

// FuzzReadTree: arbitrary bytes never panic, and whatever is accepted has only
// safe, unique, clean paths within the limits.
func FuzzReadTree(f *testing.F) {
	f.Add(tarOf(f, &tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 3, Mode: 0o644}))
	f.Add(tarOf(f, &tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}, &tar.Header{Name: "d/b", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644}))
	f.Add([]byte("not a tar"))
	lim := Limits{MaxFiles: 50, MaxBytes: 1 << 16, MaxFile: 1 << 14}
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := ReadTree(bytes.NewReader(b), lim)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		var total int
		for _, fl := range files {
			if fl.Path == "" || fl.Path[0] == '/' || seen[fl.Path] || bytes.Contains([]byte(fl.Path), []byte("..")) && (fl.Path == ".." || bytes.HasPrefix([]byte(fl.Path), []byte("../"))) {
				t.Fatalf("unsafe path accepted: %q", fl.Path)
			}
			seen[fl.Path] = true
			total += len(fl.Data)
		}
		if total > int(lim.MaxBytes) {
			t.Fatalf("accepted %d bytes over the limit", total)
		}
	})
}
