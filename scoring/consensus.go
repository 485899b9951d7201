package scoring

import (
	"cmp"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/opencontainers/go-digest"
)

// Status is the outcome a verdict or a consensus states about a submission.
type Status string

// The four statuses of a verdict. A consensus result is passed, rejected or
// undetermined; infra_error is never a consensus outcome.
const (
	StatusPassed       Status = "passed"
	StatusRejected     Status = "rejected"
	StatusUndetermined Status = "undetermined"
	StatusInfraError   Status = "infra_error"
)

func (s Status) valid() bool {
	switch s {
	case StatusPassed, StatusRejected, StatusUndetermined, StatusInfraError:
		return true
	}
	return false
}

// Reason names why a vote was not counted.
type Reason string

// Reasons a vote is excluded, in the order [Aggregate] checks them; a vote is
// reported with the first that applies. ReasonUnsigned and ReasonBadSignature are
// never produced here: they are the conventional values for [Vote.Exclude], which
// the caller sets after checking signatures.
const (
	ReasonUnsigned         Reason = "unsigned"
	ReasonBadSignature     Reason = "bad_signature"
	ReasonInvalidStatus    Reason = "invalid_status"
	ReasonScoreOutOfRange  Reason = "score_out_of_range"
	ReasonUnknownValidator Reason = "unknown_validator"
	ReasonZeroStake        Reason = "zero_stake"
	ReasonStale            Reason = "stale"
	ReasonDuplicate        Reason = "duplicate"
	ReasonInfraError       Reason = "infra_error"
	ReasonUndetermined     Reason = "undetermined"
)

// Vote is one validator's verdict on one submission, as plain values. The caller
// has read the signed verdict and checked its signature; a verdict that failed
// those checks is still passed in, with Exclude set, so that the consensus
// accounts for it.
type Vote struct {
	// Verdict identifies the verdict record (its manifest digest). It is opaque
	// here: it names the vote in the output and breaks ties between duplicates.
	Verdict digest.Digest `json:"verdict"`
	// Validator is the fingerprint of the validator's signing key.
	Validator string `json:"validator"`
	// Submission is the digest of the submission the verdict scored.
	Submission digest.Digest `json:"submission"`
	// Sequence is the validator's own sequence number; of several verdicts by one
	// validator on one submission, the highest sequence number counts.
	Sequence uint64 `json:"sequence"`
	// Status is the verdict's status.
	Status Status `json:"status"`
	// Score is the verdict's score, 0 <= Score <= Rules.MaxScore. It is counted
	// for passed and rejected verdicts (a rejected verdict normally scores 0) and
	// ignored otherwise.
	Score Ratio `json:"score"`
	// Exclude, when not empty, excludes the vote with this reason before any
	// other rule applies (for example ReasonUnsigned or ReasonBadSignature).
	Exclude Reason `json:"exclude,omitempty"`
}

// Exclusion records a vote that was not counted and why.
type Exclusion struct {
	Verdict    digest.Digest `json:"verdict"`
	Validator  string        `json:"validator"`
	Submission digest.Digest `json:"submission"`
	Sequence   uint64        `json:"sequence"`
	Reason     Reason        `json:"reason"`
}

// Result is the consensus on one submission.
type Result struct {
	// Submission is the submission's digest.
	Submission digest.Digest `json:"submission"`
	// Status is undetermined when the quorum is not met; otherwise passed when
	// the stake of counted passed votes exceeds the stake of counted rejected
	// votes, and rejected when it does not.
	Status Status `json:"status"`
	// Score is the stake-weighted Winsorized mean of the counted votes' scores
	// (0 without counted votes). It is informational when Status is
	// undetermined.
	Score Ratio `json:"score"`
	// Mean is the stake-weighted mean without clipping, for comparison.
	Mean Ratio `json:"mean"`
	// ClipLow and ClipHigh are the bounds every counted score was clipped to.
	ClipLow  Ratio `json:"clip_low"`
	ClipHigh Ratio `json:"clip_high"`
	// Votes is the number of counted votes.
	Votes int `json:"votes"`
	// ReportingStake is the total stake of the validators whose votes counted.
	ReportingStake uint64 `json:"reporting_stake"`
	// PassedStake and RejectedStake split ReportingStake by the votes' status.
	PassedStake   uint64 `json:"passed_stake"`
	RejectedStake uint64 `json:"rejected_stake"`
	// QuorumMet reports ReportingStake > 0 and ReportingStake >= the quorum
	// fraction of the active stake.
	QuorumMet bool `json:"quorum_met"`
}

