package bundle

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Media types and identifiers of feval signatures.
const (
	MediaTypeSigstoreBundle = "application/vnd.dev.sigstore.bundle.v0.3+json"
	PayloadTypeInToto       = "application/vnd.in-toto+json"
	StatementType           = "https://in-toto.io/Statement/v1"
	// PredicateType is the in-toto predicate type of a feval signature; cosign
	// accepts it with `verify-attestation --type`.
	PredicateType = "https://feval.dev/attestation/signed-artifact/v1"

	annotationBundleContent   = "dev.sigstore.bundle.content"
	annotationBundlePredicate = "dev.sigstore.bundle.predicateType"
	maxSignatureSize          = 64 << 10
)

var (
	// ErrBadPassword reports a private key that the password does not decrypt.
	ErrBadPassword = errors.New("wrong password for the private key")
	// ErrNoTrustedSignature reports an artifact no trusted key has signed.
	ErrNoTrustedSignature = errors.New("no signature by a trusted key")
	// ErrBadSignature reports a signature that does not verify or is malformed.
	ErrBadSignature = errors.New("bad signature")
)

// PublicKey is a verification key with its fingerprint: the hex SHA-256 of its
// DER SubjectPublicKeyInfo.
type PublicKey struct {
	Key         crypto.PublicKey
	Fingerprint string
	PEM         []byte
}

// Signer holds a decrypted private key. Its methods never expose the key.
type Signer struct {
	priv *ecdsa.PrivateKey
	pub  *PublicKey
}

// GenerateKey makes a new ECDSA P-256 key pair, the private key encrypted with
// password in cosign's format ("ENCRYPTED SIGSTORE PRIVATE KEY": scrypt and
// NaCl secretbox).
func GenerateKey(password []byte) (privPEM, pubPEM []byte, err error) {
	if len(password) == 0 {
		return nil, nil, errors.New("an empty password is not allowed; set FEVAL_PASSWORD")
	}
	return cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc(password))
}

// LoadSigner decrypts a cosign-format private key.
func LoadSigner(privPEM, password []byte) (*Signer, error) {
	k, err := cryptoutils.UnmarshalPEMToPrivateKey(privPEM, cryptoutils.StaticPasswordFunc(password))
	if err != nil {
		if strings.Contains(err.Error(), "decrypt") || strings.Contains(err.Error(), "password") {
			return nil, ErrBadPassword
		}
		return nil, fmt.Errorf("reading private key: %w", errors.New("not a cosign-format ECDSA key"))
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("reading private key: only ECDSA P-256 keys are supported")
	}
	return NewSigner(ek)
}

// NewSigner wraps an ECDSA P-256 private key.
func NewSigner(ek *ecdsa.PrivateKey) (*Signer, error) {
	if ek.Curve != elliptic.P256() {
		return nil, errors.New("reading private key: only ECDSA P-256 keys are supported")
	}
	pemBytes, err := cryptoutils.MarshalPublicKeyToPEM(ek.Public())
	if err != nil {
		return nil, err
	}
	pub, err := ParsePublicKey(pemBytes)
	if err != nil {
		return nil, err
	}
	return &Signer{priv: ek, pub: pub}, nil
}

// Public returns the signer's public key.
func (s *Signer) Public() *PublicKey { return s.pub }

// ParsePublicKey reads a PEM public key (cosign.pub format).
func ParsePublicKey(pemBytes []byte) (*PublicKey, error) {
	k, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("reading public key: %w", err)
	}
	if ek, ok := k.(*ecdsa.PublicKey); !ok || ek.Curve != elliptic.P256() {
		return nil, errors.New("reading public key: only ECDSA P-256 keys are supported")
	}
	der, err := cryptoutils.MarshalPublicKeyToDER(k)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	canon, _ := cryptoutils.MarshalPublicKeyToPEM(k)
	return &PublicKey{Key: k, Fingerprint: hex.EncodeToString(sum[:]), PEM: canon}, nil
}

