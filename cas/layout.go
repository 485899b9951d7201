package cas

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

const (
	layoutFile = "oci-layout"
	indexFile  = "index.json"
	lockFile   = "feval.lock"
	blobsDir   = "blobs"
	// PrivateDir is the layout subdirectory where feval keeps local state that is
	// never pushed (salts, first-seen records).
	PrivateDir = "feval"
)

// Layout is a Store in a local OCI image layout directory. It is safe for
// concurrent use by goroutines and by processes: blobs are immutable files written
// atomically, and index.json is merged and replaced under an exclusive file lock.
type Layout struct {
	root string

	mu       sync.Mutex
	index    map[digest.Digest]ocispec.Descriptor // manifests listed in index.json
	tags     map[string]ocispec.Descriptor
	pending  map[digest.Digest]ocispec.Descriptor // manifests pushed, not yet saved
	ptags    map[string]ocispec.Descriptor        // tags set, not yet saved
	subjects map[digest.Digest][]ocispec.Descriptor
	scanned  map[digest.Digest]bool // manifests whose subject is in subjects
	bad      []BadEntry             // index.json entries and manifests skipped as invalid
	damaged  map[string][]error     // damaged manifests by the subject their bytes claim

	// Directories holding blobs renamed into place since the last Flush or
	// Close, which sync them before index.json can list what they hold.
	dmu   sync.Mutex
	dirty map[string]bool
}

// BadEntry is an entry of a store that was skipped because it is invalid, with
// where it was found.
type BadEntry struct {
	Location string // "index.json manifests[3]" or "blobs/sha256/<hex>"
	Err      error
}

// Init creates an empty layout at root, or does nothing if one is already there.
func Init(root string) (*Layout, error) {
	if err := os.MkdirAll(filepath.Join(root, blobsDir, "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("creating store %s: %w", root, err)
	}
	if err := os.MkdirAll(filepath.Join(root, PrivateDir), 0o700); err != nil {
		return nil, fmt.Errorf("creating store %s: %w", root, err)
	}
	if _, err := os.Stat(filepath.Join(root, layoutFile)); errors.Is(err, fs.ErrNotExist) {
		b, _ := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
		if err := writeFileAtomic(filepath.Join(root, layoutFile), b); err != nil {
			return nil, err
		}
	}
	l, err := OpenLayout(root)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, indexFile)); errors.Is(err, fs.ErrNotExist) {
		if err := l.Flush(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// OpenLayout opens an existing layout. It fails with ErrNoStore when root holds no
// oci-layout file.
func OpenLayout(root string) (*Layout, error) {
	b, err := os.ReadFile(filepath.Join(root, layoutFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (run 'feval init' or set --store)", root, ErrNoStore)
	}
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", root, err)
	}
	var lay ocispec.ImageLayout
	if err := json.Unmarshal(b, &lay); err != nil || lay.Version != ocispec.ImageLayoutVersion {
		return nil, fmt.Errorf("%s: oci-layout is damaged or of an unknown version: %w", root, ErrNoStore)
	}
	l := &Layout{root: root, pending: map[digest.Digest]ocispec.Descriptor{}, ptags: map[string]ocispec.Descriptor{}}
	idx, err := readIndex(root)
	if err != nil {
		return nil, err
	}
	l.index, l.tags, l.bad = splitIndex(idx)
	return l, nil
}

// openForRepair opens a layout whose index.json may be damaged: the damage is
// returned as indexErr instead of failing the open, and the layout then lists no
// manifests.
func openForRepair(root string) (l *Layout, indexErr error, err error) {
	if _, err := os.Stat(filepath.Join(root, layoutFile)); err != nil {
		return nil, nil, fmt.Errorf("%s: %w (run 'feval init' or set --store)", root, ErrNoStore)
	}
	l = &Layout{root: root, pending: map[digest.Digest]ocispec.Descriptor{}, ptags: map[string]ocispec.Descriptor{},
		index: map[digest.Digest]ocispec.Descriptor{}, tags: map[string]ocispec.Descriptor{}}
	idx, ierr := readIndex(root)
	if ierr != nil {
		return l, ierr, nil
	}
	l.index, l.tags, l.bad = splitIndex(idx)
	return l, nil, nil
}

// BadEntries lists the index.json entries and manifests the layout skipped as
// invalid since it was opened.
func (l *Layout) BadEntries() []BadEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.bad)
}

