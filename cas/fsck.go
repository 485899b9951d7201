package cas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// FindingKind names a class of damage fsck reports.
type FindingKind string

// The kinds of findings.
const (
	FindingCorrupt      FindingKind = "corrupt"       // content does not hash to its name
	FindingMissing      FindingKind = "missing"       // referenced content is absent
	FindingSize         FindingKind = "size_mismatch" // length differs from the descriptor
	FindingUnparseable  FindingKind = "unparseable"   // a manifest that does not decode
	FindingStrayFile    FindingKind = "stray_file"    // a file in blobs/ that is not a blob name
	FindingMissingRoot  FindingKind = "missing_subject"
	FindingDamagedIndex FindingKind = "damaged_index"  // index.json does not decode
	FindingInvalidEntry FindingKind = "invalid_entry"  // an index.json entry that is not a valid manifest descriptor
	FindingIrregular    FindingKind = "not_regular"    // a blob that is a FIFO, device, directory or link to one
	FindingTempFile     FindingKind = "temporary_file" // left by a command that was killed while writing
)

// Finding is one problem fsck found, with the object it concerns.
type Finding struct {
	Kind   FindingKind   `json:"kind"`
	Digest digest.Digest `json:"digest,omitempty"`
	// Referrer is the manifest that references the object, when there is one.
	Referrer digest.Digest `json:"referrer,omitempty"`
	Path     string        `json:"path,omitempty"`
	Detail   string        `json:"detail"`
}

func (f Finding) Error() string {
	s := string(f.Kind) + ": "
	if f.Digest != "" {
		s += f.Digest.String()
	} else {
		s += f.Path
	}
	if f.Referrer != "" {
		s += " (referenced by " + f.Referrer.String() + ")"
	}
	return s + ": " + f.Detail
}

// FsckReport is the outcome of Fsck. It is clean when Findings is empty.
type FsckReport struct {
	Blobs     int       `json:"blobs"`
	Bytes     int64     `json:"bytes"`
	Manifests int       `json:"manifests"`
	Findings  []Finding `json:"findings"`
	// Repairs lists what a repair did, one sentence each; empty without repair.
	Repairs []string `json:"repairs,omitempty"`
}

// FsckOptions selects what Fsck does besides checking.
type FsckOptions struct {
	// Repair rebuilds a damaged index.json from the manifests found among the
	// blobs, drops invalid index entries, and removes temporary files whose writer
	// is gone.
	Repair   bool
	Progress Progress
}

// Err joins the findings into one error (nil when clean).
func (r FsckReport) Err() error {
	errs := make([]error, len(r.Findings))
	for i, f := range r.Findings {
		errs[i] = f
	}
	return errors.Join(errs...)
}

// Fsck re-hashes every blob in the layout and walks the closure of every manifest
// the index lists, reporting each missing, corrupt or unparseable object once.
func Fsck(ctx context.Context, l *Layout, prog Progress) (FsckReport, error) {
	return fsck(ctx, l, nil, FsckOptions{Progress: prog})
}

// FsckStore checks the layout at root like Fsck, but also opens a store whose
// index.json is damaged (reporting it) and, with opts.Repair, repairs what it can.
func FsckStore(ctx context.Context, root string, opts FsckOptions) (FsckReport, error) {
	l, indexErr, err := openForRepair(root)
	if err != nil {
		return FsckReport{}, err
	}
	return fsck(ctx, l, indexErr, opts)
}