// sigBundle is the Sigstore bundle v0.3 JSON, written by hand so the bytes are
// canonical (protojson output is not stable).
type sigBundle struct {
	MediaType            string `json:"mediaType"`
	VerificationMaterial struct {
		PublicKey struct {
			Hint string `json:"hint"`
		} `json:"publicKey"`
		TlogEntries []json.RawMessage `json:"tlogEntries"`
	} `json:"verificationMaterial"`
	DSSEEnvelope envelope `json:"dsseEnvelope"`
}

type envelope struct {
	Payload     string         `json:"payload"`
	PayloadType string         `json:"payloadType"`
	Signatures  []envSignature `json:"signatures"`
}

type envSignature struct {
	Sig   string `json:"sig"`
	KeyID string `json:"keyid,omitempty"`
}

// Statement is the in-toto statement feval signs.
type Statement struct {
	Type          string             `json:"_type"`
	Subject       []StatementSubject `json:"subject"`
	PredicateType string             `json:"predicateType"`
	Predicate     SignedArtifact     `json:"predicate"`
}

// StatementSubject names the signed manifest.
type StatementSubject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// SignedArtifact is the predicate: what was signed, by whom. It holds no time.
type SignedArtifact struct {
	ArtifactType string `json:"artifactType"`
	MediaType    string `json:"mediaType"`
	Size         int64  `json:"size"`
	Signer       string `json:"signer"`
	// PublicKey is the signer's key (PEM), so a signature can be checked
	// without a key directory; whether to trust it is the verifier's decision,
	// by fingerprint.
	PublicKey string `json:"publicKey"`
}

// PAE is DSSE's pre-authentication encoding, the bytes actually signed.
func PAE(payloadType string, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString("DSSEv1 ")
	b.WriteString(strconv.Itoa(len(payloadType)))
	b.WriteByte(' ')
	b.WriteString(payloadType)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(len(payload)))
	b.WriteByte(' ')
	b.Write(payload)
	return b.Bytes()
}

// SignatureBytes returns the canonical Sigstore bundle signing target with s. The
// result depends only on the target and the key.
func (s *Signer) SignatureBytes(target ocispec.Descriptor) ([]byte, error) {
	st := Statement{
		Type:          StatementType,
		Subject:       []StatementSubject{{Name: target.Digest.String(), Digest: map[string]string{"sha256": target.Digest.Encoded()}}},
		PredicateType: PredicateType,
		Predicate:     SignedArtifact{ArtifactType: target.ArtifactType, MediaType: target.MediaType, Size: target.Size, Signer: s.pub.Fingerprint, PublicKey: string(s.pub.PEM)},
	}
	payload, err := Canonical(st)
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256(PAE(PayloadTypeInToto, payload))
	sig, err := s.priv.Sign(nil, h[:], crypto.SHA256) // nil rand: RFC 6979, deterministic
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	var b sigBundle
	b.MediaType = MediaTypeSigstoreBundle
	b.VerificationMaterial.PublicKey.Hint = s.pub.Fingerprint
	b.VerificationMaterial.TlogEntries = []json.RawMessage{}
	b.DSSEEnvelope = envelope{
		Payload:     base64.StdEncoding.EncodeToString(payload),
		PayloadType: PayloadTypeInToto,
		Signatures:  []envSignature{{Sig: base64.StdEncoding.EncodeToString(sig)}},
	}
	return Canonical(b)
}

