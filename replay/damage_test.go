package replay_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/replay"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// conformanceStore copies a conformance vector's store into a fresh layout.
func conformanceStore(t *testing.T, vector string) *cas.Layout {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "testdata", "conformance", vector, "store"))); err != nil {
		t.Fatal(err)
	}
	l, err := cas.OpenLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestReplayDamageAndMalformed: a store that fails to deliver a verdict's
// bytes is reported as such (the error wraps cas.ErrDigestMismatch, under
// bundle.ErrVerify), while a verdict record of the wrong form is a
// verification failure that does not pass for a malformed input of the
// user's (so the command exits 4, not 6).
func TestReplayDamageAndMalformed(t *testing.T) {
	ctx := context.Background()
	l := conformanceStore(t, "digest-verdict-record")
	b, err := os.ReadFile(filepath.Join("..", "testdata", "conformance", "digest-verdict-record", "vector.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var d digest.Digest
	for _, line := range strings.Split(string(b), "\n") {
		if len(line) > 9 && line[:9] == "verdict: " {
			d = digest.Digest(line[9:])
		}
	}
	desc, err := l.Resolve(ctx, d.String())
	if err != nil {
		t.Fatal(err)
	}
	key := signer(t)
	_, err = replay.Run(ctx, l, desc, []*bundle.PublicKey{key.Public()})
	if !errors.Is(err, bundle.ErrVerify) || !errors.Is(err, cas.ErrDigestMismatch) {
		t.Fatalf("damaged verdict record: %v", err)
	}

	// A verdict whose record is not canonical JSON, signed by a trusted key.
	rec, err := bundle.PushBytes(ctx, l, bundle.ArtifactType("verdict"), []byte(`{ "protocol": "rollouts" }`))
	if err != nil {
		t.Fatal(err)
	}
	rec.Annotations = map[string]string{ocispec.AnnotationTitle: "record.json"}
	cfg, err := bundle.PushBytes(ctx, l, ocispec.MediaTypeEmptyJSON, ocispec.DescriptorEmptyJSON.Data)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Data = ocispec.DescriptorEmptyJSON.Data
	mb, err := bundle.Canonical(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: bundle.ArtifactType("verdict"), Config: cfg, Layers: []ocispec.Descriptor{rec},
		Annotations: map[string]string{ocispec.AnnotationCreated: bundle.EpochCreated}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundle.PushBytes(ctx, l, ocispec.MediaTypeImageManifest, mb)
	if err != nil {
		t.Fatal(err)
	}
	m.ArtifactType = bundle.ArtifactType("verdict")
	if _, err := bundle.Sign(ctx, l, key, m); err != nil {
		t.Fatal(err)
	}
	_, err = replay.Run(ctx, l, m, []*bundle.PublicKey{key.Public()})
	if !errors.Is(err, bundle.ErrVerify) || errors.Is(err, bundle.ErrMalformedRecord) {
		t.Fatalf("malformed verdict record: %v (want a verification failure that is not ErrMalformedRecord)", err)
	}
}
