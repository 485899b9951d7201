package bundle

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
)

// ExtractFiles restores files the caller has read and verified (a rollouts
// submission in format 3, whose tree is two layers) under dest, the way
// Extract restores a tree: into a fresh staging directory through an
// os.Root, paths relative and clean, files 0644, directories 0755, then
// installed onto dest atomically (dest must not exist, be empty, or, with
// Replace, be a directory). c is reported as the content; opts.Limits bound
// the files.
func ExtractFiles(dest string, files []File, c Content, opts ExtractOptions) (Extracted, error) {
	lim := opts.Limits
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	var total int64
	for _, f := range files {
		if !fs.ValidPath(f.Path) || f.Path == "." {
			return Extracted{}, fmt.Errorf("path %q: %w", f.Path, ErrUnsafeEntry)
		}
		total += int64(len(f.Data))
		if int64(len(f.Data)) > lim.MaxFile || total > lim.MaxBytes {
			return Extracted{}, fmt.Errorf("%s: over the limit of %d bytes: %w", f.Path, min(lim.MaxBytes, lim.MaxFile), ErrLimit)
		}
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
	root, err := os.OpenRoot(staging)
	if err != nil {
		return Extracted{}, err
	}
	defer root.Close()
	if opts.Progress != nil {
		opts.Progress.Start(total)
		defer opts.Progress.Done()
	}
	for _, f := range files {
		if d := path.Dir(f.Path); d != "." {
			if err := mkdirAll(root, d); err != nil {
				return Extracted{}, err
			}
		}
		if err := writeRootFile(root, f.Path, 0o644, bytes.NewReader(f.Data), int64(len(f.Data))); err != nil {
			return Extracted{}, err
		}
		if opts.Progress != nil {
			opts.Progress.Add(int64(len(f.Data)))
		}
	}
	if err := syncTree(staging); err != nil {
		return Extracted{}, err
	}
	if err := install(staging, dest, replace); err != nil {
		return Extracted{}, err
	}
	done = true
	return Extracted{Dir: dest, Content: c, Files: len(files)}, nil
}