// Sign attaches a signature referrer to target in s and returns its descriptor.
// Signing twice gives the same descriptor.
func Sign(ctx context.Context, st cas.Store, s *Signer, target ocispec.Descriptor) (ocispec.Descriptor, error) {
	sb, err := s.SignatureBytes(target)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	layer, err := PushBytes(ctx, st, MediaTypeSigstoreBundle, sb)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	cfg, err := PushBytes(ctx, st, ocispec.MediaTypeEmptyJSON, ocispec.DescriptorEmptyJSON.Data)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	cfg.Data = ocispec.DescriptorEmptyJSON.Data
	subj := ocispec.Descriptor{MediaType: target.MediaType, Digest: target.Digest, Size: target.Size, ArtifactType: target.ArtifactType}
	m := ocispec.Manifest{
		Versioned:    manifestVersion,
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: MediaTypeSigstoreBundle,
		Config:       cfg,
		Layers:       []ocispec.Descriptor{layer},
		Subject:      &subj,
		Annotations: map[string]string{
			ocispec.AnnotationCreated: EpochCreated,
			annotationBundleContent:   "dsse-envelope",
			annotationBundlePredicate: PredicateType,
		},
	}
	mb, err := Canonical(m)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc, err := PushBytes(ctx, st, ocispec.MediaTypeImageManifest, mb)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc.ArtifactType = MediaTypeSigstoreBundle
	return desc, nil
}

// SignatureError is a signature referrer that failed to verify.
type SignatureError struct {
	Signature digest.Digest
	Target    digest.Digest
	Reason    string
}

func (e *SignatureError) Error() string {
	return fmt.Sprintf("signature %s on %s: %s", e.Signature, e.Target, e.Reason)
}

func (e *SignatureError) Unwrap() error { return ErrBadSignature }

// VerifySignatures checks every signature referrer of target and returns the
// fingerprints of the trusted keys that signed it (sorted). A signature by an
// untrusted key is ignored; a malformed signature, or one that claims a trusted
// key and fails, is a *SignatureError. If no trusted key signed, the error wraps
// ErrNoTrustedSignature. Nothing the signature says about itself (its key hint,
// its predicate) is trusted: only the math against the given keys.
func VerifySignatures(ctx context.Context, st cas.Store, target ocispec.Descriptor, trusted []*PublicKey) ([]string, error) {
	refs, err := st.Referrers(ctx, target, MediaTypeSigstoreBundle)
	if err != nil {
		return nil, err
	}
	var errs []error
	signers := map[string]bool{}
	for _, r := range refs {
		fps, err := verifyOne(ctx, st, r, target, trusted)
		if err != nil {
			errs = append(errs, err)
		}
		for _, fp := range fps {
			signers[fp] = true
		}
	}
	out := make([]string, 0, len(signers))
	for fp := range signers {
		out = append(out, fp)
	}
	sort.Strings(out)
	if len(out) == 0 {
		errs = append(errs, fmt.Errorf("%s: %w (%d signature referrers)", target.Digest, ErrNoTrustedSignature, len(refs)))
	}
	return out, errors.Join(errs...)
}