// Consensus is the outcome of [Aggregate]. Every input vote appears exactly once,
// in Counted or in Excluded.
type Consensus struct {
	// ActiveStake is the total stake of the stake table.
	ActiveStake uint64 `json:"active_stake"`
	// QuorumStake is the reporting stake a submission needs: Quorum x
	// ActiveStake, exact.
	QuorumStake Ratio `json:"quorum_stake"`
	// Results holds one result per submission under consideration, sorted by
	// digest.
	Results []Result `json:"results"`
	// Counted holds the votes that counted, sorted by submission then validator.
	Counted []Vote `json:"counted"`
	// Excluded holds the votes that did not count, sorted by submission,
	// validator, sequence, verdict and reason.
	Excluded []Exclusion `json:"excluded"`
}

// ErrStakeOverflow reports a stake table whose total does not fit in a uint64.
var ErrStakeOverflow = errors.New("total stake overflows uint64")

// Aggregate computes the consensus of votes on the submissions under
// consideration. stakes maps validator key fingerprints to stake in the chain's
// smallest unit; considered lists the submission digests of the round.
//
// Votes are excluded, each with the first reason that applies, in this order:
// Exclude set by the caller; ReasonInvalidStatus; ReasonScoreOutOfRange (passed
// and rejected votes only); ReasonUnknownValidator; ReasonZeroStake; ReasonStale
// (submission not under consideration); ReasonDuplicate (another remaining vote
// of the same validator on the same submission wins: the highest Sequence, then
// the smallest Verdict, then the smallest Status, then the smallest Score);
// ReasonInfraError; ReasonUndetermined. The remaining votes count.
//
// The result is exact and does not depend on the order of votes or considered.
// Aggregate fails only on invalid rules, an empty digest in considered, an empty
// fingerprint in stakes, or a total stake beyond uint64 ([ErrStakeOverflow]).
func Aggregate(votes []Vote, stakes map[string]uint64, rules Rules, considered []digest.Digest) (Consensus, error) {
	if err := errors.Join(rules.validateMaxScore(), rules.validateAggregation()); err != nil {
		return Consensus{}, fmt.Errorf("aggregate: %w", err)
	}
	subs := slices.Clone(considered)
	slices.Sort(subs)
	subs = slices.Compact(subs)
	if len(subs) > 0 && subs[0] == "" {
		return Consensus{}, errors.New("aggregate: empty submission digest under consideration")
	}
	var active uint64
	for fp, s := range stakes {
		if fp == "" {
			return Consensus{}, errors.New("aggregate: empty validator fingerprint in stake table")
		}
		if active+s < active {
			return Consensus{}, fmt.Errorf("aggregate: %w", ErrStakeOverflow)
		}
		active += s
	}

	out := Consensus{ActiveStake: active, Results: make([]Result, 0, len(subs))}
	exclude := func(v Vote, r Reason) {
		out.Excluded = append(out.Excluded, Exclusion{Verdict: v.Verdict, Validator: v.Validator, Submission: v.Submission, Sequence: v.Sequence, Reason: r})
	}
	type key struct {
		validator  string
		submission digest.Digest
	}
	latest := make(map[key]Vote)
	for _, v := range votes {
		if r := precheck(v, stakes, rules.MaxScore, subs); r != "" {
			exclude(v, r)
			continue
		}
		k := key{v.Validator, v.Submission}
		prev, ok := latest[k]
		switch {
		case !ok:
			latest[k] = v
		case supersedes(v, prev):
			latest[k] = v
			exclude(prev, ReasonDuplicate)
		default:
			exclude(v, ReasonDuplicate)
		}
	}
	bySub := make(map[digest.Digest][]Vote)
	for _, v := range latest {
		switch v.Status {
		case StatusInfraError:
			exclude(v, ReasonInfraError)
		case StatusUndetermined:
			exclude(v, ReasonUndetermined)
		default:
			bySub[v.Submission] = append(bySub[v.Submission], v)
			out.Counted = append(out.Counted, v)
		}
	}

	q := rules.Quorum.val()
	out.QuorumStake = ratio(new(big.Rat).Mul(q, new(big.Rat).SetInt(new(big.Int).SetUint64(active))))
	for _, s := range subs {
		res, err := result(s, bySub[s], stakes, rules.Winsorization, out.QuorumStake)
		if err != nil {
			return Consensus{}, fmt.Errorf("aggregate: submission %s: %w", s, err)
		}
		out.Results = append(out.Results, res)
	}
	slices.SortFunc(out.Counted, func(a, b Vote) int {
		return cmp.Or(cmp.Compare(a.Submission, b.Submission), cmp.Compare(a.Validator, b.Validator))
	})
	slices.SortFunc(out.Excluded, func(a, b Exclusion) int {
		return cmp.Or(cmp.Compare(a.Submission, b.Submission), cmp.Compare(a.Validator, b.Validator),
			cmp.Compare(a.Sequence, b.Sequence), cmp.Compare(a.Verdict, b.Verdict), cmp.Compare(a.Reason, b.Reason))
	})
	if out.Counted == nil {
		out.Counted = []Vote{}
	}
	if out.Excluded == nil {
		out.Excluded = []Exclusion{}
	}
	return out, nil
}

