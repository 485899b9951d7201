package bundle

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
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
	rep := Verify(ctx, l, p.Artifact.OCI(), []*PublicKey{s.Public()})
	if err := rep.Err(); err != nil {
		t.Fatalf("clean artifact failed: %v", err)
	}
	if got := rep.Signers[p.Artifact.Digest]; len(got) != 1 || got[0] != s.Public().Fingerprint {
		t.Fatalf("signers = %v", got)
	}
	rep = Verify(ctx, l, p.Artifact.OCI(), []*PublicKey{other.Public()})
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
		art, err := Load(ctx, l, p.Artifact.OCI())
		if err != nil {
			t.Fatal(err)
		}
		objects["record"] = art.Manifest.Layers[0].Digest
		objects["payload"] = art.Payloads[0].Digest
		node, _, _ := cas.FetchNode(ctx, l, p.Signature.OCI())
		objects["signature bundle"] = node.Children[1].Digest
	}
	for name, d := range objects {
		t.Run(name, func(t *testing.T) {
			l, p := signedFixture(t, s)
			flipByte(t, l.BlobPath(d))
			rep := Verify(ctx, l, p.Artifact.OCI(), []*PublicKey{s.Public()})
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
// the trusted key's hint: the signature is reported as not verifying with the
// key it claims, never trusted; next to a genuine signature it does not
// matter, alone it fails verification.
func TestForgedSignatureRejected(t *testing.T) {
	s, mallory := testSigner(t), testSigner(t)
	l, p := signedFixture(t, s)
	ctx := context.Background()
	forged := *mallory
	forged.pub = s.pub // claims to be s
	fd, err := Sign(ctx, l, &forged, p.Artifact.OCI())
	if err != nil {
		t.Fatal(err)
	}
	signers, err := VerifySignatures(ctx, l, p.Artifact.OCI(), []*PublicKey{s.Public()})
	if err != nil || len(signers) != 1 || signers[0] != s.Public().Fingerprint {
		t.Fatalf("a forged signature next to the genuine one broke verification: %v %v", signers, err)
	}
	rep := Verify(ctx, l, p.Artifact.OCI(), []*PublicKey{s.Public()})
	if rep.Err() != nil {
		t.Fatalf("verify: %v", rep.Err())
	}
	if len(rep.Skipped) != 1 || rep.Skipped[0].Signature != fd.Digest || rep.Skipped[0].Trusted ||
		rep.Skipped[0].Claimed != s.Public().Fingerprint || !strings.Contains(rep.Skipped[0].Reason, "does not verify with key") {
		t.Fatalf("forged signature not reported as skipped: %+v", rep.Skipped)
	}

	// Alone, the forged signature is named and verification fails.
	l2, err := cas.Init(filepath.Join(t.TempDir(), "alone"))
	if err != nil {
		t.Fatal(err)
	}
	desc, err := Write(ctx, l2, Artifact{Kind: "submission", Record: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	fd2, err := Sign(ctx, l2, &forged, desc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = VerifySignatures(ctx, l2, desc, []*PublicKey{s.Public()})
	var se *SignatureError
	if !errors.As(err, &se) || se.Signature != fd2.Digest || !errors.Is(err, ErrNoTrustedSignature) {
		t.Fatalf("forged signature alone: %v", err)
	}
}

// attachBundle attaches raw Sigstore bundle bytes to target as a signature
// referrer, as another tool would.
func attachBundle(t testing.TB, st cas.Store, target ocispec.Descriptor, b []byte) ocispec.Descriptor {
	t.Helper()
	ctx := context.Background()
	layer, err := PushBytes(ctx, st, MediaTypeSigstoreBundle, b)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := PushBytes(ctx, st, ocispec.MediaTypeEmptyJSON, ocispec.DescriptorEmptyJSON.Data)
	if err != nil {
		t.Fatal(err)
	}
	subj := ocispec.Descriptor{MediaType: target.MediaType, Digest: target.Digest, Size: target.Size}
	m := ocispec.Manifest{Versioned: manifestVersion, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: MediaTypeSigstoreBundle, Config: cfg, Layers: []ocispec.Descriptor{layer}, Subject: &subj}
	mb, err := Canonical(m)
	if err != nil {
		t.Fatal(err)
	}
	d, err := PushBytes(ctx, st, ocispec.MediaTypeImageManifest, mb)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestForeignSignaturesIgnored attaches what other parties can attach to an
// artifact in a shared repository: a valid feval signature by an untrusted
// key, a bundle in another tool's format (a message signature, as cosign
// writes for blobs), an in-toto statement with another predicate type, and
// junk. Verification still decides on the trusted signature and reports
// each of the others; Signers still names the keys that validly signed.
func TestForeignSignaturesIgnored(t *testing.T) {
	s, stranger := testSigner(t), testSigner(t)
	l, p := signedFixture(t, s)
	ctx := context.Background()
	if _, err := Sign(ctx, l, stranger, p.Artifact.OCI()); err != nil {
		t.Fatal(err)
	}
	hint := base64.StdEncoding.EncodeToString(mustHex(t, stranger.Public().Fingerprint))
	msgSig := attachBundle(t, l, p.Artifact.OCI(), []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json",`+
		`"verificationMaterial":{"publicKey":{"hint":"`+hint+`"}},"messageSignature":{"messageDigest":{"algorithm":"SHA2_256","digest":"AAAA"},"signature":"AAAA"}}`))
	stmt := base64.StdEncoding.EncodeToString([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"x","digest":{"sha256":"` +
		p.Artifact.Digest.Encoded() + `"}}],"predicateType":"https://sigstore.dev/cosign/sign/v1","predicate":{}}`))
	otherPred := attachBundle(t, l, p.Artifact.OCI(), []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json",`+
		`"verificationMaterial":{"publicKey":{"hint":""}},"dsseEnvelope":{"payload":"`+stmt+`","payloadType":"application/vnd.in-toto+json","signatures":[{"sig":"AAAA"}]}}`))
	junk := attachBundle(t, l, p.Artifact.OCI(), []byte("not json at all"))

	rep := Verify(ctx, l, p.Artifact.OCI(), []*PublicKey{s.Public()})
	if err := rep.Err(); err != nil {
		t.Fatalf("foreign signatures broke verification: %v", err)
	}
	skipped := map[digest.Digest]SignatureCheck{}
	for _, c := range rep.Skipped {
		skipped[c.Signature] = c
	}
	if len(rep.Skipped) != 4 {
		t.Fatalf("skipped %d signatures, want 4: %+v", len(rep.Skipped), rep.Skipped)
	}
	if c := skipped[msgSig.Digest]; !c.Malformed || c.Claimed != stranger.Public().Fingerprint || !strings.Contains(c.Reason, "not a feval signature") {
		t.Errorf("message signature: %+v", c)
	}
	if c := skipped[otherPred.Digest]; !c.Malformed || !strings.Contains(c.Reason, "cosign/sign/v1") {
		t.Errorf("other predicate: %+v", c)
	}
	if c := skipped[junk.Digest]; !c.Malformed || c.Reason != "malformed Sigstore bundle" {
		t.Errorf("junk: %+v", c)
	}
	strangerSeen := false
	for _, c := range rep.Skipped {
		if c.Signer == stranger.Public().Fingerprint && !c.Malformed && !c.Trusted {
			strangerSeen = true
		}
	}
	if !strangerSeen {
		t.Errorf("the stranger's valid signature is not reported with its key: %+v", rep.Skipped)
	}

	fps, err := Signers(ctx, l, p.Artifact.OCI())
	if err != nil || strings.Join(fps, ",") != strings.Join(sortedFPs(s, stranger), ",") {
		t.Fatalf("Signers = %v, %v", fps, err)
	}

	// Trusting only the stranger: the failure names who signed.
	_, err = VerifySignatures(ctx, l, p.Artifact.OCI(), []*PublicKey{testSigner(t).Public()})
	if !errors.Is(err, ErrNoTrustedSignature) || !strings.Contains(err.Error(), "; signed by ") || !strings.Contains(err.Error(), s.Public().Fingerprint[:16]) {
		t.Fatalf("untrusted: %v", err)
	}
}

func mustHex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sortedFPs(ss ...*Signer) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Public().Fingerprint)
	}
	sort.Strings(out)
	return out
}

// memReferrer is a store whose only signature referrer of any subject is held
// in memory: the fuzz target checks one bundle without writing to disk.
type memReferrer struct {
	cas.Store
	ref   ocispec.Descriptor
	blobs map[digest.Digest][]byte
}

func (m memReferrer) Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if b, ok := m.blobs[desc.Digest]; ok {
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	return m.Store.Fetch(ctx, desc)
}

func (m memReferrer) Referrers(context.Context, ocispec.Descriptor, string) ([]ocispec.Descriptor, error) {
	return []ocispec.Descriptor{m.ref}, nil
}

// withBundle returns st with b attached to target as its only signature.
func withBundle(t testing.TB, st cas.Store, target ocispec.Descriptor, b []byte) memReferrer {
	layer := ocispec.Descriptor{MediaType: MediaTypeSigstoreBundle, Digest: digest.FromBytes(b), Size: int64(len(b))}
	subj := ocispec.Descriptor{MediaType: target.MediaType, Digest: target.Digest, Size: target.Size}
	m := ocispec.Manifest{Versioned: manifestVersion, MediaType: ocispec.MediaTypeImageManifest, ArtifactType: MediaTypeSigstoreBundle,
		Config: ocispec.DescriptorEmptyJSON, Layers: []ocispec.Descriptor{layer}, Subject: &subj}
	mb, err := Canonical(m)
	if err != nil {
		t.Fatal(err)
	}
	ref := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(mb), Size: int64(len(mb))}
	return memReferrer{Store: st, ref: ref, blobs: map[digest.Digest][]byte{layer.Digest: b, ref.Digest: mb}}
}

// FuzzCheckSignatures checks arbitrary bytes as a signature bundle: checking
// never panics, never trusts them, and says why.
func FuzzCheckSignatures(f *testing.F) {
	s := testSigner(f)
	l, p := signedFixture(f, s)
	ctx := context.Background()
	genuine, err := s.SignatureBytes(p.Artifact.OCI())
	if err != nil {
		f.Fatal(err)
	}
	if checks, err := CheckSignatures(ctx, withBundle(f, l, p.Artifact.OCI(), genuine), p.Artifact.OCI(), []*PublicKey{s.Public()}); err != nil || len(checks) != 1 || !checks[0].Trusted {
		f.Fatalf("the genuine bundle through the in-memory referrer: %+v %v", checks, err)
	}
	f.Add(genuine)
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"AAAA"}},"messageSignature":{"signature":"AAAA"}}`))
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","dsseEnvelope":{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[]}}`))
	f.Add([]byte("not json"))
	other := testSigner(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		checks, err := CheckSignatures(ctx, withBundle(t, l, p.Artifact.OCI(), b), p.Artifact.OCI(), []*PublicKey{other.Public()})
		if err != nil || len(checks) != 1 {
			t.Fatalf("%v %v", checks, err)
		}
		if c := checks[0]; c.Trusted || c.Reason == "" {
			t.Fatalf("arbitrary bundle checked as %+v", c)
		}
	})
}
