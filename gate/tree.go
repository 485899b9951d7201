package gate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
)

// Tree-level rule names shared by every gate.
const (
	RuleMissingFile  = "missing-file"
	RuleExtraFile    = "extra-file"
	RuleSymlink      = "symlink"
	RuleSpecialFile  = "special-file"
	RuleFileTooLarge = "file-too-large"
	RuleTotalSize    = "total-size"
	RuleTooManyFiles = "too-many-files"
	RuleFileName     = "file-name"
)

// treeFile is one regular file of a submission tree.
type treeFile struct {
	path string
	size int64 // as reported by the file system; reads never trust it
}

// tree is the listing of a submission tree: its regular files and its
// directories, by slash-separated path, both sorted. truncated is set when
// the tree holds more files than were listed; nothing but the tree
// violations should be judged then.
type tree struct {
	files     []treeFile
	dirs      []string
	truncated bool
}

func (t *tree) has(path string) bool {
	for _, f := range t.files {
		if f.path == path {
			return true
		}
	}
	return false
}

// listTree walks fsys and lists its regular files and directories. Symbolic
// links and special files (devices, pipes, sockets) are violations and are
// not listed. Walking stops adding files after maxFiles and reports
// too-many-files once. An error is returned only when the tree cannot be
// read.
func listTree(fsys fs.FS, maxFiles int) (*tree, []Violation, error) {
	t := &tree{}
	var vs []Violation
	tooMany := false
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walking %s: %w", p, err)
		}
		if p == "." {
			if !d.IsDir() {
				return fmt.Errorf("submission root is not a directory")
			}
			return nil
		}
		mode := d.Type()
		switch {
		case mode&fs.ModeSymlink != 0:
			vs = append(vs, Violation{Rule: RuleSymlink, Path: p, Detail: "symbolic links are not allowed"})
			return nil
		case d.IsDir():
			t.dirs = append(t.dirs, p)
			return nil
		case !mode.IsRegular():
			vs = append(vs, Violation{Rule: RuleSpecialFile, Path: p, Detail: fmt.Sprintf("not a regular file (mode %v)", mode)})
			return nil
		}
		if len(t.files) >= maxFiles {
			if !tooMany {
				vs = append(vs, Violation{Rule: RuleTooManyFiles, Detail: fmt.Sprintf("more than %d files", maxFiles)})
				tooMany = true
				t.truncated = true
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		t.files = append(t.files, treeFile{path: p, size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(t.files, func(i, j int) bool { return t.files[i].path < t.files[j].path })
	sort.Strings(t.dirs)
	return t, vs, nil
}

// errTooLarge reports that a file exceeds the size it was read with.
var errTooLarge = errors.New("file too large")

// readLimited reads the whole of name from fsys, failing with errTooLarge when
// it holds more than max bytes. It never trusts the size the file system
// reports.
func readLimited(fsys fs.FS, name string, max int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(data)) > max {
		return nil, errTooLarge
	}
	return data, nil
}

// tooLarge builds the file-too-large violation for path.
func tooLarge(path string, max int64) Violation {
	return Violation{Rule: RuleFileTooLarge, Path: path, Detail: fmt.Sprintf("larger than %d bytes", max)}
}