// precheck returns the reason a vote is excluded before duplicates are resolved,
// or "" if it is not.
func precheck(v Vote, stakes map[string]uint64, maxScore Ratio, subs []digest.Digest) Reason {
	switch {
	case v.Exclude != "":
		return v.Exclude
	case !v.Status.valid():
		return ReasonInvalidStatus
	case (v.Status == StatusPassed || v.Status == StatusRejected) && (v.Score.Sign() < 0 || v.Score.Cmp(maxScore) > 0):
		return ReasonScoreOutOfRange
	}
	stake, known := stakes[v.Validator]
	switch {
	case !known:
		return ReasonUnknownValidator
	case stake == 0:
		return ReasonZeroStake
	}
	if _, found := slices.BinarySearch(subs, v.Submission); !found {
		return ReasonStale
	}
	return ""
}

// supersedes reports whether vote a wins over vote b of the same validator on the
// same submission: the higher sequence number, then the smaller verdict digest,
// then the smaller status, then the smaller score. Votes equal in all of these
// are interchangeable.
func supersedes(a, b Vote) bool {
	if a.Sequence != b.Sequence {
		return a.Sequence > b.Sequence
	}
	return cmp.Or(cmp.Compare(a.Verdict, b.Verdict), cmp.Compare(a.Status, b.Status), a.Score.Cmp(b.Score)) < 0
}

// result computes the consensus on one submission from its counted votes.
func result(sub digest.Digest, votes []Vote, stakes map[string]uint64, w Winsorization, quorumStake Ratio) (Result, error) {
	res := Result{Submission: sub, Status: StatusUndetermined, Votes: len(votes)}
	samples := make([]Sample, len(votes))
	for i, v := range votes {
		s := stakes[v.Validator]
		samples[i] = Sample{Score: v.Score, Stake: s}
		// Cannot overflow: the counted validators are distinct entries of a table
		// whose total fits in a uint64.
		res.ReportingStake += s
		if v.Status == StatusPassed {
			res.PassedStake += s
		} else {
			res.RejectedStake += s
		}
	}
	if len(samples) > 0 {
		win, err := Winsorize(samples, w)
		if err != nil {
			return Result{}, err
		}
		res.Score, res.Mean, res.ClipLow, res.ClipHigh = win.Score, win.Mean, win.Low, win.High
	}
	reporting := new(big.Rat).SetInt(new(big.Int).SetUint64(res.ReportingStake))
	res.QuorumMet = res.ReportingStake > 0 && reporting.Cmp(quorumStake.val()) >= 0
	switch {
	case !res.QuorumMet:
	case res.PassedStake > res.RejectedStake:
		res.Status = StatusPassed
	default:
		res.Status = StatusRejected
	}
	return res, nil
}

