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
	"slices"
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
	MediaTypeSigstoreBundle = cas.SignatureArtifactType
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
	return pushSignature(ctx, st, sb, target)
}

// pushSignature stores the signature bundle sb as a referrer of target.
func pushSignature(ctx context.Context, st cas.Store, sb []byte, target ocispec.Descriptor) (ocispec.Descriptor, error) {
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

// SignatureCheck is what one signature referrer of an artifact turned out to
// be. Anyone who can push to a repository can attach signatures to what it
// holds, in feval's format or any other (cosign's own, for one), so a
// signature that is not a trusted key's is reported and otherwise ignored:
// only the trusted ones decide.
type SignatureCheck struct {
	// Signature is the digest of the signature manifest.
	Signature digest.Digest `json:"signature"`
	// Target is the manifest it was checked against.
	Target digest.Digest `json:"target"`
	// Trusted is set when one of the trusted keys made the signature.
	Trusted bool `json:"trusted"`
	// Signer is the fingerprint of the key that made the signature, when it is
	// known: the trusted key, or the key a feval statement carries and the
	// signature verifies with.
	Signer string `json:"signer,omitempty"`
	// Claimed is the key a signature that could not be verified names
	// (its key hint, as a fingerprint where it has that form); a claim only.
	Claimed string `json:"claimed,omitempty"`
	// Reason says why the signature does not count; empty when Trusted.
	Reason string `json:"reason,omitempty"`
	// Malformed is set for a signature that could not be read, is not a feval
	// signature of this target, or does not verify with the key it names.
	Malformed bool `json:"malformed"`
}

func (c SignatureCheck) err() error {
	return &SignatureError{Signature: c.Signature, Target: c.Target, Reason: c.Reason}
}

// CheckSignatures checks every signature referrer of target against the
// trusted keys and returns one result per referrer, sorted by signature
// digest. A signature counts only if it is a feval signature (a DSSE-wrapped
// in-toto statement with feval's predicate type whose subject is target)
// that verifies with a trusted key; every other referrer is returned with the
// reason it does not count. Nothing a signature says about itself (its key
// hint, its predicate, the key it carries) makes it count. The error is set
// only when the referrers cannot be listed.
func CheckSignatures(ctx context.Context, st cas.Store, target ocispec.Descriptor, trusted []*PublicKey) ([]SignatureCheck, error) {
	refs, err := st.Referrers(ctx, target, MediaTypeSigstoreBundle)
	if err != nil {
		return nil, err
	}
	out := make([]SignatureCheck, 0, len(refs))
	for _, r := range refs {
		out = append(out, checkOne(ctx, st, r, target, trusted, false))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Signature < out[j].Signature })
	return out, nil
}

