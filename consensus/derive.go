package consensus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Request names the inputs of a consensus held in a store.
type Request struct {
	// Round is the round artifact.
	Round digest.Digest
	// Stakes and Rules are a stake table and a rules artifact.
	Stakes digest.Digest
	Rules  digest.Digest
	// Incumbent is the seat holder before the round; nil when vacant.
	Incumbent *Incumbent
}

// Compute derives the consensus record of a round from the content of st: the
// round's entries (reveals that answer its commitments), every verdict that is a
// referrer of an entry's submission or reveal, with every signature attached to
// it, and the stake table and rules artifacts named in req. It writes nothing.
//
// Compute fails when an input is missing or damaged in st (the error wraps
// [cas.ErrNotFound] or a digest error), and on a malformed stake table or rules
// or an invalid incumbent (wrapping [ErrInput]). Verdicts that are unsigned, mis-signed, malformed or
// stale are not errors: they are excluded with their reason.
func Compute(ctx context.Context, st cas.Store, req Request) (Record, error) {
	round, err := loadRound(ctx, st, req.Round)
	if err != nil {
		return Record{}, err
	}
	reveals, err := discoverReveals(ctx, st, round.desc)
	if err != nil {
		return Record{}, err
	}
	return derive(ctx, st, round, reveals, func(es []entry) ([]verdictCandidate, error) {
		return discoverVerdicts(ctx, st, es)
	}, req)
}

// roundInfo is a loaded round.
type roundInfo struct {
	desc ocispec.Descriptor // clean: media type, digest, size, artifact type
	rec  protocol.Round
}

func loadRound(ctx context.Context, st cas.Store, d digest.Digest) (roundInfo, error) {
	desc, err := st.Resolve(ctx, d.String())
	if err != nil {
		return roundInfo{}, fmt.Errorf("round %s: %w", d, err)
	}
	var r protocol.Round
	art, err := protocol.LoadAs(ctx, st, desc, protocol.KindRound, &r)
	if err != nil {
		return roundInfo{}, fmt.Errorf("reading round: %w", err)
	}
	return roundInfo{desc: clean(art.Desc), rec: r}, nil
}

// clean keeps the fields of a descriptor that name content, dropping
// store-specific annotations, so that a subject link is the same from any store.
func clean(d ocispec.Descriptor) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size, ArtifactType: d.ArtifactType}
}

// entry is a reveal of the round that passed the entry checks.
type entry struct {
	reveal     digest.Digest
	submission digest.Digest
	miner      string
}

