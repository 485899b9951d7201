package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Verdict statuses shared by every protocol (DESIGN: infrastructure failure is
// never a score).
const (
	VerdictPassed       = "passed"
	VerdictRejected     = "rejected"
	VerdictUndetermined = "undetermined"
	VerdictInfraError   = "infra_error"
)

// Inputs are the digests of everything a verdict depends on that every
// protocol shares.
type Inputs struct {
	Task            digest.Digest `json:"task"`
	Round           digest.Digest `json:"round"`
	Commitment      digest.Digest `json:"commitment"`
	CommitmentValue string        `json:"commitment_value"`
	Reveal          digest.Digest `json:"reveal"`
	Miner           string        `json:"miner"`
}

// RevealCheck is the outcome of the reveal checks and the clock readings used.
type RevealCheck struct {
	Status     string `json:"status"`
	Reason     string `json:"reason,omitempty"`
	CommitSeen Seen   `json:"commit_seen"`
	RevealSeen Seen   `json:"reveal_seen"`
}

// VerdictHead is what every protocol's verdict record holds under the same
// names: enough for replay and aggregation to find the inputs without knowing
// the protocol.
type VerdictHead struct {
	Protocol    string        `json:"protocol"`
	Status      string        `json:"status"`
	Reason      string        `json:"reason,omitempty"`
	Submission  digest.Digest `json:"submission"`
	Inputs      Inputs        `json:"inputs"`
	RevealCheck RevealCheck   `json:"reveal_check"`
	Sequence    uint64        `json:"sequence"`
}

// ParseVerdictHead reads the shared fields of a verdict record of any
// protocol. The record must already be canonical JSON (bundle.Load checks it).
func ParseVerdictHead(record []byte) (VerdictHead, error) {
	var h VerdictHead
	if err := json.Unmarshal(record, &h); err != nil {
		return h, fmt.Errorf("verdict record: %w: %v", ErrMalformed, err)
	}
	if !ValidProtocol(h.Protocol) || h.Inputs.Reveal.Validate() != nil || h.Inputs.Task.Validate() != nil || h.Inputs.Round.Validate() != nil {
		return h, fmt.Errorf("verdict record: %w: missing protocol or inputs", ErrMalformed)
	}
	return h, nil
}

// NewVerdictHead fills the shared fields from the refs and the reveal check.
func NewVerdictHead(protocol string, refs Refs, entry Entry, sequence uint64) VerdictHead {
	h := VerdictHead{
		Protocol:   protocol,
		Submission: refs.Submission.Digest,
		Inputs: Inputs{Task: refs.Task, Round: refs.Round.Digest, Commitment: refs.Commitment.Digest,
			CommitmentValue: entry.Commitment, Reveal: refs.Reveal.Digest, Miner: entry.Miner},
		RevealCheck: RevealCheck{Status: entry.Status, Reason: entry.Reason, CommitSeen: entry.CommitSeen},
		Sequence:    sequence,
	}
	if entry.RevealSeen != nil {
		h.RevealCheck.RevealSeen = *entry.RevealSeen
	}
	return h
}

// Refs are the artifacts one evaluation is about, resolved in a store.
type Refs struct {
	Round, Commitment, Reveal, Submission ocispec.Descriptor
	Task                                  digest.Digest
	// Protocol is the round's protocol.
	Protocol string
}

// ResolveRefs follows a reveal to its commitment (its subject), the round (the
// commitment's subject), the task (named by the round) and the submission. A
// submission the store lacks is named by digest only (empty media type).
func ResolveRefs(ctx context.Context, st cas.Store, reveal ocispec.Descriptor) (Refs, error) {
	var rv Reveal
	art, err := LoadAs(ctx, st, reveal, KindReveal, &rv)
	if err != nil {
		return Refs{}, fmt.Errorf("reading reveal: %w", err)
	}
	if art.Manifest.Subject == nil {
		return Refs{}, fmt.Errorf("reveal %s has no subject: %w", reveal.Digest, ErrMalformed)
	}
	refs := Refs{Reveal: art.Desc, Commitment: *art.Manifest.Subject}
	var c Commitment
	cart, err := LoadAs(ctx, st, refs.Commitment, KindCommitment, &c)
	if err != nil {
		return Refs{}, fmt.Errorf("reading commitment: %w", err)
	}
	if cart.Manifest.Subject == nil {
		return Refs{}, fmt.Errorf("commitment %s has no subject: %w", refs.Commitment.Digest, ErrMalformed)
	}
	refs.Round = *cart.Manifest.Subject
	var r Round
	if _, err := LoadAs(ctx, st, refs.Round, KindRound, &r); err != nil {
		return Refs{}, fmt.Errorf("reading round: %w", err)
	}
	refs.Task, refs.Protocol = r.Task, r.Protocol
	sub, err := st.Resolve(ctx, rv.Submission.String())
	if err != nil && !errors.Is(err, cas.ErrNotFound) {
		return Refs{}, err
	}
	refs.Submission = sub
	if err != nil {
		refs.Submission = ocispec.Descriptor{Digest: rv.Submission}
	}
	return refs, nil
}

// Case is one evaluation as a protocol driver sees it: the store that holds
// its inputs (and receives its evidence), the signer of that evidence (nil in
// replay), the resolved artifacts and the reveal check's result.
type Case struct {
	Store    cas.Store
	Signer   *bundle.Signer
	Refs     Refs
	Entry    Entry
	Sequence uint64
	Created  string
}

// Finding is something replay checked outside the verdict record (for example
// a retrained checkpoint against the recorded one): a difference, or with
// Equal set, a confirmation that the recomputed value is the recorded one.
type Finding struct {
	Path       string `json:"path"`
	Recorded   string `json:"recorded"`
	Recomputed string `json:"recomputed"`
	Equal      bool   `json:"equal,omitempty"`
	// Unchecked marks a recorded observation the replay took as recorded
	// without re-deriving it (Recomputed says why, and how to check it).
	Unchecked bool `json:"unchecked,omitempty"`
}

// Detail is one labelled line of a verdict's text rendering.
type Detail struct {
	Label, Value string
}
