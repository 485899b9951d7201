package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing/fstest"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/gate"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// ContentTypeRollouts is the content type of a rollouts submission in format
// 3: the record's content names the rows index layer (docs/FORMAT.md).
const ContentTypeRollouts = "rollouts"

// RowsIndexTitle is the title of a format-3 submission's rows index layer.
const RowsIndexTitle = "rows.index"

// MaxRowsIndexBytes bounds a rows index read from a store (10,000 rows take
// about 0.7 MB).
const MaxRowsIndexBytes = 64 << 20

// maxPackedRows bounds the rows file read into memory to index it when
// packing; a larger one is packed as a tree.
const maxPackedRows = 1 << 30

// PackSubmission packs the submission at path (PackSubmissionSigner with a
// signer at hand).
func PackSubmission(ctx context.Context, l *cas.Layout, s *bundle.Signer, path string, opts bundle.PackOptions) (bundle.Packed, error) {
	return PackSubmissionSigner(ctx, l, func() (*bundle.Signer, error) { return s, nil }, path, opts)
}

// PackSubmissionSigner packs a submission directory. A rollouts submission
// that can be indexed (a directory holding exactly submission.json, without
// a claims file, and the rows file it names, every row valid and ending with
// a line feed, task ids unique: gate.EncodeRowsIndex) is packed in format 3:
// the rows index and the rows file as two raw layers, the record's content
// naming the index (docs/FORMAT.md "Rollouts submissions"). Anything else
// is packed as bundle.PackPathSigner packs it (a tree): formats 1 and 2, and
// submissions of other protocols. The artifact is published only once
// signed, as with PackPathSigner.
//
// A rollouts submission whose model_revision is the digest of a model
// artifact in the layout gets that model as its subject, so the submission's
// digest binds the model and a copy of the submission brings it along
// (CopySubmission); a model_revision that names something else in the layout
// is refused (ErrModelRevision).
func PackSubmissionSigner(ctx context.Context, l *cas.Layout, signer func() (*bundle.Signer, error), path string, opts bundle.PackOptions) (bundle.Packed, error) {
	if opts.Subject == nil {
		subj, _, err := ModelSubject(ctx, l, path)
		if err != nil {
			return bundle.Packed{}, err
		}
		opts.Subject = subj
	}
	rowsPath, rows, index, ok := indexableSubmission(path)
	if !ok {
		return bundle.PackPathSigner(ctx, l, signer, path, opts)
	}
	prog := opts.Progress
	if prog == nil {
		prog = cas.ProgressFrom(ctx)
	}
	return bundle.PackLayersSigner(ctx, l, signer, opts, func(w bundle.BlobWriter) ([]ocispec.Descriptor, bundle.Content, error) {
		prog.Start(int64(len(rows) + len(index)))
		defer prog.Done()
		ix, err := rawLayer(w, bundle.MediaTypeRowsIndex, RowsIndexTitle, index)
		if err != nil {
			return nil, bundle.Content{}, err
		}
		rl, err := rawLayer(w, bundle.MediaTypeRows, rowsPath, rows)
		if err != nil {
			return nil, bundle.Content{}, err
		}
		prog.Add(int64(len(rows) + len(index)))
		return []ocispec.Descriptor{ix, rl}, bundle.Content{Type: ContentTypeRollouts, Digest: ix.Digest, Size: ix.Size}, nil
	})
}

// ErrModelRevision reports a rollouts submission whose model_revision is the
// digest of an artifact in the store that is not a model artifact.
var ErrModelRevision = errors.New("model_revision is not a model artifact")

