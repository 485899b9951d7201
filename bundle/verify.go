package bundle

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Problem is one failure Verify found, with the object it concerns.
type Problem struct {
	Object digest.Digest `json:"object"`
	// Role is what the object is to the artifact: manifest, config, record,
	// payload, signature or subject.
	Role   string `json:"role"`
	Detail string `json:"detail"`
	err    error
}

func (p Problem) Error() string { return fmt.Sprintf("%s %s: %s", p.Role, p.Object, p.Detail) }

// Unwrap returns the underlying error, so errors.Is sees ErrNoTrustedSignature,
// cas.ErrDigestMismatch and the like through a Report.
func (p Problem) Unwrap() error { return p.err }

// ErrVerify is wrapped by the error of a Report with problems.
var ErrVerify = errors.New("verification failed")

// Report is what Verify checked and found.
type Report struct {
	Root     digest.Digest              `json:"root"`
	Objects  int                        `json:"objects"`
	Signers  map[digest.Digest][]string `json:"manifest_signers"` // manifest -> trusted fingerprints
	Problems []Problem                  `json:"problems"`
	// Skipped lists the signature referrers that did not count: by keys that
	// are not trusted, in another tool's format, unreadable or failing. They
	// are reported, never decisive: a manifest a trusted key signed verifies
	// whatever else is attached to it.
	Skipped []SignatureCheck `json:"skipped"`
}

// Err returns nil for a clean report, else every problem joined, wrapping ErrVerify.
func (r Report) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	errs := []error{fmt.Errorf("%s: %w with %d problems", r.Root, ErrVerify, len(r.Problems))}
	for _, p := range r.Problems {
		errs = append(errs, p)
	}
	return errors.Join(errs...)
}

// Verify checks the closure of root: every blob's digest and size, each payload's
// uncompressed digest, the record's canonical form, a trusted signature on every
// manifest, and the same for each subject up the chain. It reports every problem
// rather than stopping at the first.
func Verify(ctx context.Context, st cas.Store, root ocispec.Descriptor, trusted []*PublicKey) Report {
	v := &verifier{ctx: ctx, st: st, trusted: trusted, seen: map[digest.Digest]bool{},
		rep: Report{Root: root.Digest, Signers: map[digest.Digest][]string{}, Problems: []Problem{}, Skipped: []SignatureCheck{}}}
	v.manifest(root, "manifest")
	return v.rep
}

// VerifyRanged is Verify, except that a blob read by byte range (a rollouts
// rows layer, MediaTypeRows) is only checked to be present with its size:
// whoever reads it checks each range against a hash it trusts (an audit
// checks every row it reads against the rows index, docs/PROTOCOL.md §6), so
// replaying an audit costs what the audit reads. feval verify and fsck check
// such a blob whole (Verify), as a full evaluation does.
func VerifyRanged(ctx context.Context, st cas.Store, root ocispec.Descriptor, trusted []*PublicKey) Report {
	v := &verifier{ctx: ctx, st: st, trusted: trusted, seen: map[digest.Digest]bool{}, ranged: true,
		rep: Report{Root: root.Digest, Signers: map[digest.Digest][]string{}, Problems: []Problem{}, Skipped: []SignatureCheck{}}}
	v.manifest(root, "manifest")
	return v.rep
}

// VerifyRangedBeyond is VerifyRanged, except that the manifests in sound
// (each found sound, with everything below it, by an earlier Verify or
// VerifyRanged of the same store) are neither read again nor reported: the
// replays of several verdicts verify the task and round they share once.
func VerifyRangedBeyond(ctx context.Context, st cas.Store, root ocispec.Descriptor, trusted []*PublicKey, sound map[digest.Digest]bool) Report {
	seen := make(map[digest.Digest]bool, len(sound))
	for d, ok := range sound {
		if ok && d != root.Digest {
			seen[d] = true
		}
	}
	v := &verifier{ctx: ctx, st: st, trusted: trusted, seen: seen, ranged: true,
		rep: Report{Root: root.Digest, Signers: map[digest.Digest][]string{}, Problems: []Problem{}, Skipped: []SignatureCheck{}}}
	v.manifest(root, "manifest")
	return v.rep
}

