package consensus

import (
	"context"
	"fmt"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/replay"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// ReplayResult is the outcome of [Replay].
type ReplayResult struct {
	// Consensus is the record replayed.
	Consensus digest.Digest `json:"consensus"`
	// Round is the round it is about.
	Round digest.Digest `json:"round"`
	// Outcome is [replay.Identical] or [replay.Differs].
	Outcome string `json:"outcome"`
	// Recomputed is the digest of the regenerated record.
	Recomputed digest.Digest `json:"recomputed"`
	// Signers are the trusted keys that signed the record.
	Signers []string `json:"signers"`
	// Skipped lists the record's signatures that did not count.
	Skipped []bundle.SignatureCheck `json:"skipped"`
	// Diffs lists the differing fields of the records when Outcome is Differs.
	Diffs []replay.Diff `json:"diffs"`
}

// Replay re-derives the consensus record d held in st from the inputs it
// records, and nothing else: the round, the reveals (re-checked), the verdicts
// with exactly the signature artifacts it names (re-verified), the stake table
// and rules artifacts and the incumbent. It encodes the result as Run would have
// written it (same subject and creation time) and compares digests; on a
// difference it lists the differing fields ([replay.DiffJSON]).
//
// trusted are the keys the caller accepts: the record must be signed by one of
// them (else the error wraps [replay.ErrUntrusted] and names who signed), and
// so must its stake table and rules artifacts (else the error wraps
// [bundle.ErrNoTrustedSignature]). With no trusted keys Replay refuses
// ([replay.ErrNoTrustedKeys]). A record that is not a well-formed, signed consensus
// artifact is an error wrapping [bundle.ErrVerify]; a missing input wraps
// [cas.ErrNotFound]. A record that verifies but regenerates differently is not an
// error: it is a result with Outcome Differs.
func Replay(ctx context.Context, st cas.Store, d digest.Digest, trusted []*bundle.PublicKey) (ReplayResult, error) {
	res := ReplayResult{Consensus: d, Diffs: []replay.Diff{}, Skipped: []bundle.SignatureCheck{}}
	if len(trusted) == 0 {
		return res, replay.ErrNoTrustedKeys
	}
	desc, err := st.Resolve(ctx, d.String())
	if err != nil {
		return res, fmt.Errorf("consensus %s: %w", d, err)
	}
	var recorded Record
	art, err := protocol.LoadAs(ctx, st, desc, KindConsensus, &recorded)
	if err != nil {
		return res, fmt.Errorf("consensus %s: %w: %v", d, bundle.ErrVerify, err)
	}
	res.Round = recorded.Inputs.Round
	if res.Signers, res.Skipped, err = replay.TrustedSignatures(ctx, st, art.Desc, trusted); err != nil {
		return res, fmt.Errorf("consensus %s: %w", d, err)
	}
	for _, in := range []struct {
		what string
		d    digest.Digest
	}{{"stake table", recorded.Inputs.Stakes}, {"rules", recorded.Inputs.Rules}} {
		idesc, err := st.Resolve(ctx, in.d.String())
		if err != nil {
			return res, fmt.Errorf("%s %s: %w", in.what, in.d, err)
		}
		if err := checkInputSigners(ctx, st, idesc, in.what, trusted); err != nil {
			return res, err
		}
	}
	if art.Manifest.Subject == nil {
		return res, fmt.Errorf("consensus %s has no subject: %w", d, bundle.ErrVerify)
	}

	round, err := loadRound(ctx, st, recorded.Inputs.Round)
	if err != nil {
		return res, err
	}
	reveals := make([]ocispec.Descriptor, len(recorded.Inputs.Reveals))
	for i, r := range recorded.Inputs.Reveals {
		if reveals[i], err = st.Resolve(ctx, r.String()); err != nil {
			return res, fmt.Errorf("reveal %s: %w", r, err)
		}
	}
	regen, err := derive(ctx, st, round, reveals, func([]entry) ([]verdictCandidate, error) {
		return recordedVerdicts(ctx, st, recorded.Inputs.Verdicts)
	}, Request{Round: recorded.Inputs.Round, Stakes: recorded.Inputs.Stakes, Rules: recorded.Inputs.Rules, Incumbent: recorded.Inputs.Incumbent})
	if err != nil {
		return res, err
	}
	subject := round.desc
	enc, err := bundle.Encode(bundle.Artifact{Kind: KindConsensus, Record: regen, Subject: &subject,
		Created: art.Manifest.Annotations[ocispec.AnnotationCreated]})
	if err != nil {
		return res, err
	}
	res.Recomputed = enc.Desc.Digest
	if enc.Desc.Digest == desc.Digest {
		res.Outcome = replay.Identical
		return res, nil
	}
	res.Outcome = replay.Differs
	res.Diffs = replay.DiffJSON(art.Record, enc.Record)
	if len(res.Diffs) == 0 {
		res.Diffs = []replay.Diff{{Path: "(manifest)", Recorded: desc.Digest.String(), Recomputed: enc.Desc.Digest.String()}}
	}
	return res, nil
}