// ModelSubject returns the subject a rollouts submission directory is packed
// with: the model artifact its submission.json's model_revision names, when
// that is a sha256 digest of a manifest in l, and the model_revision read. It
// returns no subject for anything else (no submission.json, a git commit, a
// digest not in l): a task that binds rows to a model refuses such a
// submission when it is evaluated, and feval commit refuses it before
// anything is written.
func ModelSubject(ctx context.Context, l *cas.Layout, dir string) (subject *ocispec.Descriptor, revision string, err error) {
	meta, err := os.ReadFile(filepath.Join(dir, gate.RolloutSubmissionFile))
	if err != nil || len(meta) > gate.MaxRowsIndexMeta {
		return nil, "", nil
	}
	sub, vs := gate.ParseRolloutSubmission(meta)
	if len(vs) > 0 || !strings.HasPrefix(sub.ModelRevision, "sha256:") {
		return nil, sub.ModelRevision, nil
	}
	d, err := l.Resolve(ctx, sub.ModelRevision)
	if errors.Is(err, cas.ErrNotFound) {
		return nil, sub.ModelRevision, nil
	}
	if err != nil {
		return nil, "", err
	}
	node, _, err := cas.FetchNode(ctx, l, d)
	if err != nil {
		return nil, "", err
	}
	if node.ArtifactType != bundle.ArtifactTypeModelManifest {
		return nil, "", fmt.Errorf("%w: %s names a %q artifact", ErrModelRevision, sub.ModelRevision, node.ArtifactType)
	}
	return &ocispec.Descriptor{MediaType: d.MediaType, ArtifactType: node.ArtifactType, Digest: d.Digest, Size: d.Size}, sub.ModelRevision, nil
}

func rawLayer(w bundle.BlobWriter, mediaType, title string, b []byte) (ocispec.Descriptor, error) {
	d, err := w.WriteBlob(mediaType, func(out io.Writer) error { _, err := out.Write(b); return err })
	if err != nil {
		return d, err
	}
	d.Annotations = map[string]string{
		bundle.AnnotationContentDigest: d.Digest.String(),
		bundle.AnnotationContentSize:   strconv.FormatInt(d.Size, 10),
		ocispec.AnnotationTitle:        title,
	}
	return d, nil
}

// indexableSubmission reads a directory that is a rollouts submission format
// 3 can hold and returns its rows path, rows and index.
func indexableSubmission(dir string) (rowsPath string, rows, index []byte, ok bool) {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", nil, nil, false
	}
	meta, err := os.ReadFile(filepath.Join(dir, gate.RolloutSubmissionFile))
	if err != nil || len(meta) > gate.MaxRowsIndexMeta {
		return "", nil, nil, false
	}
	sub, vs := gate.ParseRolloutSubmission(meta)
	if len(vs) > 0 || sub.Claims != "" {
		return "", nil, nil, false
	}
	// Exactly the two files, and the directories leading to the rows file.
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".":
		case d.IsDir():
			if !isParent(rel, sub.Rows) {
				return errNotIndexable
			}
		case d.Type().IsRegular():
			files = append(files, rel)
		default:
			return errNotIndexable
		}
		return nil
	})
	if err != nil || len(files) != 2 {
		return "", nil, nil, false
	}
	for _, f := range files {
		if f != gate.RolloutSubmissionFile && f != sub.Rows {
			return "", nil, nil, false
		}
	}
	rfi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(sub.Rows)))
	if err != nil || rfi.Size() > maxPackedRows {
		return "", nil, nil, false
	}
	rows, err = os.ReadFile(filepath.Join(dir, filepath.FromSlash(sub.Rows)))
	if err != nil {
		return "", nil, nil, false
	}
	index, err = gate.EncodeRowsIndex(meta, rows)
	if err != nil {
		return "", nil, nil, false
	}
	return sub.Rows, rows, index, true
}

var errNotIndexable = errors.New("not an indexable rollouts submission")

func isParent(dir, file string) bool {
	for d := path.Dir(file); d != "."; d = path.Dir(d) {
		if d == dir {
			return true
		}
	}
	return false
}

// ErrSubmissionLayout reports a submission artifact whose layers are not one
// of the submission layouts (a tree, a file, or the two layers of a rollouts
// submission in format 3).
var ErrSubmissionLayout = fmt.Errorf("%w: submission layers", ErrMalformed)

// IsRowsIndexed reports whether a submission artifact has the layers of a
// rollouts submission in format 3.
func IsRowsIndexed(art *bundle.Loaded) bool {
	return len(art.Payloads) == 2 && art.Payloads[0].MediaType == bundle.MediaTypeRowsIndex
}