type verifier struct {
	ctx     context.Context
	st      cas.Store
	trusted []*PublicKey
	seen    map[digest.Digest]bool
	rep     Report
	ranged  bool
}

func (v *verifier) problem(d digest.Digest, role string, err error) {
	v.rep.Problems = append(v.rep.Problems, Problem{Object: d, Role: role, Detail: err.Error(), err: err})
}

func (v *verifier) manifest(desc ocispec.Descriptor, role string) {
	if v.seen[desc.Digest] {
		return
	}
	v.seen[desc.Digest] = true
	v.rep.Objects++
	if desc.MediaType == "" {
		desc.MediaType = ocispec.MediaTypeImageManifest
	}
	node, _, err := cas.FetchNode(v.ctx, v.st, desc)
	if err != nil {
		v.problem(desc.Digest, role, err)
		return
	}
	desc.ArtifactType = node.ArtifactType
	for i, c := range node.Children {
		crole := "payload"
		switch {
		case i == 0:
			crole = "config"
		case i == 1 && KindOf(node.ArtifactType) != "":
			crole = "record"
		}
		v.blob(c, crole)
	}
	if KindOf(node.ArtifactType) != "" {
		if _, err := Load(v.ctx, v.st, desc); err != nil && !errors.Is(err, cas.ErrDigestMismatch) {
			v.problem(desc.Digest, role, err)
		}
	}
	if node.ArtifactType == ArtifactTypeModelManifest {
		if _, err := LoadModel(v.ctx, v.st, desc); err != nil && !errors.Is(err, cas.ErrDigestMismatch) {
			v.problem(desc.Digest, role, err)
		}
	}
	checks, err := CheckSignatures(v.ctx, v.st, desc, v.trusted)
	if err != nil {
		v.problem(desc.Digest, role, fmt.Errorf("listing signatures: %w", err))
	}
	signers := TrustedSigners(checks)
	v.rep.Signers[desc.Digest] = signers
	for _, c := range checks {
		if c.Trusted {
			continue
		}
		v.rep.Skipped = append(v.rep.Skipped, c)
		if len(signers) == 0 && c.Malformed {
			// With no trusted signature, say what is wrong with the others.
			v.problem(c.Signature, "signature", fmt.Errorf("%s (on %s): %w", c.Reason, c.Target, ErrBadSignature))
		}
	}
	if err == nil && len(signers) == 0 {
		v.problem(desc.Digest, role, &UntrustedError{Target: desc.Digest, Checks: checks})
	}
	if node.Subject != nil {
		v.manifest(*node.Subject, "subject")
	}
}

func (v *verifier) blob(desc ocispec.Descriptor, role string) {
	if v.seen[desc.Digest] {
		return
	}
	v.seen[desc.Digest] = true
	v.rep.Objects++
	if v.ranged && desc.MediaType == MediaTypeRows {
		f, err := cas.OpenAt(v.ctx, v.st, desc, desc.Size)
		if err != nil {
			v.problem(desc.Digest, role, err)
			return
		}
		f.Close()
		return
	}
	rc, err := v.st.Fetch(v.ctx, desc)
	if err != nil {
		v.problem(desc.Digest, role, err)
		return
	}
	_, err = io.Copy(io.Discard, rc)
	rc.Close()
	if err != nil {
		v.problem(desc.Digest, role, err)
		return
	}
	if _, ok := desc.Annotations[AnnotationContentDigest]; ok && desc.MediaType == MediaTypeTree {
		pr, err := OpenPayload(v.ctx, v.st, desc)
		if err == nil {
			_, err = io.Copy(io.Discard, pr)
			pr.Close()
		}
		if err != nil {
			v.problem(desc.Digest, role, fmt.Errorf("uncompressed content: %w", err))
		}
	}
}
