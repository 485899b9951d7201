package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Collect brings a round's commitments, reveals and revealed submissions (with
// their signatures) from src into the validator's layout, then records obs as the
// first-seen time of every commitment and reveal not seen before. src may be the
// layout itself. It returns the first-seen records.
func Collect(ctx context.Context, src cas.Store, l *cas.Layout, round ocispec.Descriptor, obs Observation) (map[digest.Digest]Seen, error) {
	if src != cas.Store(l) {
		if _, err := cas.Copy(ctx, src, l, round, cas.CopyOptions{Referrers: true, Subjects: true, Siblings: true}); err != nil {
			return nil, fmt.Errorf("collecting round %s: %w", round.Digest, err)
		}
	}
	var r Round
	if _, err := LoadAs(ctx, l, round, KindRound, &r); err != nil {
		return nil, fmt.Errorf("reading round: %w", err)
	}
	var observed []digest.Digest
	commits, err := l.Referrers(ctx, round, bundle.ArtifactType(KindCommitment))
	if err != nil {
		return nil, err
	}
	for _, c := range commits {
		observed = append(observed, c.Digest)
		reveals, err := l.Referrers(ctx, c, bundle.ArtifactType(KindReveal))
		if err != nil {
			return nil, err
		}
		// The commitment's key, when it is sound (its timing does not matter
		// here): only the miner's valid openings bring a submission in.
		_, key := checkCommitment(ctx, l, c, round.Digest, r, Seen{})
		for _, rd := range reveals {
			observed = append(observed, rd.Digest)
			var rv Reveal
			if _, err := LoadAs(ctx, l, rd, KindReveal, &rv); err != nil || rv.Validate() != nil {
				continue // CheckRound reports it
			}
			if key == nil || rv.Miner != key.Fingerprint || !rv.Opens() || !signedBy(ctx, l, rd, key) {
				continue // not the miner's opening: whoever pushed it cannot make the validator fetch anything
			}
			if _, err := l.Resolve(ctx, rv.Submission.String()); err == nil || src == cas.Store(l) {
				continue
			}
			sd, err := src.Resolve(ctx, rv.Submission.String())
			if errors.Is(err, cas.ErrNotFound) {
				continue // reported as submission_missing
			}
			if err != nil {
				return nil, err
			}
			err = CopySubmission(ctx, src, l, sd)
			if errors.Is(err, cas.ErrNotFound) {
				continue // not whole at the source (its model is missing): reported as submission_missing
			}
			if err != nil {
				return nil, fmt.Errorf("collecting submission %s: %w", rv.Submission, err)
			}
		}
	}
	if err := l.Flush(); err != nil {
		return nil, err
	}
	return Observe(l, observed, obs)
}

// CopySubmission copies a submission from src to dst with its signatures and
// its subject, if it has one (a rollouts submission's model), with the
// subject's signatures. A submission is whole only with its subject: one
// whose subject is not at src is not copied, and the error wraps
// cas.ErrNotFound as for a missing submission.
func CopySubmission(ctx context.Context, src, dst cas.Store, desc ocispec.Descriptor) error {
	_, err := cas.Copy(ctx, src, dst, desc, cas.CopyOptions{Referrers: true, Subjects: true})
	return err
}

// Preview returns what Collect from the layout itself would return (the
// first-seen records, with obs as the reading of every commitment and reveal
// of the round not seen before) and those commitments and reveals, without
// writing anything. Observe(l, observed, obs) later records them; it returns
// the same records unless another process observed some of them meanwhile.
func Preview(ctx context.Context, l *cas.Layout, round ocispec.Descriptor, obs Observation) (seen map[digest.Digest]Seen, observed []digest.Digest, err error) {
	commits, err := l.Referrers(ctx, round, bundle.ArtifactType(KindCommitment))
	if err != nil {
		return nil, nil, err
	}
	for _, c := range commits {
		observed = append(observed, c.Digest)
		reveals, err := l.Referrers(ctx, c, bundle.ArtifactType(KindReveal))
		if err != nil {
			return nil, nil, err
		}
		for _, rd := range reveals {
			observed = append(observed, rd.Digest)
		}
	}
	if seen, err = LoadSeen(l); err != nil {
		return nil, nil, err
	}
	for _, d := range observed {
		if _, ok := seen[d]; !ok {
			seen[d] = obs.seen()
		}
	}
	return seen, observed, nil
}