// discoverReveals lists the reveals of every commitment of the round.
func discoverReveals(ctx context.Context, st cas.Store, round ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	commits, err := st.Referrers(ctx, round, bundle.ArtifactType(protocol.KindCommitment))
	if err != nil {
		return nil, fmt.Errorf("listing commitments of %s: %w", round.Digest, err)
	}
	var out []ocispec.Descriptor
	for _, c := range commits {
		rs, err := st.Referrers(ctx, c, bundle.ArtifactType(protocol.KindReveal))
		if err != nil {
			return nil, fmt.Errorf("listing reveals of %s: %w", c.Digest, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// hardError reports errors that mean the store lacks or has damaged an input,
// as opposed to a record that is invalid in itself.
func hardError(err error) bool {
	return errors.Is(err, cas.ErrNotFound) || errors.Is(err, cas.ErrDigestMismatch) ||
		errors.Is(err, cas.ErrSizeMismatch) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// checkEntry applies the entry checks that need no clock: the reveal and its
// commitment (the reveal's subject) are well-formed records of this round; the
// reveal names the commitment's value and miner and opens it; both are signed
// by the miner's key. ok is false for a reveal that fails a check; err is set
// only when the store lacks or has damaged content.
func checkEntry(ctx context.Context, st cas.Store, round digest.Digest, rd ocispec.Descriptor) (entry, bool, error) {
	var rv protocol.Reveal
	art, err := protocol.LoadAs(ctx, st, rd, protocol.KindReveal, &rv)
	if err != nil {
		return entry{}, false, keepHard(err)
	}
	if rv.Validate() != nil || rv.Round != round || art.Manifest.Subject == nil || !rv.Opens() {
		return entry{}, false, nil
	}
	var c protocol.Commitment
	if _, err := protocol.LoadAs(ctx, st, *art.Manifest.Subject, protocol.KindCommitment, &c); err != nil {
		return entry{}, false, keepHard(err)
	}
	if c.Validate() != nil || c.Round != round || c.Commitment != rv.Commitment || c.Miner != rv.Miner {
		return entry{}, false, nil
	}
	for _, d := range []ocispec.Descriptor{rd, *art.Manifest.Subject} {
		fps, _ := bundle.Signers(ctx, st, d) // failing extra signatures do not matter
		if err := ctx.Err(); err != nil {
			return entry{}, false, err
		}
		if !slices.Contains(fps, rv.Miner) {
			return entry{}, false, nil
		}
	}
	return entry{reveal: rd.Digest, submission: rv.Submission, miner: rv.Miner}, true, nil
}

func keepHard(err error) error {
	if hardError(err) {
		return err
	}
	return nil
}

// verdictCandidate is a verdict to consider and the signature artifacts to check
// for it.
type verdictCandidate struct {
	desc ocispec.Descriptor
	sigs []ocispec.Descriptor
}

// discoverVerdicts lists the verdicts attached to the entries' submissions and
// reveals, each with every signature attached to it.
func discoverVerdicts(ctx context.Context, st cas.Store, es []entry) ([]verdictCandidate, error) {
	seen := make(map[digest.Digest]bool)
	var out []verdictCandidate
	for _, e := range es {
		for _, subj := range []digest.Digest{e.submission, e.reveal} {
			vs, err := st.Referrers(ctx, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: subj}, bundle.ArtifactType(protocol.KindVerdict))
			if err != nil {
				return nil, fmt.Errorf("listing verdicts of %s: %w", subj, err)
			}
			for _, v := range vs {
				if seen[v.Digest] {
					continue
				}
				seen[v.Digest] = true
				sigs, err := st.Referrers(ctx, v, bundle.MediaTypeSigstoreBundle)
				if err != nil {
					return nil, fmt.Errorf("listing signatures of %s: %w", v.Digest, err)
				}
				out = append(out, verdictCandidate{desc: v, sigs: sigs})
			}
		}
	}
	return out, nil
}

// recordedVerdicts resolves the verdicts a record names, each with exactly the
// signatures it names; a missing one is an error wrapping [cas.ErrNotFound].
func recordedVerdicts(ctx context.Context, st cas.Store, ins []VerdictInput) ([]verdictCandidate, error) {
	out := make([]verdictCandidate, 0, len(ins))
	for _, in := range ins {
		desc, err := st.Resolve(ctx, in.Verdict.String())
		if err != nil {
			return nil, fmt.Errorf("verdict %s: %w", in.Verdict, err)
		}
		all, err := st.Referrers(ctx, desc, bundle.MediaTypeSigstoreBundle)
		if err != nil {
			return nil, fmt.Errorf("listing signatures of %s: %w", in.Verdict, err)
		}
		c := verdictCandidate{desc: desc}
		for _, want := range in.Signatures {
			i := slices.IndexFunc(all, func(d ocispec.Descriptor) bool { return d.Digest == want })
			if i < 0 {
				return nil, fmt.Errorf("signature %s of verdict %s: %w", want, in.Verdict, cas.ErrNotFound)
			}
			c.sigs = append(c.sigs, all[i])
		}
		out = append(out, c)
	}
	return out, nil
}

// oneSignature is a store whose only signature referrer, of any subject, is sig:
// it lets [bundle.Signers] check one signature at a time.
type oneSignature struct {
	cas.Store
	sig ocispec.Descriptor
}

func (o oneSignature) Referrers(ctx context.Context, subject ocispec.Descriptor, artifactType string) ([]ocispec.Descriptor, error) {
	if artifactType == bundle.MediaTypeSigstoreBundle {
		return []ocispec.Descriptor{o.sig}, nil
	}
	return o.Store.Referrers(ctx, subject, artifactType)
}

// validSigners returns the fingerprints of the keys whose signatures among sigs
// verify target with the key they carry, sorted.
func validSigners(ctx context.Context, st cas.Store, target ocispec.Descriptor, sigs []ocispec.Descriptor) ([]string, error) {
	var out []string
	for _, s := range sigs {
		fps, _ := bundle.Signers(ctx, oneSignature{st, s}, target)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, fps...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// verdictMeta is what a verdict says it is about.
type verdictMeta struct {
	reveal, submission digest.Digest
	// unverifiedBeacon: the verdict's audit sample was drawn from a plain
	// beacon value, not a verified drand round.
	unverifiedBeacon bool
	// unscored: a strict passed verdict of a protocol without scores
	// (optimizer), which consensus excludes as malformed and a leaderboard
	// shows as passed.
	unscored bool
	// reason is the verdict's reason, as it gives it; summary what it
	// decided, in a few words.
	reason, summary string
}

// votes turns one verdict into votes: one per valid signer, or one excluded vote
// without validator when none signed it validly.
func votes(ctx context.Context, st cas.Store, c verdictCandidate, round roundInfo, entries map[digest.Digest]entry) ([]scoring.Vote, verdictMeta, error) {
	signers, err := validSigners(ctx, st, c.desc, c.sigs)
	if err != nil {
		return nil, verdictMeta{}, err
	}
	r, err := readVerdict(ctx, st, c.desc, round.rec.Protocol)
	if err != nil {
		return nil, verdictMeta{}, fmt.Errorf("verdict %s: %w", c.desc.Digest, err)
	}
	base, meta := r.vote()
	base.Verdict, base.Submission = c.desc.Digest, c.desc.Digest
	// The vote's key is its entry; a verdict about another round, reveal or
	// submission keeps a key no entry has, and scoring excludes it as stale.
	// An unscored verdict is keyed too, for a leaderboard to show it.
	if h := r.head; base.Exclude == "" || meta.unscored {
		if e, ok := entries[h.Inputs.Reveal]; ok && h.Inputs.Round == round.desc.Digest && h.Submission == e.submission {
			base.Submission = e.reveal
		}
	}
	switch {
	case len(c.sigs) == 0:
		base.Exclude = scoring.ReasonUnsigned
	case len(signers) == 0:
		base.Exclude = scoring.ReasonBadSignature
	}
	if len(signers) == 0 {
		return []scoring.Vote{base}, meta, nil
	}
	out := make([]scoring.Vote, len(signers))
	for i, fp := range signers {
		out[i] = base
		out[i].Validator = fp
	}
	return out, meta, nil
}

// derive computes the record from candidate reveals and the verdicts that
// verdictsFor returns for the entries among them.
func derive(ctx context.Context, st cas.Store, round roundInfo, reveals []ocispec.Descriptor,
	verdictsFor func([]entry) ([]verdictCandidate, error), req Request) (Record, error) {
	stakesDesc, err := st.Resolve(ctx, req.Stakes.String())
	if err != nil {
		return Record{}, fmt.Errorf("stake table %s: %w", req.Stakes, err)
	}
	stakes, err := LoadStakes(ctx, st, stakesDesc)
	if err != nil {
		return Record{}, err
	}
	rulesDesc, err := st.Resolve(ctx, req.Rules.String())
	if err != nil {
		return Record{}, fmt.Errorf("rules %s: %w", req.Rules, err)
	}
	rules, err := LoadRules(ctx, st, rulesDesc)
	if err != nil {
		return Record{}, err
	}
	if inc := req.Incumbent; inc != nil {
		if err := inc.Submission.Validate(); err != nil {
			return Record{}, fmt.Errorf("%w: incumbent %q: %v", ErrInput, inc.Submission, err)
		}
		if inc.Score.Sign() < 0 || inc.Score.Cmp(rules.MaxScore) > 0 {
			return Record{}, fmt.Errorf("%w: incumbent score %s is outside [0, max_score %s]", ErrInput, inc.Score, rules.MaxScore)
		}
	}

	slices.SortFunc(reveals, func(a, b ocispec.Descriptor) int { return cmp.Compare(a.Digest, b.Digest) })
	reveals = slices.CompactFunc(reveals, func(a, b ocispec.Descriptor) bool { return a.Digest == b.Digest })
	var es []entry
	byReveal := make(map[digest.Digest]entry)
	for _, rd := range reveals {
		e, ok, err := checkEntry(ctx, st, round.desc.Digest, rd)
		if err != nil {
			return Record{}, fmt.Errorf("reveal %s: %w", rd.Digest, err)
		}
		if ok {
			es = append(es, e)
			byReveal[e.reveal] = e
		}
	}
	cands, err := verdictsFor(es)
	if err != nil {
		return Record{}, err
	}
	slices.SortFunc(cands, func(a, b verdictCandidate) int { return cmp.Compare(a.desc.Digest, b.desc.Digest) })
	cands = slices.CompactFunc(cands, func(a, b verdictCandidate) bool { return a.desc.Digest == b.desc.Digest })

	rec := Record{Inputs: Inputs{
		Round:     round.desc.Digest,
		Reveals:   make([]digest.Digest, len(es)),
		Verdicts:  make([]VerdictInput, len(cands)),
		Stakes:    req.Stakes,
		Rules:     req.Rules,
		Incumbent: req.Incumbent,
	}}
	considered := make([]digest.Digest, len(es))
	for i, e := range es {
		rec.Inputs.Reveals[i], considered[i] = e.reveal, e.reveal
	}
	var all []scoring.Vote
	metas := make(map[digest.Digest]verdictMeta, len(cands))
	for i, c := range cands {
		sigs := make([]digest.Digest, len(c.sigs))
		for j, s := range c.sigs {
			sigs[j] = s.Digest
		}
		slices.Sort(sigs)
		rec.Inputs.Verdicts[i] = VerdictInput{Verdict: c.desc.Digest, Signatures: slices.Compact(sigs)}
		vs, meta, err := votes(ctx, st, c, round, byReveal)
		if err != nil {
			return Record{}, err
		}
		all = append(all, vs...)
		metas[c.desc.Digest] = meta
	}

	agg, err := scoring.Aggregate(all, stakes.Stakes, rules, considered)
	if err != nil {
		return Record{}, err
	}
	rec.ActiveStake, rec.QuorumStake = agg.ActiveStake, agg.QuorumStake
	rec.Results = make([]Result, len(agg.Results))
	challengers := make([]scoring.Result, len(agg.Results))
	for i, r := range agg.Results {
		e := byReveal[r.Submission]
		rec.Results[i] = Result{Reveal: e.reveal, Submission: e.submission, Miner: e.miner, Status: r.Status, Score: r.Score,
			Mean: r.Mean, ClipLow: r.ClipLow, ClipHigh: r.ClipHigh, Votes: r.Votes, ReportingStake: r.ReportingStake,
			PassedStake: r.PassedStake, RejectedStake: r.RejectedStake, QuorumMet: r.QuorumMet}
		challengers[i] = r
		challengers[i].Submission = e.submission
	}
	var incumbent digest.Digest
	var recorded scoring.Ratio
	if req.Incumbent != nil {
		incumbent, recorded = req.Incumbent.Submission, req.Incumbent.Score
	}
	if rec.Seat, err = scoring.Seat(incumbent, recorded, challengers, rules); err != nil {
		return Record{}, err
	}
	rec.Weights = weights(rec.Results, rec.Seat, rules.Weights.For(round.rec.Protocol))

	rec.Counted = make([]Vote, len(agg.Counted))
	for i, v := range agg.Counted {
		m := metas[v.Verdict]
		rec.Counted[i] = Vote{Verdict: v.Verdict, Validator: v.Validator, Reveal: m.reveal, Submission: m.submission,
			Sequence: v.Sequence, Status: v.Status, Score: v.Score}
	}
	rec.Excluded = make([]Exclusion, len(agg.Excluded))
	for i, x := range agg.Excluded {
		m := metas[x.Verdict]
		rec.Excluded[i] = Exclusion{Verdict: x.Verdict, Validator: x.Validator, Reveal: m.reveal, Submission: m.submission,
			Sequence: x.Sequence, Reason: x.Reason}
	}
	slices.SortFunc(rec.Counted, func(a, b Vote) int {
		return cmp.Or(cmp.Compare(a.Reveal, b.Reveal), cmp.Compare(a.Validator, b.Validator), cmp.Compare(a.Verdict, b.Verdict))
	})
	slices.SortFunc(rec.Excluded, func(a, b Exclusion) int {
		return cmp.Or(cmp.Compare(a.Reveal, b.Reveal), cmp.Compare(a.Validator, b.Validator), cmp.Compare(a.Sequence, b.Sequence),
			cmp.Compare(a.Verdict, b.Verdict), cmp.Compare(a.Reason, b.Reason))
	})
	return rec, nil
}

// weights computes the u16 vector over miners by the protocol's rule: from
// their best passed entries (proportional), or all to the seat holder's entry
// (seat; everything burnt while the seat is vacant or its holder has no entry
// in the round); see [Weights].
func weights(results []Result, seat scoring.SeatDecision, rule scoring.WeightRule) Weights {
	if rule == scoring.WeightsSeat {
		return seatWeights(results, seat)
	}
	best := make(map[string]Result)
	for _, r := range results {
		if r.Status != scoring.StatusPassed {
			continue
		}
		b, ok := best[r.Miner]
		if !ok || cmp.Or(-r.Score.Cmp(b.Score), cmp.Compare(r.Reveal, b.Reveal)) < 0 {
			best[r.Miner] = r
		}
	}
	sum := new(big.Rat)
	for _, r := range best {
		sum.Add(sum, r.Score.Rat())
	}
	w := Weights{Miners: make([]MinerWeight, 0, len(best))}
	units := UnitsTotal
	for m, r := range best {
		weight := new(big.Rat)
		if sum.Sign() > 0 {
			weight.Quo(r.Score.Rat(), sum)
		}
		u := new(big.Int).Mul(weight.Num(), big.NewInt(UnitsTotal))
		u.Quo(u, weight.Denom()) // floor: weight >= 0
		units -= int(u.Int64())
		w.Miners = append(w.Miners, MinerWeight{Miner: m, Reveal: r.Reveal, Submission: r.Submission, Score: r.Score,
			Weight: scoring.RatioOf(weight), Units: uint16(u.Int64())})
	}
	// The weights sum to 1 (or 0), so their floors sum to at most UnitsTotal.
	w.BurnUnits = uint16(units)
	slices.SortFunc(w.Miners, func(a, b MinerWeight) int { return cmp.Compare(a.Miner, b.Miner) })
	return w
}

// seatWeights gives every unit to the miner of the seat holder's entry (the
// smallest reveal digest if it has several), or burns them all.
func seatWeights(results []Result, seat scoring.SeatDecision) Weights {
	w := Weights{Miners: []MinerWeight{}, BurnUnits: UnitsTotal}
	var holder *Result
	for i, r := range results {
		if seat.Holder != "" && r.Submission == seat.Holder && (holder == nil || r.Reveal < holder.Reveal) {
			holder = &results[i]
		}
	}
	if holder != nil {
		w.Miners = append(w.Miners, MinerWeight{Miner: holder.Miner, Reveal: holder.Reveal, Submission: holder.Submission,
			Score: holder.Score, Weight: scoring.NewRatio(1, 1), Units: UnitsTotal})
		w.BurnUnits = 0
	}
	return w
}