// RowsLayers checks the two layers of a format-3 submission and returns the
// index layer, the rows layer and the rows file's path. Both are raw: each
// content annotation must repeat the layer's digest and size; the rows
// layer's title is a clean relative path.
func RowsLayers(art *bundle.Loaded) (index, rows ocispec.Descriptor, rowsPath string, err error) {
	if !IsRowsIndexed(art) || art.Payloads[1].MediaType != bundle.MediaTypeRows {
		return index, rows, "", fmt.Errorf("%s: %w: want a rows index and a rows layer", art.Desc.Digest, ErrSubmissionLayout)
	}
	index, rows = art.Payloads[0], art.Payloads[1]
	for _, l := range []ocispec.Descriptor{index, rows} {
		if l.Annotations[bundle.AnnotationContentDigest] != l.Digest.String() || l.Annotations[bundle.AnnotationContentSize] != strconv.FormatInt(l.Size, 10) {
			return index, rows, "", fmt.Errorf("%s: %w: layer %s: a raw layer's content digest and size are its own", art.Desc.Digest, ErrSubmissionLayout, l.Digest)
		}
	}
	rowsPath = rows.Annotations[ocispec.AnnotationTitle]
	if !fs.ValidPath(rowsPath) || rowsPath == "." || rowsPath == gate.RolloutSubmissionFile {
		return index, rows, "", fmt.Errorf("%s: %w: rows layer title %q", art.Desc.Digest, ErrSubmissionLayout, rowsPath)
	}
	return index, rows, rowsPath, nil
}

// LoadSubmissionFS returns a submission's tree for the gate. A tree or file
// payload is read into memory (bundle.LoadTree). A format-3 rollouts
// submission is presented as the tree it was packed from, submission.json
// (from the index) and the rows file, without reading the rows: the tree
// implements gate.RowsIndexed, and the rows layer is fetched and verified
// only if the rows file is opened.
func LoadSubmissionFS(ctx context.Context, st cas.Store, art *bundle.Loaded) (fs.FS, error) {
	if !IsRowsIndexed(art) {
		files, err := bundle.LoadTree(ctx, st, art, bundle.DefaultLimits)
		if err != nil {
			return nil, err
		}
		return bundle.TreeFS(files), nil
	}
	ixl, rl, rowsPath, err := RowsLayers(art)
	if err != nil {
		return nil, err
	}
	index, err := ReadRowsIndex(ctx, st, ixl)
	if err != nil {
		return nil, err
	}
	x, err := gate.ParseRowsIndex(index, gate.RowsIndexLimits{})
	if err != nil {
		return nil, err
	}
	if x.RowsSize() != rl.Size {
		return nil, fmt.Errorf("%s: %w: the index describes %d bytes of rows, the rows layer has %d", art.Desc.Digest, gate.ErrRowsIndex, x.RowsSize(), rl.Size)
	}
	if rl.Size > bundle.DefaultLimits.MaxFile {
		return nil, fmt.Errorf("rows layer of %d bytes: %w", rl.Size, bundle.ErrLimit)
	}
	return &indexedTree{
		m:        fstest.MapFS{gate.RolloutSubmissionFile: {Data: x.Meta(), Mode: 0o644}, rowsPath: {Mode: 0o644}},
		rowsPath: rowsPath, rowsSize: rl.Size, index: index,
		load: func() ([]byte, error) { return cas.ReadAll(ctx, st, rl, rl.Size) },
	}, nil
}

// indexedTree is the tree of a format-3 submission: the rows file is read
// from its layer only when opened.
type indexedTree struct {
	m        fstest.MapFS // the rows file's entry is a placeholder for listings
	rowsPath string
	rowsSize int64
	index    []byte
	load     func() ([]byte, error)
	mu       sync.Mutex // guards rows
	rows     []byte
}

func (t *indexedTree) RowsIndex() []byte { return t.index }