// TrustedSigners returns the sorted, distinct fingerprints of the trusted
// signatures among checks.
func TrustedSigners(checks []SignatureCheck) []string {
	var out []string
	for _, c := range checks {
		if c.Trusted {
			out = append(out, c.Signer)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// UntrustedError is the error of a target no trusted key signed: it says how
// many signatures there were and which keys made (or claim to have made)
// them, and wraps ErrNoTrustedSignature.
type UntrustedError struct {
	Target digest.Digest
	Checks []SignatureCheck
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%s: %v (%s)", e.Target, ErrNoTrustedSignature, e.Summary())
}

// Summary says how many signatures there were and which keys made them or
// claim to have made them (short fingerprints).
func (e *UntrustedError) Summary() string {
	var signed, claimed []string
	for _, c := range e.Checks {
		switch {
		case c.Signer != "":
			signed = append(signed, short(c.Signer))
		case c.Claimed != "":
			claimed = append(claimed, short(c.Claimed))
		}
	}
	msg := fmt.Sprintf("%d signature referrers", len(e.Checks))
	if len(signed) > 0 {
		slices.Sort(signed)
		msg += "; signed by " + strings.Join(slices.Compact(signed), ", ")
	}
	if len(claimed) > 0 {
		slices.Sort(claimed)
		msg += "; unverified signatures claiming " + strings.Join(slices.Compact(claimed), ", ")
	}
	return msg
}

func (e *UntrustedError) Unwrap() error { return ErrNoTrustedSignature }

// VerifySignatures checks every signature referrer of target and returns the
// fingerprints of the trusted keys that signed it (sorted). Signatures that
// are not a trusted key's (by an untrusted key, malformed, in another tool's
// format, failing with the key they claim) are ignored when a trusted key
// signed. If none did, the error is an *UntrustedError (wrapping
// ErrNoTrustedSignature) joined with a *SignatureError for each malformed
// signature, so the caller can say what was found.
func VerifySignatures(ctx context.Context, st cas.Store, target ocispec.Descriptor, trusted []*PublicKey) ([]string, error) {
	checks, err := CheckSignatures(ctx, st, target, trusted)
	if err != nil {
		return nil, err
	}
	out := TrustedSigners(checks)
	if len(out) > 0 {
		return out, nil
	}
	errs := []error{}
	for _, c := range checks {
		if c.Malformed {
			errs = append(errs, c.err())
		}
	}
	errs = append(errs, &UntrustedError{Target: target.Digest, Checks: checks})
	return out, errors.Join(errs...)
}

// parsedSignature is a feval signature read from a referrer.
type parsedSignature struct {
	pae     []byte
	sigs    [][]byte
	hint    string
	carried *PublicKey // the key the statement carries, if it parses
}

// readSignature reads a signature referrer of target in feval's format. The
// returned hint is the key hint of any Sigstore bundle, also when the bundle
// is not in feval's format.
func readSignature(ctx context.Context, st cas.Store, ref, target ocispec.Descriptor) (parsedSignature, string, error) {
	mb, err := cas.ReadAll(ctx, st, ref, maxSignatureSize)
	if err != nil {
		return parsedSignature{}, "", fmt.Errorf("reading manifest: %v", err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil || len(m.Layers) != 1 || m.Subject == nil ||
		m.Subject.Digest != target.Digest || m.Layers[0].MediaType != MediaTypeSigstoreBundle {
		return parsedSignature{}, "", errors.New("not a signature manifest for this subject")
	}
	bb, err := cas.ReadAll(ctx, st, m.Layers[0], maxSignatureSize)
	if err != nil {
		return parsedSignature{}, "", fmt.Errorf("reading bundle: %v", err)
	}
	var b sigBundle
	if err := json.NewDecoder(bytes.NewReader(bb)).Decode(&b); err != nil || b.MediaType != MediaTypeSigstoreBundle {
		return parsedSignature{}, "", errors.New("malformed Sigstore bundle")
	}
	hint := hintFingerprint(b.VerificationMaterial.PublicKey.Hint)
	if b.DSSEEnvelope.PayloadType != PayloadTypeInToto {
		return parsedSignature{}, hint, errors.New("not a feval signature: the bundle holds no in-toto DSSE envelope")
	}
	payload, err := base64.StdEncoding.DecodeString(b.DSSEEnvelope.Payload)
	if err != nil {
		return parsedSignature{}, hint, errors.New("payload is not base64")
	}
	var s Statement
	if err := json.Unmarshal(payload, &s); err != nil || s.Type != StatementType {
		return parsedSignature{}, hint, errors.New("payload is not an in-toto statement")
	}
	if s.PredicateType != PredicateType {
		return parsedSignature{}, hint, fmt.Errorf("not a feval signature (predicate type %.100q)", s.PredicateType)
	}
	if len(s.Subject) != 1 || s.Subject[0].Digest["sha256"] != target.Digest.Encoded() {
		return parsedSignature{}, hint, fmt.Errorf("statement subject is not %s", target.Digest)
	}
	p := parsedSignature{pae: PAE(b.DSSEEnvelope.PayloadType, payload), hint: hint}
	for _, es := range b.DSSEEnvelope.Signatures {
		sig, err := base64.StdEncoding.DecodeString(es.Sig)
		if err != nil {
			return parsedSignature{}, hint, errors.New("signature is not base64")
		}
		p.sigs = append(p.sigs, sig)
	}
	if s.Predicate.PublicKey != "" {
		p.carried, _ = ParsePublicKey([]byte(s.Predicate.PublicKey))
	}
	return p, hint, nil
}

// hintFingerprint returns a key hint as a fingerprint: feval writes the hex
// fingerprint; cosign writes the base64 SHA-256 of the key's DER form, which
// is the same value.
func hintFingerprint(h string) string {
	if len(h) > 128 {
		return ""
	}
	if b, err := base64.StdEncoding.DecodeString(h); err == nil && len(b) == sha256.Size {
		return hex.EncodeToString(b)
	}
	if _, err := hex.DecodeString(h); err == nil && len(h) == 2*sha256.Size {
		return strings.ToLower(h)
	}
	return ""
}

// verifiesWith reports whether one of p's signatures verifies with k.
func (p parsedSignature) verifiesWith(k *PublicKey) bool {
	v, err := signature.LoadVerifier(k.Key, crypto.SHA256)
	if err != nil {
		return false
	}
	for _, sig := range p.sigs {
		if v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(p.pae)) == nil {
			return true
		}
	}
	return false
}

// checkOne checks one signature referrer against the trusted keys and, with
// carried set, against the key its statement carries too.
func checkOne(ctx context.Context, st cas.Store, ref, target ocispec.Descriptor, trusted []*PublicKey, carried bool) SignatureCheck {
	c := SignatureCheck{Signature: ref.Digest, Target: target.Digest}
	p, hint, err := readSignature(ctx, st, ref, target)
	if err != nil {
		c.Reason, c.Claimed, c.Malformed = err.Error(), hint, true
		return c
	}
	if carried && p.carried != nil {
		trusted = append(slices.Clip(trusted), p.carried)
	}
	for _, k := range trusted {
		if p.verifiesWith(k) {
			c.Trusted, c.Signer = true, k.Fingerprint
			return c
		}
	}
	switch {
	case p.carried != nil && p.verifiesWith(p.carried):
		c.Signer = p.carried.Fingerprint
		c.Reason = fmt.Sprintf("signed by key %s, which is not trusted", short(c.Signer))
	case isTrusted(p.hint, trusted):
		// The hint only says which key a bad signature claims; it never
		// makes a signature count.
		c.Claimed, c.Malformed = p.hint, true
		c.Reason = fmt.Sprintf("does not verify with key %s", short(p.hint))
	default:
		c.Claimed, c.Malformed = p.hint, true
		c.Reason = "does not verify with the key it names"
	}
	return c
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
// feval signature checked against the public key its statement carries
// (sorted). It says who signed, not whom to trust: the caller compares the
// fingerprints with its own list. Signatures that are malformed, in another
// format or do not verify are skipped; the error wraps ErrNoTrustedSignature,
// naming what was found, only when no signature verified.
func Signers(ctx context.Context, st cas.Store, target ocispec.Descriptor) ([]string, error) {
	refs, err := st.Referrers(ctx, target, MediaTypeSigstoreBundle)
	if err != nil {
		return nil, err
	}
	checks := make([]SignatureCheck, 0, len(refs))
	for _, r := range refs {
		checks = append(checks, checkOne(ctx, st, r, target, nil, true))
	}
	out := TrustedSigners(checks)
	if len(out) == 0 {
		return out, &UntrustedError{Target: target.Digest, Checks: checks}
	}
	return out, nil
}
