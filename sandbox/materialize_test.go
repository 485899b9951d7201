package sandbox_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/feval/feval/sandbox"
)

func TestMaterialize(t *testing.T) {
	dir, err := sandbox.Materialize(fstest.MapFS{
		"a.txt":     {Data: []byte("a"), Mode: 0o600},
		"sub/b.py":  {Data: []byte("b"), Mode: 0o700},
		"sub/empty": {Mode: fs.ModeDir | 0o700},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for p, want := range map[string]fs.FileMode{".": fs.ModeDir | 0o755, "a.txt": 0o644, "sub": fs.ModeDir | 0o755, "sub/b.py": 0o644} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sub", "b.py")); err != nil || string(b) != "b" {
		t.Errorf("sub/b.py: %q %v", b, err)
	}

	// A tree holding anything but directories and regular files is refused
	// and leaves nothing behind.
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "feval-tree-*"))
	_, err = sandbox.Materialize(fstest.MapFS{"ok.txt": {Data: []byte("x")}, "link": {Data: []byte("ok.txt"), Mode: fs.ModeSymlink}})
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a symbolic link: %v", err)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "feval-tree-*"))
	if len(after) > len(before) {
		t.Errorf("a refused tree left %v", after)
	}
}
