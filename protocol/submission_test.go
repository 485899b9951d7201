package protocol

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/gate"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

const (
	subMeta = `{"model_revision":"0123456789abcdef0123456789abcdef01234567","rows":"rows.jsonl"}`
	subRows = `{"response":"a","reward_claimed":"1","task_id":"t2"}` + "\n" + `{"response":"b","reward_claimed":"0","task_id":"t1"}` + "\n"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestPackSubmissionFormats: a rollouts submission that can be indexed is
// packed in format 3; anything else as a tree, as before.
func TestPackSubmissionFormats(t *testing.T) {
	ctx := context.Background()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	s := newSigner(t)
	for name, c := range map[string]struct {
		files map[string]string
		want  string
	}{
		"rollouts":             {map[string]string{"submission.json": subMeta, "rows.jsonl": subRows}, ContentTypeRollouts},
		"rows in a directory":  {map[string]string{"submission.json": `{"model_revision":"0123456789abcdef0123456789abcdef01234567","rows":"d/rows.jsonl"}`, "d/rows.jsonl": subRows}, ContentTypeRollouts},
		"an extra file":        {map[string]string{"submission.json": subMeta, "rows.jsonl": subRows, "notes.txt": "x"}, "tree"},
		"a claims file":        {map[string]string{"submission.json": `{"claims":"c.tsv","model_revision":"0123456789abcdef0123456789abcdef01234567","rows":"rows.jsonl"}`, "rows.jsonl": subRows, "c.tsv": "t2\t1\nt1\t0\n"}, "tree"},
		"an invalid row":       {map[string]string{"submission.json": subMeta, "rows.jsonl": subRows + "{}\n"}, "tree"},
		"not a rollouts":       {map[string]string{"optimizer.py": "x = 1\n"}, "tree"},
		"unpinned revision":    {map[string]string{"submission.json": `{"model_revision":"main","rows":"rows.jsonl"}`, "rows.jsonl": subRows}, "tree"},
		"rows file is missing": {map[string]string{"submission.json": subMeta}, "tree"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := writeTree(t, c.files)
			p, err := PackSubmission(ctx, l, s, dir, bundle.PackOptions{Kind: KindSubmission})
			if err != nil {
				t.Fatal(err)
			}
			if p.Content.Type != c.want {
				t.Fatalf("packed as %q, want %q", p.Content.Type, c.want)
			}
			art, err := bundle.Load(ctx, l, p.Artifact.OCI())
			if err != nil {
				t.Fatal(err)
			}
			fsys, err := LoadSubmissionFS(ctx, l, art)
			if err != nil {
				t.Fatal(err)
			}
			// The tree the gate sees is the directory that was packed.
			for name, data := range c.files {
				b, err := fs.ReadFile(fsys, name)
				if err != nil || string(b) != data {
					t.Errorf("%s: %q %v", name, b, err)
				}
				if fi, err := fs.Stat(fsys, name); err != nil || fi.Size() != int64(len(data)) {
					t.Errorf("stat %s: %v %v", name, fi, err)
				}
			}
			_, indexed := fsys.(gate.RowsIndexed)
			if indexed != (c.want == ContentTypeRollouts) {
				t.Errorf("tree implements RowsIndexed: %v", indexed)
			}
		})
	}
}

// TestPackSubmissionFailedSignerLeavesNothing: format 3 is staged like a
// tree: a signer that fails leaves no blob behind.
func TestPackSubmissionFailedSignerLeavesNothing(t *testing.T) {
	ctx := context.Background()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	dir := writeTree(t, map[string]string{"submission.json": subMeta, "rows.jsonl": subRows})
	wrong := errors.New("wrong password")
	_, err = PackSubmissionSigner(ctx, l, func() (*bundle.Signer, error) { return nil, wrong }, dir, bundle.PackOptions{Kind: KindSubmission})
	if !errors.Is(err, wrong) {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(l.Root(), "blobs", "sha256"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Fatalf("%d blobs left behind", len(ents))
	}
}

// TestExtractSubmission: a format-3 submission unpacks to the directory it
// was packed from, byte for byte.
func TestExtractSubmission(t *testing.T) {
	ctx := context.Background()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"submission.json": `{"model_revision":"0123456789abcdef0123456789abcdef01234567","rows":"d/rows.jsonl"}`, "d/rows.jsonl": subRows}
	p, err := PackSubmission(ctx, l, newSigner(t), writeTree(t, files), bundle.PackOptions{Kind: KindSubmission})
	if err != nil {
		t.Fatal(err)
	}
	art, err := bundle.Load(ctx, l, p.Artifact.OCI())
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "out")
	res, err := ExtractSubmission(ctx, l, art, dest, bundle.ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 2 || res.Content != p.Content {
		t.Errorf("extracted %+v", res)
	}
	for name, data := range files {
		b, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(name)))
		if err != nil || string(b) != data {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	if _, err := ExtractSubmission(ctx, l, art, filepath.Join(t.TempDir(), "small"), bundle.ExtractOptions{Limits: bundle.Limits{MaxFiles: 2, MaxBytes: 10, MaxFile: 10}}); !errors.Is(err, bundle.ErrLimit) {
		t.Errorf("over the limits: %v", err)
	}
}