// Root returns the layout's directory.
func (l *Layout) Root() string { return l.root }

func readIndex(root string) (*ocispec.Index, error) {
	b, err := os.ReadFile(filepath.Join(root, indexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return &ocispec.Index{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading index of %s: %w", root, err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("%s/index.json is damaged (%v): %w", root, err, ErrDamagedIndex)
	}
	return &idx, nil
}

// ErrDamagedIndex reports an index.json that does not decode, which leaves the
// store unusable (it matches ErrNoStore) until 'feval fsck --repair' rebuilds
// the index from the blobs.
var ErrDamagedIndex error = &errWithMsg{msg: "run 'feval fsck' to check the store and 'feval fsck --repair' to rebuild its index", err: ErrNoStore}

// splitIndex separates index.json into manifests and tags, skipping (and
// returning) entries that are not valid manifest descriptors.
func splitIndex(idx *ocispec.Index) (map[digest.Digest]ocispec.Descriptor, map[string]ocispec.Descriptor, []BadEntry) {
	mans := map[digest.Digest]ocispec.Descriptor{}
	tags := map[string]ocispec.Descriptor{}
	var bad []BadEntry
	for i, d := range idx.Manifests {
		err := ValidateDescriptor(d)
		if err == nil && !IsManifest(d.MediaType) {
			err = fmt.Errorf("media type %q is not a manifest: %w", d.MediaType, ErrInvalid)
		}
		if err == nil && d.Size > MaxManifestSize {
			err = fmt.Errorf("manifest %s of %d bytes is over the %d byte limit: %w", d.Digest, d.Size, MaxManifestSize, ErrInvalid)
		}
		if err != nil {
			bad = append(bad, BadEntry{Location: fmt.Sprintf("%s manifests[%d]", indexFile, i), Err: err})
			continue
		}
		name := d.Annotations[ocispec.AnnotationRefName]
		plain := d
		plain.Annotations = nil
		mans[d.Digest] = plain
		if name != "" && ValidTag(name) {
			tags[name] = plain
		}
	}
	return mans, tags, bad
}

func (l *Layout) blobPath(d digest.Digest) string {
	return filepath.Join(l.root, blobsDir, d.Algorithm().String(), d.Encoded())
}

// Fetch implements Store.
func (l *Layout) Fetch(_ context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if err := checkDigest(desc); err != nil {
		return nil, err
	}
	f, err := openRegular(l.blobPath(desc.Digest))
	if err != nil {
		return nil, err
	}
	return NewVerifyReader(f, desc)
}

// checkDigest validates the digest and size a layout operation uses.
func checkDigest(desc ocispec.Descriptor) error {
	if err := desc.Digest.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrBadReference, err)
	}
	if desc.Digest.Algorithm() != digest.SHA256 {
		return fmt.Errorf("%s: only sha256 digests are accepted: %w", desc.Digest, ErrBadReference)
	}
	if desc.Size < 0 {
		return fmt.Errorf("%s: size %d: %w", desc.Digest, desc.Size, ErrInvalid)
	}
	return nil
}

// openRegular opens path for reading only if it is a regular file (after
// symbolic links): a FIFO, a device or a directory is ErrInvalid, and opening never
// blocks on a FIFO without a writer.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s): %w", path, fi.Mode().Type(), ErrInvalid)
	}
	return f, nil
}

// Exists implements Store.
func (l *Layout) Exists(_ context.Context, desc ocispec.Descriptor) (bool, error) {
	if err := checkDigest(desc); err != nil {
		return false, err
	}
	fi, err := os.Stat(l.blobPath(desc.Digest))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return fi.Mode().IsRegular() && fi.Size() == desc.Size, nil
}

