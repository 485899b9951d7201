package bundle

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// testSigner returns a fresh signer without the cost of scrypt.
func testSigner(t testing.TB) *Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestEncryptedKeyRoundTrip(t *testing.T) {
	priv, pub, err := GenerateKey([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(priv, []byte("ENCRYPTED SIGSTORE PRIVATE KEY")) {
		t.Fatalf("private key is not in cosign's encrypted format:\n%s", priv)
	}
	if _, err := LoadSigner(priv, []byte("wrong")); !errors.Is(err, ErrBadPassword) {
		t.Fatalf("wrong password: got %v, want ErrBadPassword", err)
	}
	s, err := LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pk, err := ParsePublicKey(pub)
	if err != nil || pk.Fingerprint != s.Public().Fingerprint {
		t.Fatalf("public key file does not match the private key: %v", err)
	}
	if _, _, err := GenerateKey(nil); err == nil {
		t.Fatal("empty password accepted")
	}
}

// signedFixture packs the fixture tree into a fresh layout and signs it.
func signedFixture(t testing.TB, s *Signer) (*cas.Layout, Packed) {
	t.Helper()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := PackPath(context.Background(), l, s, filepath.Join("testdata", "tree"), PackOptions{Kind: "submission"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return l, p
}

func TestSignIsDeterministic(t *testing.T) {
	s := testSigner(t)
	target := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("x"), Size: 1}
	a, err := s.SignatureBytes(target)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.SignatureBytes(target)
	if !bytes.Equal(a, b) {
		t.Fatal("signing the same target twice gave different bytes")
	}
	_, p1 := signedFixture(t, s)
	_, p2 := signedFixture(t, s)
	if p1.Signature.Digest != p2.Signature.Digest || p1.Artifact.Digest != p2.Artifact.Digest {
		t.Fatalf("re-signing in another store gave %s, then %s", p1.Signature.Digest, p2.Signature.Digest)
	}
	if bytes.Contains(a, []byte("PRIVATE")) {
		t.Fatal("signature contains key material")
	}
}

func TestVerifyAcceptsOnlyTrustedKeys(t *testing.T) {
	s, other := testSigner(t), testSigner(t)
	l, p := signedFixture(t, s)
	ctx := context.Background()
	rep := Verify(ctx, l, p.Artifact, []*PublicKey{s.Public()})
	if err := rep.Err(); err != nil {
		t.Fatalf("clean artifact failed: %v", err)
	}
	if got := rep.Signers[p.Artifact.Digest]; len(got) != 1 || got[0] != s.Public().Fingerprint {
		t.Fatalf("signers = %v", got)
	}
	rep = Verify(ctx, l, p.Artifact, []*PublicKey{other.Public()})
	if !errors.Is(rep.Err(), ErrNoTrustedSignature) {
		t.Fatalf("verification with a stranger's key: %v", rep.Err())
	}
}

// TestTamperEveryObject flips one byte in each blob of a signed artifact, in turn,
// and requires Verify to fail naming that object (or the manifest that can no
// longer be read).
func TestTamperEveryObject(t *testing.T) {
	s := testSigner(t)
	ctx := context.Background()
	_, p := signedFixture(t, s)
	objects := map[string]digest.Digest{"manifest": p.Artifact.Digest, "signature": p.Signature.Digest}
	{
		l, _ := signedFixture(t, s)
		art, err := Load(ctx, l, p.Artifact)
		if err != nil {
			t.Fatal(err)
		}
		objects["record"] = art.Manifest.Layers[0].Digest
		objects["payload"] = art.Payloads[0].Digest
		node, _, _ := cas.FetchNode(ctx, l, p.Signature)
		objects["signature bundle"] = node.Children[1].Digest
	}
	for name, d := range objects {
		t.Run(name, func(t *testing.T) {
			l, p := signedFixture(t, s)
			flipByte(t, l.BlobPath(d))
			rep := Verify(ctx, l, p.Artifact, []*PublicKey{s.Public()})
			if rep.Err() == nil {
				t.Fatalf("flipping a byte of the %s %s went unnoticed", name, d)
			}
			named := false
			for _, pr := range rep.Problems {
				if pr.Object == d || strings.Contains(pr.Detail, d.String()) {
					named = true
				}
			}
			if !named {
				t.Fatalf("problems do not name %s: %v", d, rep.Problems)
			}
			fr, err := cas.Fsck(ctx, l, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(fr.Findings) == 0 || fr.Findings[0].Digest != d || fr.Findings[0].Kind != cas.FindingCorrupt {
				t.Fatalf("fsck findings %v do not name %s as corrupt", fr.Findings, d)
			}
		})
	}
}

func flipByte(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestForgedSignatureRejected re-signs the statement with another key but keeps
// the trusted key's hint: the signature must be named as bad, not trusted.
func TestForgedSignatureRejected(t *testing.T) {
	s, mallory := testSigner(t), testSigner(t)
	l, p := signedFixture(t, s)
	ctx := context.Background()
	forged := *mallory
	forged.pub = s.pub // claims to be s
	if _, err := Sign(ctx, l, &forged, p.Artifact); err != nil {
		t.Fatal(err)
	}
	_, err := VerifySignatures(ctx, l, p.Artifact, []*PublicKey{s.Public()})
	var se *SignatureError
	if !errors.As(err, &se) {
		t.Fatalf("forged signature not reported: %v", err)
	}
}
