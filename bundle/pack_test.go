package bundle

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/feval/feval/cas"
)

// TestPackWithFailingSignerLeavesNothing: the key is decrypted while the payload
// is packed, so the payload exists before the signer is known to work; when the
// signer fails (a wrong password) the staged payload must be gone and the
// store's blob directory empty.
func TestPackWithFailingSignerLeavesNothing(t *testing.T) {
	priv, _, err := GenerateKey([]byte("right"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join("testdata", "tree"), filepath.Join("testdata", "tree", "a.txt")} {
		l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
		if err != nil {
			t.Fatal(err)
		}
		called := false
		signer := func() (*Signer, error) { called = true; return LoadSigner(priv, []byte("wrong")) }
		_, err = PackPathSigner(context.Background(), l, signer, path, PackOptions{Kind: "submission"})
		if !errors.Is(err, ErrBadPassword) {
			t.Fatalf("pack of %s with a wrong password = %v, want ErrBadPassword", path, err)
		}
		if !called {
			t.Fatal("the signer was never asked for")
		}
		ents, err := os.ReadDir(filepath.Join(l.Root(), "blobs", "sha256"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			t.Errorf("left behind after a failed signer: %s", e.Name())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if len(l.Manifests()) != 0 {
			t.Fatalf("manifests listed after a failed pack: %v", l.Manifests())
		}
	}
}

// TestPackPathSignerMatchesPackPath: staging and late signing store the same
// artifact, byte for byte, as signing with a key in hand.
func TestPackPathSignerMatchesPackPath(t *testing.T) {
	s := testSigner(t)
	_, want := signedFixture(t, s)
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := PackPathSigner(context.Background(), l, func() (*Signer, error) { return s, nil }, filepath.Join("testdata", "tree"), PackOptions{Kind: "submission"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Artifact.Digest != want.Artifact.Digest || got.Signature.Digest != want.Signature.Digest {
		t.Fatalf("PackPathSigner stored %s (signature %s), PackPath %s (%s)", got.Artifact.Digest, got.Signature.Digest, want.Artifact.Digest, want.Signature.Digest)
	}
}