// Push implements Store. The blob is durable when Push returns; a manifest becomes
// listed in index.json at the next Flush or Close.
func (l *Layout) Push(ctx context.Context, desc ocispec.Descriptor, r io.Reader) error {
	if err := checkDigest(desc); err != nil {
		return err
	}
	if IsManifest(desc.MediaType) && desc.Size > MaxManifestSize {
		return fmt.Errorf("manifest %s: %w", desc.Digest, ErrTooLarge)
	}
	var raw []byte
	if IsManifest(desc.MediaType) {
		// Manifests are small: keep them to record their artifact type in the index.
		b, err := io.ReadAll(io.LimitReader(r, desc.Size+1))
		if err != nil {
			return err
		}
		raw, r = b, bytes.NewReader(b)
	}
	target := l.blobPath(desc.Digest)
	if fi, err := os.Stat(target); err == nil && fi.Mode().IsRegular() && fi.Size() == desc.Size {
		_, _ = io.Copy(io.Discard, r)
	} else if err := l.ingest(batchOf(ctx), desc, r, target); err != nil {
		return err
	}
	if raw != nil {
		node, err := ParseNode(desc, raw)
		if err != nil {
			return err
		}
		l.mu.Lock()
		plain := ocispec.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, ArtifactType: node.ArtifactType}
		if _, ok := l.index[desc.Digest]; !ok {
			l.pending[desc.Digest] = plain
		}
		l.mu.Unlock()
	}
	return nil
}

// stageManifest writes a manifest's bytes without listing the manifest: a
// later Push finds them in place and lists it (cas.Copy writes manifests
// alongside blobs and lists them once the whole graph has arrived).
func (l *Layout) stageManifest(ctx context.Context, desc ocispec.Descriptor, raw []byte) error {
	if err := checkDigest(desc); err != nil {
		return err
	}
	if desc.Size > MaxManifestSize {
		return fmt.Errorf("manifest %s: %w", desc.Digest, ErrTooLarge)
	}
	target := l.blobPath(desc.Digest)
	if fi, err := os.Stat(target); err == nil && fi.Mode().IsRegular() && fi.Size() == desc.Size {
		return nil
	}
	return l.ingest(batchOf(ctx), desc, bytes.NewReader(raw), target)
}

// ingest writes the blob desc from r under a temporary name and verifies it;
// then, unless batch takes it (see syncBatch), syncs it and names it target.
func (l *Layout) ingest(batch *syncBatch, desc ocispec.Descriptor, r io.Reader, target string) error {
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := createTemp(dir)
	if err != nil {
		return fmt.Errorf("writing %s: %w", desc.Digest, err)
	}
	held := false
	defer func() {
		if !held {
			os.Remove(tmp.Name())
		}
	}()
	vr, err := verified(r, desc)
	if err != nil {
		tmp.Close()
		return err
	}
	// A small blob gets a small buffer: a pull of many small blobs would
	// otherwise allocate (and the runtime zero and collect) ioBuffer each.
	if _, err := io.CopyBuffer(newWritebackFile(tmp), vr, make([]byte, min(ioBuffer, max(desc.Size+1, 512)))); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", desc.Digest, err)
	}
	if batch != nil {
		startWriteback(tmp)
		if batch.hold(tmp, target) {
			held = true
			return nil
		}
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return err
	}
	// The name is made durable before index.json may list the blob: at the
	// next Flush or Close, once for all the blobs written until then.
	l.markDirty(dir)
	return nil
}

func (l *Layout) markDirty(dir string) {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	if l.dirty == nil {
		l.dirty = map[string]bool{}
	}
	l.dirty[dir] = true
}

// takeDirty returns the directories to sync and forgets them.
func (l *Layout) takeDirty() []string {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	var out []string
	for d := range l.dirty {
		out = append(out, d)
	}
	l.dirty = nil
	return out
}

