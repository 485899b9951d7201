package scoring

import (
	"cmp"
	"fmt"
	"math/big"

	"github.com/opencontainers/go-digest"
)

// SeatOutcome names what a seat decision did.
type SeatOutcome string

const (
	// SeatTaken: a challenger took the seat, from the incumbent or a vacancy.
	SeatTaken SeatOutcome = "taken"
	// SeatKept: the incumbent keeps the seat (no eligible challenger, or none
	// exceeded the threshold; a tie keeps the incumbent).
	SeatKept SeatOutcome = "kept"
	// SeatVacant: there was no incumbent and no eligible challenger.
	SeatVacant SeatOutcome = "vacant"
)

// SeatDecision is the outcome of [Seat].
type SeatDecision struct {
	// Incumbent is the seat holder before the decision ("" when vacant).
	Incumbent digest.Digest `json:"incumbent"`
	// IncumbentScore is the incumbent's recorded seat score s.
	IncumbentScore Ratio `json:"incumbent_score"`
	// Margin is d(s), see [SeatMargin] (0 when the seat was vacant).
	Margin Ratio `json:"margin"`
	// Threshold is s x (1 + d(s)): a challenger must score strictly more.
	Threshold Ratio `json:"threshold"`
	// Challenger is the best eligible challenger ("" if there is none) and
	// ChallengerScore its consensus score.
	Challenger      digest.Digest `json:"challenger"`
	ChallengerScore Ratio         `json:"challenger_score"`
	// Holder is the seat holder after the decision ("" when vacant) and
	// HolderScore its recorded seat score from now on: the incumbent's recorded
	// score when kept, the challenger's consensus score when taken.
	Holder      digest.Digest `json:"holder"`
	HolderScore Ratio         `json:"holder_score"`
	// Outcome names what happened.
	Outcome SeatOutcome `json:"outcome"`
}

// SeatMargin returns d(s), the relative margin a challenger must exceed against an
// incumbent whose recorded score is s, with M = rules.MaxScore, d0 =
// rules.Seat.Margin and k = rules.Seat.FullMarginUpTo:
//
//	d(s) = d0                          if s <= k*M
//	d(s) = d0 * (M - s) / (M - k*M)    if k*M < s < M
//	d(s) = 0                           if s >= M
func SeatMargin(s Ratio, rules Rules) (Ratio, error) {
	if err := rules.validateMaxScore(); err != nil {
		return Ratio{}, fmt.Errorf("seat margin: %w", err)
	}
	if err := rules.Seat.validate(); err != nil {
		return Ratio{}, fmt.Errorf("seat margin: %w", err)
	}
	return seatMargin(s.val(), rules), nil
}

func seatMargin(s *big.Rat, rules Rules) Ratio {
	m := rules.MaxScore.val()
	knee := new(big.Rat).Mul(rules.Seat.FullMarginUpTo.val(), m)
	switch {
	case s.Cmp(m) >= 0:
		return Ratio{}
	case s.Cmp(knee) <= 0:
		return rules.Seat.Margin
	}
	d := new(big.Rat).Sub(m, s)
	d.Mul(d, rules.Seat.Margin.val())
	return ratio(d.Quo(d, new(big.Rat).Sub(m, knee)))
}

// Seat decides who holds the seat after a round. incumbent is the current holder
// ("" when the seat is vacant) and recorded the score recorded when it took the
// seat; the incumbent defends with that score, not with any newer consensus.
// challengers are consensus results, normally [Consensus.Results].
//
// A challenger is eligible when its Status is passed (so its quorum was met) and
// it is not the incumbent. The best eligible challenger has the highest Score;
// among equal scores the smallest digest. It takes the seat when its Score is
// strictly greater than recorded x (1 + d(recorded)) (see [SeatMargin]), or when
// the seat is vacant. Otherwise, including on a tie, the incumbent keeps the seat.
//
// Seat fails on invalid rules or, with an incumbent, a recorded score outside
// [0, MaxScore].
func Seat(incumbent digest.Digest, recorded Ratio, challengers []Result, rules Rules) (SeatDecision, error) {
	if err := rules.validateMaxScore(); err != nil {
		return SeatDecision{}, fmt.Errorf("seat: %w", err)
	}
	if err := rules.Seat.validate(); err != nil {
		return SeatDecision{}, fmt.Errorf("seat: %w", err)
	}
	dec := SeatDecision{Incumbent: incumbent, Outcome: SeatVacant}
	var best *Result
	for i := range challengers {
		c := &challengers[i]
		if c.Status != StatusPassed || c.Submission == incumbent {
			continue
		}
		if best == nil || cmp.Or(-c.Score.Cmp(best.Score), cmp.Compare(c.Submission, best.Submission)) < 0 {
			best = c
		}
	}
	if best != nil {
		dec.Challenger, dec.ChallengerScore = best.Submission, best.Score
	}
	if incumbent == "" {
		if best != nil {
			dec.Holder, dec.HolderScore, dec.Outcome = best.Submission, best.Score, SeatTaken
		}
		return dec, nil
	}
	if recorded.Sign() < 0 || recorded.Cmp(rules.MaxScore) > 0 {
		return SeatDecision{}, fmt.Errorf("seat: recorded score %s of incumbent %s is outside [0, %s]", recorded, incumbent, rules.MaxScore)
	}
	dec.IncumbentScore = recorded
	dec.Margin = seatMargin(recorded.val(), rules)
	t := new(big.Rat).Add(ratOne, dec.Margin.val())
	dec.Threshold = ratio(t.Mul(t, recorded.val()))
	dec.Holder, dec.HolderScore, dec.Outcome = incumbent, recorded, SeatKept
	if best != nil && best.Score.Cmp(dec.Threshold) > 0 {
		dec.Holder, dec.HolderScore, dec.Outcome = best.Submission, best.Score, SeatTaken
	}
	return dec, nil
}
