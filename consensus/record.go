package consensus

import (
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
)

// ReasonMalformed excludes a signed verdict that cannot be read as a verdict of
// the round's protocol, or whose passed score is not a canonical rational.
// The other reasons are [scoring]'s.
const ReasonMalformed scoring.Reason = "malformed"

// UnitsTotal is the sum of every u16 weight vector in a record.
const UnitsTotal = scoring.UnitsTotal

// Record is the consensus record: the signed outcome of one round. Every list is
// sorted as its field states and is never null, so that equal inputs encode to
// equal bytes.
type Record struct {
	// Inputs names everything the record was derived from.
	Inputs Inputs `json:"inputs"`
	// ActiveStake is the total stake of the stake table.
	ActiveStake uint64 `json:"active_stake"`
	// QuorumStake is the reporting stake an entry needs: quorum x active stake.
	QuorumStake scoring.Ratio `json:"quorum_stake"`
	// Results holds the consensus on every entry of the round, sorted by reveal.
	Results []Result `json:"results"`
	// Seat is the seat decision over the results.
	Seat scoring.SeatDecision `json:"seat"`
	// Weights is the u16 weight vector over miners.
	Weights Weights `json:"weights"`
	// Counted holds the votes that counted, sorted by reveal then validator.
	Counted []Vote `json:"counted"`
	// Excluded holds the votes that did not count, sorted by reveal,
	// validator, sequence, verdict and reason.
	Excluded []Exclusion `json:"excluded"`
}

// Inputs are the digests of everything a record depends on. Replay reads exactly
// these and nothing else.
type Inputs struct {
	// Round is the round artifact; it is also the record's subject.
	Round digest.Digest `json:"round"`
	// Reveals are the round's entries, sorted.
	Reveals []digest.Digest `json:"reveals"`
	// Verdicts are every verdict considered (counted or not), sorted by digest.
	Verdicts []VerdictInput `json:"verdicts"`
	// Stakes is the stake table artifact.
	Stakes digest.Digest `json:"stakes"`
	// Rules is the rules artifact.
	Rules digest.Digest `json:"rules"`
	// Incumbent is the seat holder before the round; absent when the seat was
	// vacant.
	Incumbent *Incumbent `json:"incumbent,omitempty"`
}

// VerdictInput is one verdict considered and the signature artifacts (its
// sigstore-bundle referrers) that were checked for it, sorted. Signatures
// attached later do not change a replay.
type VerdictInput struct {
	Verdict    digest.Digest   `json:"verdict"`
	Signatures []digest.Digest `json:"signatures"`
}

// Incumbent is the seat holder a round starts from and the score it defends
// with (its consensus score when it took the seat).
type Incumbent struct {
	Submission digest.Digest `json:"submission"`
	Score      scoring.Ratio `json:"score"`
}

// Result is the consensus on one entry of the round; the fields after Miner are
// those of [scoring.Result].
type Result struct {
	Reveal         digest.Digest  `json:"reveal"`
	Submission     digest.Digest  `json:"submission"`
	Miner          string         `json:"miner"`
	Status         scoring.Status `json:"status"`
	Score          scoring.Ratio  `json:"score"`
	Mean           scoring.Ratio  `json:"mean"`
	ClipLow        scoring.Ratio  `json:"clip_low"`
	ClipHigh       scoring.Ratio  `json:"clip_high"`
	Votes          int            `json:"votes"`
	ReportingStake uint64         `json:"reporting_stake"`
	PassedStake    uint64         `json:"passed_stake"`
	RejectedStake  uint64         `json:"rejected_stake"`
	QuorumMet      bool           `json:"quorum_met"`
}

// Vote is a counted vote: one validator's verdict on one entry.
type Vote struct {
	Verdict    digest.Digest  `json:"verdict"`
	Validator  string         `json:"validator"`
	Reveal     digest.Digest  `json:"reveal"`
	Submission digest.Digest  `json:"submission"`
	Sequence   uint64         `json:"sequence"`
	Status     scoring.Status `json:"status"`
	// Score is the vote's score: the claimed score of a passed verdict, 0
	// for a rejected one.
	Score scoring.Ratio `json:"score"`
}

// Exclusion is a vote that did not count and why. Validator is "" when no key
// validly signed the verdict; Reveal and Submission are "" when the verdict
// could not be read.
type Exclusion struct {
	Verdict    digest.Digest  `json:"verdict"`
	Validator  string         `json:"validator"`
	Reveal     digest.Digest  `json:"reveal"`
	Submission digest.Digest  `json:"submission"`
	Sequence   uint64         `json:"sequence"`
	Reason     scoring.Reason `json:"reason"`
}

// Weights is the normalized weight vector over miners. Each miner whose best
// entry passed gets weight = score / (sum of those scores), exactly, and
// units = floor(weight x 65535); BurnUnits receives the rest, so the units of
// all miners plus BurnUnits are exactly [UnitsTotal]. With no passed entry, or
// only scores of 0, everything is burnt.
type Weights struct {
	// Miners holds one weight per miner with a passed entry, sorted by miner.
	Miners    []MinerWeight `json:"miners"`
	BurnUnits uint16        `json:"burn_units"`
}

// MinerWeight is one miner's entry in the weight vector, from its best passed
// entry (highest score; ties: smallest reveal digest).
type MinerWeight struct {
	Miner      string        `json:"miner"`
	Reveal     digest.Digest `json:"reveal"`
	Submission digest.Digest `json:"submission"`
	Score      scoring.Ratio `json:"score"`
	Weight     scoring.Ratio `json:"weight"`
	Units      uint16        `json:"units"`
}