// Tag implements Store. The tag is saved at the next Flush or Close.
func (l *Layout) Tag(ctx context.Context, desc ocispec.Descriptor, tag string) error {
	if !ValidTag(tag) {
		return fmt.Errorf("tag %q: %w (letters, digits, '_', '.', '-'; at most 128)", tag, ErrBadReference)
	}
	if ok, err := l.Exists(ctx, desc); err != nil || !ok {
		return fmt.Errorf("tagging %s: %w", desc.Digest, ErrNotFound)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	plain := ocispec.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, ArtifactType: desc.ArtifactType}
	// A descriptor from a registry's tag lookup carries no artifact type:
	// the one the layout lists the manifest with is kept, so that the tag
	// does not hide what the manifest is.
	for _, known := range []map[digest.Digest]ocispec.Descriptor{l.pending, l.index} {
		if k, ok := known[desc.Digest]; ok && plain.ArtifactType == "" {
			plain.ArtifactType = k.ArtifactType
		}
	}
	l.ptags[tag] = plain
	if _, ok := l.index[desc.Digest]; !ok {
		l.pending[desc.Digest] = plain
	}
	return nil
}

// Resolve implements Store. ref is a tag or a full digest; see ResolvePrefix for
// abbreviated digests.
func (l *Layout) Resolve(_ context.Context, ref string) (ocispec.Descriptor, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, err := digest.Parse(ref); err == nil {
		if desc, ok := l.pending[d]; ok {
			return desc, nil
		}
		if desc, ok := l.index[d]; ok {
			return desc, nil
		}
		return ocispec.Descriptor{}, fmt.Errorf("%s: %w", ref, ErrNotFound)
	}
	if desc, ok := l.ptags[ref]; ok {
		return desc, nil
	}
	if desc, ok := l.tags[ref]; ok {
		return desc, nil
	}
	return ocispec.Descriptor{}, fmt.Errorf("%s: %w", ref, ErrNotFound)
}

// Manifests returns every manifest the layout lists (saved or pending), sorted by
// digest.
func (l *Layout) Manifests() []ocispec.Descriptor {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.manifestsLocked()
}

func (l *Layout) manifestsLocked() []ocispec.Descriptor {
	out := make([]ocispec.Descriptor, 0, len(l.index)+len(l.pending))
	for _, d := range l.index {
		out = append(out, d)
	}
	for d, desc := range l.pending {
		if _, ok := l.index[d]; !ok {
			out = append(out, desc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest < out[j].Digest })
	return out
}

// Tags returns every tag with the manifest it names, sorted by tag.
func (l *Layout) Tags() map[string]ocispec.Descriptor {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]ocispec.Descriptor, len(l.tags)+len(l.ptags))
	for t, d := range l.tags {
		out[t] = d
	}
	for t, d := range l.ptags {
		out[t] = d
	}
	return out
}

// Referrers implements Store by reading the subject of every listed manifest once
// per process and indexing it.
func (l *Layout) Referrers(ctx context.Context, subject ocispec.Descriptor, artifactType string) ([]ocispec.Descriptor, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.subjects == nil {
		l.subjects = map[digest.Digest][]ocispec.Descriptor{}
		l.scanned = map[digest.Digest]bool{}
	}
	for _, m := range l.manifestsLocked() {
		if l.scanned[m.Digest] {
			continue
		}
		b, err := l.readManifestLocked(m)
		var node Node
		if err == nil {
			node, err = ParseNode(m, b)
		}
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				continue // fsck reports it
			}
			if isDamage(err) {
				// A damaged or hostile manifest does not stop commands about other
				// artifacts: it is recorded for fsck and reported only to lookups
				// of the subject its (unverified) bytes claim, if any.
				l.scanned[m.Digest] = true
				l.bad = append(l.bad, BadEntry{Location: filepath.Join(blobsDir, "sha256", m.Digest.Encoded()), Err: err})
				if claimed := l.claimedSubject(m); claimed != "" {
					if l.damaged == nil {
						l.damaged = map[string][]error{}
					}
					l.damaged[claimed] = append(l.damaged[claimed], fmt.Errorf("referrer %s: %w", m.Digest, err))
				}
				continue
			}
			return nil, err
		}
		l.scanned[m.Digest] = true
		if node.Subject == nil {
			continue
		}
		d := m
		d.ArtifactType = node.ArtifactType
		l.subjects[node.Subject.Digest] = append(l.subjects[node.Subject.Digest], d)
	}
	if errs := l.damaged[subject.Digest.String()]; len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var out []ocispec.Descriptor
	for _, d := range l.subjects[subject.Digest] {
		if artifactType == "" || d.ArtifactType == artifactType {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest < out[j].Digest })
	return out, nil
}

