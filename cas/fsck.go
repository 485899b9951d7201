package cas

import (
	"context"
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
	FindingDamagedIndex FindingKind = "damaged_index"
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
	if prog == nil {
		prog = NoProgress
	}
	var rep FsckReport
	bad := map[digest.Digest]FindingKind{}
	dir := filepath.Join(l.root, blobsDir, "sha256")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return rep, fmt.Errorf("reading %s: %w", dir, err)
	}
	var total int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			total += fi.Size()
		}
	}
	prog.Start(total)
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		name := e.Name()
		if strings.HasPrefix(name, ".ingest-") {
			continue // a write in progress, or one a crash left; never listed
		}
		d := digest.NewDigestFromEncoded(digest.SHA256, name)
		if d.Validate() != nil || e.IsDir() {
			rep.Findings = append(rep.Findings, Finding{Kind: FindingStrayFile, Path: filepath.Join(blobsDir, "sha256", name), Detail: "not a sha256 blob name"})
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return rep, err
		}
		h := digest.SHA256.Digester()
		n, err := io.Copy(h.Hash(), &countReader{r: f, p: prog})
		f.Close()
		if err != nil {
			return rep, err
		}
		rep.Blobs++
		rep.Bytes += n
		if got := h.Digest(); got != d {
			bad[d] = FindingCorrupt
			rep.Findings = append(rep.Findings, Finding{Kind: FindingCorrupt, Digest: d, Detail: "content hashes to " + got.String()})
		}
	}
	prog.Done()

	visited := map[digest.Digest]bool{}
	var walk func(desc ocispec.Descriptor, parent digest.Digest)
	walk = func(desc ocispec.Descriptor, parent digest.Digest) {
		if visited[desc.Digest] {
			return
		}
		visited[desc.Digest] = true
		fi, err := os.Stat(l.blobPath(desc.Digest))
		switch {
		case err != nil:
			rep.Findings = append(rep.Findings, Finding{Kind: FindingMissing, Digest: desc.Digest, Referrer: parent, Detail: "blob absent (" + desc.MediaType + ")"})
			return
		case fi.Size() != desc.Size:
			rep.Findings = append(rep.Findings, Finding{Kind: FindingSize, Digest: desc.Digest, Referrer: parent,
				Detail: fmt.Sprintf("%d bytes on disk, descriptor says %d", fi.Size(), desc.Size)})
			return
		case bad[desc.Digest] != "":
			return // already reported as corrupt
		}
		if !IsManifest(desc.MediaType) {
			return
		}
		rep.Manifests++
		node, _, err := FetchNode(ctx, l, desc)
		if err != nil {
			rep.Findings = append(rep.Findings, Finding{Kind: FindingUnparseable, Digest: desc.Digest, Referrer: parent, Detail: err.Error()})
			return
		}
		if node.Subject != nil {
			if _, err := os.Stat(l.blobPath(node.Subject.Digest)); err != nil {
				rep.Findings = append(rep.Findings, Finding{Kind: FindingMissingRoot, Digest: node.Subject.Digest, Referrer: desc.Digest, Detail: "subject absent"})
			}
		}
		for _, c := range node.Children {
			walk(c, desc.Digest)
		}
	}
	for _, m := range l.Manifests() {
		walk(m, "")
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.Digest != b.Digest {
			return a.Digest < b.Digest
		}
		return a.Kind < b.Kind
	})
	return rep, nil
}