// TestReadRowsIndexVerifies: a damaged or oversized index blob is refused.
func TestReadRowsIndexVerifies(t *testing.T) {
	ctx := context.Background()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := PackSubmission(ctx, l, newSigner(t), writeTree(t, map[string]string{"submission.json": subMeta, "rows.jsonl": subRows}), bundle.PackOptions{Kind: KindSubmission})
	if err != nil {
		t.Fatal(err)
	}
	art, err := bundle.Load(ctx, l, p.Artifact.OCI())
	if err != nil {
		t.Fatal(err)
	}
	ixl, _, _, err := RowsLayers(art)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := ReadRowsIndex(ctx, l, ixl); err != nil || int64(len(b)) != ixl.Size {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	big := ixl
	big.Size = MaxRowsIndexBytes + 1
	if _, err := ReadRowsIndex(ctx, l, big); !errors.Is(err, cas.ErrTooLarge) {
		t.Errorf("oversized: %v", err)
	}
	path := l.BlobPath(ixl.Digest)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRowsIndex(ctx, l, ixl); !errors.Is(err, cas.ErrDigestMismatch) {
		t.Errorf("damaged: %v", err)
	}
}

// TestRevealChecksFormat3: the reveal checks read a format-3 submission
// through its index: an honest one is accepted, the same rows and
// submission.json under another key are a copy (the index digest is the
// content identity), and layers that are not a rows index are malformed.
func TestRevealChecksFormat3(t *testing.T) {
	f := newRoundFixture(t)
	alice, bob, carol := newSigner(t), newSigner(t), newSigner(t)
	dir := writeTree(t, map[string]string{"submission.json": subMeta, "rows.jsonl": subRows})
	pa, err := PackSubmission(f.ctx, f.l, alice, dir, bundle.PackOptions{Kind: KindSubmission})
	if err != nil {
		t.Fatal(err)
	}
	secA := f.commitArtifact(alice, pa.Artifact.OCI(), "2026-11-30T09:00:00Z")
	art, err := bundle.Load(f.ctx, f.l, pa.Artifact.OCI())
	if err != nil {
		t.Fatal(err)
	}
	var rec bundle.ContentRecord
	if err := art.Decode(&rec); err != nil {
		t.Fatal(err)
	}
	// bob signs the same layers under another creation time: another
	// manifest, the same content.
	copied, err := bundle.WriteSigned(f.ctx, f.l, bob, bundle.Artifact{Kind: KindSubmission, Record: rec, Layers: art.Payloads, Created: "2026-11-30T00:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	secB := f.commitArtifact(bob, copied, beforeClose)
	// carol's index layer is not an index.
	junk, err := bundle.PushBytes(f.ctx, f.l, bundle.MediaTypeRowsIndex, []byte("FVRIDX01 but nothing after"))
	if err != nil {
		t.Fatal(err)
	}
	junk.Annotations = map[string]string{bundle.AnnotationContentDigest: junk.Digest.String(), bundle.AnnotationContentSize: "26", "org.opencontainers.image.title": RowsIndexTitle}
	bad, err := bundle.WriteSigned(f.ctx, f.l, carol, bundle.Artifact{Kind: KindSubmission,
		Record: bundle.ContentRecord{Content: bundle.Content{Type: ContentTypeRollouts, Digest: junk.Digest, Size: junk.Size}},
		Layers: []ocispec.Descriptor{junk, art.Payloads[1]}})
	if err != nil {
		t.Fatal(err)
	}
	secC := f.commitArtifact(carol, bad, beforeClose)
	revA := f.honest(alice, secA, laterStill)
	revB := f.reveal(bob, secB, "", laterStill)
	revC := f.reveal(carol, secC, "", laterStill)
	rep := f.check(laterStill)
	want(t, rep, revA, StatusAccepted, "")
	want(t, rep, revB, StatusRejected, ReasonCopy)
	want(t, rep, revC, StatusRejected, ReasonMalformed)
}