func (l *Layout) readManifestLocked(m ocispec.Descriptor) ([]byte, error) {
	if m.Size > MaxManifestSize {
		return nil, fmt.Errorf("manifest %s: %w", m.Digest, ErrTooLarge)
	}
	f, err := openRegular(l.blobPath(m.Digest))
	if err != nil {
		return nil, err
	}
	rc, err := NewVerifyReader(f, m)
	if err != nil {
		f.Close()
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Flush saves pending manifests and tags to index.json: it takes the layout's
// exclusive lock, re-reads the index another process may have saved, merges, and
// replaces the file atomically. Entries are sorted, so the file is stable.
func (l *Layout) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	unlock, err := lockExclusive(filepath.Join(l.root, lockFile))
	if err != nil {
		return fmt.Errorf("locking store %s: %w", l.root, err)
	}
	defer unlock()
	idx, err := readIndex(l.root)
	if err != nil {
		return err
	}
	mans, tags, _ := splitIndex(idx)
	for d, desc := range l.pending {
		mans[d] = desc
	}
	for t, desc := range l.ptags {
		tags[t] = desc
		mans[desc.Digest] = desc
	}
	if err := l.writeIndexLocked(mans, tags, l.takeDirty()...); err != nil {
		return err
	}
	l.index, l.tags = mans, tags
	for d := range l.index {
		delete(l.pending, d)
	}
	l.ptags = map[string]ocispec.Descriptor{}
	return nil
}

// writeIndexLocked replaces index.json with mans and tags, sorted; the caller
// holds the store lock.
//
// The directories dirs are synced alongside the new index's own bytes,
// before it replaces the old one.
func (l *Layout) writeIndexLocked(mans map[digest.Digest]ocispec.Descriptor, tags map[string]ocispec.Descriptor, dirs ...string) error {
	out := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}}
	tagged := map[digest.Digest]bool{}
	tagNames := make([]string, 0, len(tags))
	for t := range tags {
		tagNames = append(tagNames, t)
	}
	sort.Strings(tagNames)
	for _, t := range tagNames {
		d := tags[t]
		d.Annotations = map[string]string{ocispec.AnnotationRefName: t}
		out.Manifests = append(out.Manifests, d)
		tagged[d.Digest] = true
	}
	digests := make([]digest.Digest, 0, len(mans))
	for d := range mans {
		if !tagged[d] {
			digests = append(digests, d)
		}
	}
	sort.Slice(digests, func(i, j int) bool { return digests[i] < digests[j] })
	for _, d := range digests {
		out.Manifests = append(out.Manifests, mans[d])
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return err
	}
	if err := writeFileAtomicSyncing(filepath.Join(l.root, indexFile), buf.Bytes(), dirs); err != nil {
		return fmt.Errorf("saving index of %s: %w", l.root, err)
	}
	return nil
}

// Close implements Store: it saves pending index entries.
func (l *Layout) Close() error {
	l.mu.Lock()
	dirty := len(l.pending) > 0 || len(l.ptags) > 0
	l.mu.Unlock()
	if dirty {
		return l.Flush()
	}
	for _, d := range l.takeDirty() {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// BlobPath returns where the layout keeps the blob d (for fsck and tests).
func (l *Layout) BlobPath(d digest.Digest) string { return l.blobPath(d) }

// ioBuffer is the buffer size for moving blobs between files and connections.
const ioBuffer = 256 << 10

// writeFileAtomic writes b to path through a temporary file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory.
func writeFileAtomic(path string, b []byte) error { return writeFileAtomicSyncing(path, b, nil) }

// writeFileAtomicSyncing is writeFileAtomic that also syncs the directories
// dirs, at the same time as the new file's bytes and before the rename.
func writeFileAtomicSyncing(path string, b []byte, dirs []string) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	errs := make([]error, len(dirs)+1)
	var wg sync.WaitGroup
	for i, d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i+1] = syncDir(d)
		}()
	}
	errs[0] = tmp.Sync()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// WriteFileAtomic is writeFileAtomic for feval's private state files.