func fsck(ctx context.Context, l *Layout, indexErr error, opts FsckOptions) (FsckReport, error) {
	prog := opts.Progress
	if prog == nil {
		prog = NoProgress
	}
	var rep FsckReport
	if indexErr != nil {
		rep.Findings = append(rep.Findings, Finding{Kind: FindingDamagedIndex, Path: indexFile, Detail: indexErr.Error()})
	}
	for _, b := range l.BadEntries() {
		if !strings.HasPrefix(b.Location, indexFile) {
			continue // a manifest: the walk below reports it
		}
		rep.Findings = append(rep.Findings, Finding{Kind: FindingInvalidEntry, Path: b.Location, Detail: b.Err.Error()})
	}
	bad := map[digest.Digest]FindingKind{}
	dir := filepath.Join(l.root, blobsDir, "sha256")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return rep, fmt.Errorf("reading %s: %w", dir, err)
	}
	var total int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			total += fi.Size()
		}
	}
	var temps []string
	var blobs []digest.Digest
	prog.Start(total)
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		name := e.Name()
		rel := filepath.Join(blobsDir, "sha256", name)
		if strings.HasPrefix(name, ".ingest-") {
			temps = append(temps, filepath.Join(dir, name))
			continue
		}
		d := digest.NewDigestFromEncoded(digest.SHA256, name)
		if d.Validate() != nil || e.IsDir() {
			rep.Findings = append(rep.Findings, Finding{Kind: FindingStrayFile, Path: rel, Detail: "not a sha256 blob name"})
			continue
		}
		f, err := openRegular(filepath.Join(dir, name))
		if errors.Is(err, ErrInvalid) {
			bad[d] = FindingIrregular
			rep.Findings = append(rep.Findings, Finding{Kind: FindingIrregular, Digest: d, Path: rel, Detail: "not a regular file; remove it and restore the blob with 'feval pull'"})
			continue
		}
		if err != nil {
			return rep, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return rep, err
		}
		h := digest.SHA256.Digester()
		n, err := io.Copy(h.Hash(), &countReader{r: io.LimitReader(f, fi.Size()), p: prog})
		f.Close()
		if err != nil {
			return rep, err
		}
		rep.Blobs++
		rep.Bytes += n
		if got := h.Digest(); got != d {
			bad[d] = FindingCorrupt
			rep.Findings = append(rep.Findings, Finding{Kind: FindingCorrupt, Digest: d, Detail: "content hashes to " + got.String()})
			continue
		}
		blobs = append(blobs, d)
	}
	prog.Done()
	rootTemps, _ := filepath.Glob(filepath.Join(l.root, "."+indexFile+"-*"))
	temps = append(temps, rootTemps...)

	visited := map[digest.Digest]bool{}
	var walk func(desc ocispec.Descriptor, parent digest.Digest) bool
	// walk reports whether desc's closure is complete and sound.
	walk = func(desc ocispec.Descriptor, parent digest.Digest) bool {
		if visited[desc.Digest] {
			return bad[desc.Digest] == ""
		}
		visited[desc.Digest] = true
		if err := checkDigest(desc); err != nil {
			bad[desc.Digest] = FindingInvalidEntry
			rep.Findings = append(rep.Findings, Finding{Kind: FindingInvalidEntry, Digest: desc.Digest, Referrer: parent, Detail: err.Error()})
			return false
		}
		fi, err := os.Stat(l.blobPath(desc.Digest))
		switch {
		case err != nil:
			bad[desc.Digest] = FindingMissing
			rep.Findings = append(rep.Findings, Finding{Kind: FindingMissing, Digest: desc.Digest, Referrer: parent, Detail: "blob absent (" + desc.MediaType + ")"})
			return false
		case fi.Size() != desc.Size && bad[desc.Digest] != FindingIrregular:
			bad[desc.Digest] = FindingSize
			rep.Findings = append(rep.Findings, Finding{Kind: FindingSize, Digest: desc.Digest, Referrer: parent,
				Detail: fmt.Sprintf("%d bytes on disk, descriptor says %d", fi.Size(), desc.Size)})
			return false
		case bad[desc.Digest] != "":
			return false // already reported
		}
		if !IsManifest(desc.MediaType) {
			return true
		}
		rep.Manifests++
		node, _, err := FetchNode(ctx, l, desc)
		if err != nil {
			bad[desc.Digest] = FindingUnparseable
			rep.Findings = append(rep.Findings, Finding{Kind: FindingUnparseable, Digest: desc.Digest, Referrer: parent, Detail: err.Error()})
			return false
		}
		if node.Subject != nil {
			if _, err := os.Stat(l.blobPath(node.Subject.Digest)); err != nil {
				rep.Findings = append(rep.Findings, Finding{Kind: FindingMissingRoot, Digest: node.Subject.Digest, Referrer: desc.Digest, Detail: "subject absent"})
			}
		}
		ok := true
		for _, c := range node.Children {
			ok = walk(c, desc.Digest) && ok
		}
		return ok
	}
	for _, m := range l.Manifests() {
		walk(m, "")
	}

	var live []string
	for _, t := range temps {
		if !opts.Repair {
			// An .ingest-* file whose writer holds its lock is a write in
			// progress, not damage.
			if filepath.Dir(t) == l.root || abandoned(t) {
				rep.Findings = append(rep.Findings, Finding{Kind: FindingTempFile, Path: relTo(l.root, t), Detail: "left by an interrupted write; 'feval fsck --repair' removes it"})
			}
			continue
		}
		var removed bool
		if filepath.Dir(t) == l.root {
			// index.json temporaries are written only under the store lock.
			removed, err = removeLocked(l.root, t)
		} else {
			removed, err = removeIfAbandoned(t)
		}
		if err != nil {
			return rep, err
		}
		if removed {
			rep.Repairs = append(rep.Repairs, "removed "+relTo(l.root, t))
		} else {
			live = append(live, t)
		}
	}
	if len(live) > 0 {
		rep.Repairs = append(rep.Repairs, fmt.Sprintf("kept %d temporary files that a running command is writing", len(live)))
	}
	if opts.Repair && (indexErr != nil || len(l.BadEntries()) > 0) {
		msg, err := rebuildIndex(ctx, l, indexErr != nil, blobs, bad)
		if err != nil {
			return rep, err
		}
		rep.Repairs = append(rep.Repairs, msg)
	}
	if opts.Repair {
		// What was repaired is no longer a finding.
		kept := rep.Findings[:0]
		for _, f := range rep.Findings {
			if f.Kind != FindingDamagedIndex && f.Kind != FindingInvalidEntry || f.Digest != "" {
				kept = append(kept, f)
			}
		}
		rep.Findings = kept
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.Digest != b.Digest {
			return a.Digest < b.Digest
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Kind < b.Kind
	})
	return rep, nil
}