func verifyOne(ctx context.Context, st cas.Store, ref, target ocispec.Descriptor, trusted []*PublicKey) ([]string, error) {
	fail := func(format string, a ...any) error {
		return &SignatureError{Signature: ref.Digest, Target: target.Digest, Reason: fmt.Sprintf(format, a...)}
	}
	mb, err := cas.ReadAll(ctx, st, ref, maxSignatureSize)
	if err != nil {
		return nil, fail("reading manifest: %v", err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil || len(m.Layers) != 1 || m.Subject == nil ||
		m.Subject.Digest != target.Digest || m.Layers[0].MediaType != MediaTypeSigstoreBundle {
		return nil, fail("not a signature manifest for this subject")
	}
	bb, err := cas.ReadAll(ctx, st, m.Layers[0], maxSignatureSize)
	if err != nil {
		return nil, fail("reading bundle: %v", err)
	}
	var b sigBundle
	dec := json.NewDecoder(bytes.NewReader(bb))
	if err := dec.Decode(&b); err != nil || b.MediaType != MediaTypeSigstoreBundle || b.DSSEEnvelope.PayloadType != PayloadTypeInToto {
		return nil, fail("malformed Sigstore bundle")
	}
	payload, err := base64.StdEncoding.DecodeString(b.DSSEEnvelope.Payload)
	if err != nil {
		return nil, fail("payload is not base64")
	}
	var s Statement
	if err := json.Unmarshal(payload, &s); err != nil || s.Type != StatementType || s.PredicateType != PredicateType {
		return nil, fail("payload is not a feval in-toto statement")
	}
	if len(s.Subject) != 1 || s.Subject[0].Digest["sha256"] != target.Digest.Encoded() {
		return nil, fail("statement subject is not %s", target.Digest)
	}
	pae := PAE(b.DSSEEnvelope.PayloadType, payload)
	var signers []string
	for _, es := range b.DSSEEnvelope.Signatures {
		sig, err := base64.StdEncoding.DecodeString(es.Sig)
		if err != nil {
			return nil, fail("signature is not base64")
		}
		matched := false
		for _, k := range trusted {
			v, err := signature.LoadVerifier(k.Key, crypto.SHA256)
			if err != nil {
				return nil, err
			}
			if v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(pae)) == nil {
				signers = append(signers, k.Fingerprint)
				matched = true
			}
		}
		// The hint is only used to say which key a bad signature claims; it
		// never makes a signature count.
		if hint := b.VerificationMaterial.PublicKey.Hint; !matched && isTrusted(hint, trusted) {
			return nil, fail("does not verify with key %s", short(hint))
		}
	}
	return signers, nil
}

func isTrusted(fp string, trusted []*PublicKey) bool {
	for _, k := range trusted {
		if k.Fingerprint == fp {
			return true
		}
	}
	return false
}

func short(fp string) string {
	if len(fp) > 16 {
		return fp[:16]
	}
	return fp
}

// Signers returns the fingerprints of the keys that validly signed target, each
// signature checked against the public key its statement carries (sorted). It
// says who signed, not whom to trust: the caller compares the fingerprints with
// its own list. Malformed or failing signatures are returned as errors.
func Signers(ctx context.Context, st cas.Store, target ocispec.Descriptor) ([]string, error) {
	refs, err := st.Referrers(ctx, target, MediaTypeSigstoreBundle)
	if err != nil {
		return nil, err
	}
	var errs []error
	found := map[string]bool{}
	for _, r := range refs {
		key, err := embeddedKey(ctx, st, r)
		if err != nil {
			errs = append(errs, &SignatureError{Signature: r.Digest, Target: target.Digest, Reason: err.Error()})
			continue
		}
		fps, err := verifyOne(ctx, st, r, target, []*PublicKey{key})
		if err != nil {
			errs = append(errs, err)
		}
		if len(fps) == 0 && err == nil {
			errs = append(errs, &SignatureError{Signature: r.Digest, Target: target.Digest, Reason: "does not verify with the key it carries"})
		}
		for _, fp := range fps {
			found[fp] = true
		}
	}
	out := make([]string, 0, len(found))
	for fp := range found {
		out = append(out, fp)
	}
	sort.Strings(out)
	if len(out) == 0 {
		errs = append(errs, fmt.Errorf("%s: %w (%d signature referrers)", target.Digest, ErrNoTrustedSignature, len(refs)))
	}
	return out, errors.Join(errs...)
}

// embeddedKey reads the public key a signature's statement carries.
func embeddedKey(ctx context.Context, st cas.Store, ref ocispec.Descriptor) (*PublicKey, error) {
	mb, err := cas.ReadAll(ctx, st, ref, maxSignatureSize)
	if err != nil {
		return nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil || len(m.Layers) != 1 {
		return nil, errors.New("not a signature manifest")
	}
	bb, err := cas.ReadAll(ctx, st, m.Layers[0], maxSignatureSize)
	if err != nil {
		return nil, err
	}
	var b sigBundle
	if err := json.Unmarshal(bb, &b); err != nil {
		return nil, errors.New("malformed Sigstore bundle")
	}
	payload, err := base64.StdEncoding.DecodeString(b.DSSEEnvelope.Payload)
	if err != nil {
		return nil, errors.New("payload is not base64")
	}
	var s Statement
	if err := json.Unmarshal(payload, &s); err != nil || s.Predicate.PublicKey == "" {
		return nil, errors.New("statement carries no public key")
	}
	return ParsePublicKey([]byte(s.Predicate.PublicKey))
}