func WriteFileAtomic(path string, b []byte) error { return writeFileAtomic(path, b) }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !strings.Contains(err.Error(), "invalid argument") {
		return err
	}
	return nil
}

// WriteBlob streams the content fill produces into the layout and names it by the
// digest of what was written: one pass, no second copy. The blob is durable when
// WriteBlob returns.
func (l *Layout) WriteBlob(mediaType string, fill func(w io.Writer) error) (ocispec.Descriptor, error) {
	st, err := l.StageBlob(mediaType, fill)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return st.Desc, st.Publish()
}

// Staged is a blob written and made durable under a temporary name, not yet in
// the store: Publish gives it its name, Discard removes it. Until then no reader
// of the store sees it; if the process dies first, the temporary file is left
// for 'feval fsck --repair' to remove.
type Staged struct {
	Desc ocispec.Descriptor
	l    *Layout
	tmp  *os.File // held open: its lock marks the write as live
}

// stageTemp creates the temporary file a staged blob is written to, and the
// function that removes it and returns the error that ended the write.
func (l *Layout) stageTemp() (*os.File, func(error) (*Staged, error), error) {
	tmp, err := createTemp(filepath.Join(l.root, blobsDir, "sha256"))
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*Staged, error) {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return tmp, fail, nil
}

// StageBlob is WriteBlob up to, but not including, naming the blob.
func (l *Layout) StageBlob(mediaType string, fill func(w io.Writer) error) (*Staged, error) {
	tmp, fail, err := l.stageTemp()
	if err != nil {
		return nil, err
	}
	h := digest.SHA256.Digester()
	cw := &countWriter{w: io.MultiWriter(newWritebackFile(tmp), h.Hash())}
	bw := bufio.NewWriterSize(cw, 1<<20)
	if err := fill(bw); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	return &Staged{Desc: ocispec.Descriptor{MediaType: mediaType, Digest: h.Digest(), Size: cw.n}, l: l, tmp: tmp}, nil
}

// Publish names the staged blob by its digest; it is durable when Publish
// returns.
func (s *Staged) Publish() error {
	if s.tmp == nil {
		return fmt.Errorf("blob %s: already published or discarded", s.Desc.Digest)
	}
	tmp := s.tmp
	s.tmp = nil
	defer os.Remove(tmp.Name()) // after a failed rename
	if err := os.Rename(tmp.Name(), s.l.blobPath(s.Desc.Digest)); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(tmp.Name()))
}

// Discard removes the staged blob; it is a no-op after Publish or Discard.
func (s *Staged) Discard() {
	if s.tmp == nil {
		return
	}
	s.tmp.Close()
	os.Remove(s.tmp.Name())
	s.tmp = nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// isDamage reports whether err says content is damaged or hostile (as opposed
// to an I/O failure of the machine).
func isDamage(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, ErrDigestMismatch) || errors.Is(err, ErrSizeMismatch) ||
		errors.Is(err, ErrTooLarge) || errors.Is(err, ErrBadReference)
}

// claimedSubject returns the subject digest a manifest's bytes claim, read
// without verification (bounded, regular files only), or "".
func (l *Layout) claimedSubject(m ocispec.Descriptor) string {
	f, err := openRegular(l.blobPath(m.Digest))
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxManifestSize))
	if err != nil {
		return ""
	}
	var probe struct {
		Subject *struct {
			Digest string `json:"digest"`
		} `json:"subject"`
	}
	if json.Unmarshal(b, &probe) != nil || probe.Subject == nil {
		return ""
	}
	return probe.Subject.Digest
}