func relTo(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}

// rebuildIndex rewrites index.json under the store lock. With fromBlobs (the old
// index is unreadable) it lists every blob that is, by its content, a manifest
// or index with a complete, sound closure; otherwise it keeps the readable
// entries and tags and drops the invalid ones.
func rebuildIndex(ctx context.Context, l *Layout, fromBlobs bool, blobs []digest.Digest, bad map[digest.Digest]FindingKind) (string, error) {
	unlock, err := lockExclusive(filepath.Join(l.root, lockFile))
	if err != nil {
		return "", fmt.Errorf("locking store %s: %w", l.root, err)
	}
	defer unlock()
	mans := map[digest.Digest]ocispec.Descriptor{}
	tags := map[string]ocispec.Descriptor{}
	if !fromBlobs {
		idx, err := readIndex(l.root)
		if err != nil {
			return "", err
		}
		mans, tags, _ = splitIndex(idx)
	} else {
		for _, d := range blobs {
			desc, ok := manifestByContent(ctx, l, d, bad)
			if ok {
				mans[d] = desc
			}
		}
	}
	if err := l.writeIndexLocked(mans, tags); err != nil {
		return "", err
	}
	if fromBlobs {
		return fmt.Sprintf("rebuilt %s from the blobs: %d manifests found by content; tags could not be recovered (re-tag with 'feval pull --tag' or 'feval ls')", indexFile, len(mans)), nil
	}
	return fmt.Sprintf("rewrote %s without its invalid entries: %d manifests, %d tags", indexFile, len(mans), len(tags)), nil
}

// manifestByContent reports whether blob d is an OCI manifest or index whose
// closure is present and sound, and describes it.
func manifestByContent(ctx context.Context, l *Layout, d digest.Digest, bad map[digest.Digest]FindingKind) (ocispec.Descriptor, bool) {
	fi, err := os.Stat(l.blobPath(d))
	if err != nil || fi.Size() > MaxManifestSize || fi.Size() == 0 {
		return ocispec.Descriptor{}, false
	}
	b, err := ReadAll(ctx, l, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: d, Size: fi.Size()}, MaxManifestSize)
	if err != nil {
		return ocispec.Descriptor{}, false
	}
	var probe struct {
		SchemaVersion int    `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
	}
	if json.Unmarshal(b, &probe) != nil || probe.SchemaVersion != 2 || !IsManifest(probe.MediaType) {
		return ocispec.Descriptor{}, false
	}
	desc := ocispec.Descriptor{MediaType: probe.MediaType, Digest: d, Size: fi.Size()}
	node, err := ParseNode(desc, b)
	if err != nil {
		return ocispec.Descriptor{}, false
	}
	for _, c := range node.Children {
		if bad[c.Digest] != "" {
			return ocispec.Descriptor{}, false
		}
		if ok, err := l.Exists(ctx, c); err != nil || !ok {
			return ocispec.Descriptor{}, false
		}
	}
	desc.ArtifactType = node.ArtifactType
	return desc, true
}

func removeLocked(root, path string) (bool, error) {
	unlock, err := lockExclusive(filepath.Join(root, lockFile))
	if err != nil {
		return false, err
	}
	defer unlock()
	if err := os.Remove(path); err != nil {
		return false, err
	}
	return true, nil
}
