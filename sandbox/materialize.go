package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Materialize writes the file tree fsys to a fresh host directory that the
// sandbox user can read (directories 0755, files 0644), for use as an input
// (Spec.Inputs), and returns its path; the caller removes it when done. Only
// directories and regular files are written: anything else in fsys is an
// error, and nothing is left behind on error.
func Materialize(fsys fs.FS) (string, error) {
	dir, err := os.MkdirTemp("", "feval-tree-")
	if err != nil {
		return "", err
	}
	err = os.Chmod(dir, 0o755)
	if err == nil {
		err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == "." {
				return err
			}
			dst := filepath.Join(dir, filepath.FromSlash(p))
			if d.IsDir() {
				return os.Mkdir(dst, 0o755)
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s is not a regular file", p)
			}
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o644)
		})
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