func (t *indexedTree) Open(name string) (fs.File, error) {
	if name != t.rowsPath {
		return t.m.Open(name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rows == nil {
		b, err := t.load()
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		t.rows = b
	}
	return fstest.MapFS{name: {Data: t.rows, Mode: 0o644}}.Open(name)
}

func (t *indexedTree) ReadDir(name string) ([]fs.DirEntry, error) { return t.m.ReadDir(name) }

func (t *indexedTree) Stat(name string) (fs.FileInfo, error) {
	if name == t.rowsPath {
		return rowsInfo{name: path.Base(name), size: t.rowsSize}, nil
	}
	return t.m.Stat(name)
}

type rowsInfo struct {
	name string
	size int64
}

func (i rowsInfo) Name() string       { return i.name }
func (i rowsInfo) Size() int64        { return i.size }
func (i rowsInfo) Mode() fs.FileMode  { return 0o644 }
func (i rowsInfo) ModTime() time.Time { return time.Time{} }
func (i rowsInfo) IsDir() bool        { return false }
func (i rowsInfo) Sys() any           { return nil }

var (
	_ gate.RowsIndexed = (*indexedTree)(nil)
	_ fs.StatFS        = (*indexedTree)(nil)
)

// ExtractSubmission restores a format-3 rollouts submission under dest as
// the directory it was packed from: submission.json (from the rows index)
// and the rows file (the rows layer, verified whole), through
// bundle.ExtractFiles.
func ExtractSubmission(ctx context.Context, st cas.Store, art *bundle.Loaded, dest string, opts bundle.ExtractOptions) (bundle.Extracted, error) {
	ixl, rl, rowsPath, err := RowsLayers(art)
	if err != nil {
		return bundle.Extracted{}, err
	}
	var content bundle.ContentRecord
	if err := art.Decode(&content); err != nil {
		return bundle.Extracted{}, err
	}
	index, err := ReadRowsIndex(ctx, st, ixl)
	if err != nil {
		return bundle.Extracted{}, err
	}
	x, err := gate.ParseRowsIndex(index, gate.RowsIndexLimits{})
	if err != nil {
		return bundle.Extracted{}, err
	}
	lim := opts.Limits
	if lim == (bundle.Limits{}) {
		lim = bundle.DefaultLimits
	}
	if rl.Size > lim.MaxFile || rl.Size > lim.MaxBytes {
		return bundle.Extracted{}, fmt.Errorf("%s: rows of %d bytes, over the limit of %d: %w", art.Desc.Digest, rl.Size, min(lim.MaxFile, lim.MaxBytes), bundle.ErrLimit)
	}
	rows, err := cas.ReadAll(ctx, st, rl, rl.Size)
	if err != nil {
		return bundle.Extracted{}, fmt.Errorf("reading rows layer: %w", err)
	}
	return bundle.ExtractFiles(dest, []bundle.File{
		{Path: gate.RolloutSubmissionFile, Mode: 0o644, Data: x.Meta()},
		{Path: rowsPath, Mode: 0o644, Data: rows},
	}, content.Content, opts)
}

// ReadRowsIndex reads a rows index layer (at most MaxRowsIndexBytes) into a
// buffer of its size, verified against its digest.
func ReadRowsIndex(ctx context.Context, st cas.Store, layer ocispec.Descriptor) ([]byte, error) {
	if layer.Size > MaxRowsIndexBytes {
		return nil, fmt.Errorf("rows index %s is %d bytes, over the %d byte limit: %w", layer.Digest, layer.Size, MaxRowsIndexBytes, cas.ErrTooLarge)
	}
	rc, err := st.Fetch(ctx, layer)
	if err != nil {
		return nil, fmt.Errorf("reading rows index: %w", err)
	}
	defer rc.Close()
	// One byte more than the size: the store's reader verifies the digest
	// when it reaches the end.
	b := make([]byte, layer.Size+1)
	n, err := io.ReadFull(rc, b)
	if int64(n) != layer.Size || err != io.ErrUnexpectedEOF && err != io.EOF {
		if err == nil || err == io.ErrUnexpectedEOF || err == io.EOF {
			err = fmt.Errorf("%s: read %d of %d bytes: %w", layer.Digest, n, layer.Size, cas.ErrSizeMismatch)
		}
		return nil, fmt.Errorf("reading rows index: %w", err)
	}
	return b[:n:n], nil
}