// Sample is one score with the stake behind it.
type Sample struct {
	Score Ratio
	Stake uint64
}

// Winsorized is the outcome of [Winsorize].
type Winsorized struct {
	// Score is the stake-weighted mean of the scores clipped to [Low, High].
	Score Ratio
	// Mean is the stake-weighted mean of the unclipped scores.
	Mean Ratio
	// Low and High are the clipping bounds.
	Low, High Ratio
}

// Winsorize clips the samples' scores by the rule w and returns their
// stake-weighted mean, exactly. The result does not depend on the order of the
// samples. It fails on no samples, a sample with zero stake, or an invalid w.
//
// With sorted scores x(1) <= ... <= x(n), stakes s(k), cumulative stake
// C(k) = s(1) + ... + s(k) and total W = C(n):
//
//   - WinsorStakePercentile: Low = x(k) for the smallest k with C(k) > Lower*W;
//     High = x(k) for the largest k with C(k-1) < Upper*W.
//   - WinsorCount: for n >= 4, Low = x(2) and High = x(n-1); for n <= 3,
//     Low = x(1) and High = x(n).
//
// Score = sum of s(k) * min(max(x(k), Low), High) over W.
func Winsorize(samples []Sample, w Winsorization) (Winsorized, error) {
	if len(samples) == 0 {
		return Winsorized{}, errors.New("winsorize: no samples")
	}
	if err := w.validate(); err != nil {
		return Winsorized{}, fmt.Errorf("winsorize: %w", err)
	}
	sorted := slices.Clone(samples)
	slices.SortStableFunc(sorted, func(a, b Sample) int { return a.Score.Cmp(b.Score) })
	n := len(sorted)
	total := new(big.Int)
	for i, s := range sorted {
		if s.Stake == 0 {
			return Winsorized{}, fmt.Errorf("winsorize: sample %d has zero stake", i)
		}
		total.Add(total, new(big.Int).SetUint64(s.Stake))
	}
	var lo, hi Ratio
	switch w.Mode {
	case WinsorCount:
		lo, hi = sorted[0].Score, sorted[n-1].Score
		if n >= 4 {
			lo, hi = sorted[1].Score, sorted[n-2].Score
		}
	default:
		totalRat := new(big.Rat).SetInt(total)
		lowMass := new(big.Rat).Mul(w.Lower.val(), totalRat)
		highMass := new(big.Rat).Mul(w.Upper.val(), totalRat)
		cum := new(big.Rat) // C(k-1) at the top of iteration k
		lo, hi = sorted[n-1].Score, sorted[0].Score
		foundLow := false
		for _, s := range sorted {
			if cum.Cmp(highMass) < 0 {
				hi = s.Score
			}
			cum.Add(cum, new(big.Rat).SetInt(new(big.Int).SetUint64(s.Stake)))
			if !foundLow && cum.Cmp(lowMass) > 0 {
				lo, foundLow = s.Score, true
			}
		}
	}
	sum, clipped := new(big.Rat), new(big.Rat)
	for _, s := range sorted {
		stake := new(big.Rat).SetInt(new(big.Int).SetUint64(s.Stake))
		sum.Add(sum, new(big.Rat).Mul(stake, s.Score.val()))
		x := s.Score
		if x.Cmp(lo) < 0 {
			x = lo
		}
		if x.Cmp(hi) > 0 {
			x = hi
		}
		clipped.Add(clipped, new(big.Rat).Mul(stake, x.val()))
	}
	totalRat := new(big.Rat).SetInt(total)
	return Winsorized{
		Score: ratio(clipped.Quo(clipped, totalRat)),
		Mean:  ratio(sum.Quo(sum, totalRat)),
		Low:   lo,
		High:  hi,
	}, nil
}
