package scoring

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/opencontainers/go-digest"
)

// ErrConflictingEntries reports two different leaderboard entries of one
// validator on one miner with the same sequence number.
var ErrConflictingEntries = errors.New("conflicting leaderboard entries")

// CellStatus is the audit progress of one validator on one miner.
type CellStatus string

const (
	// CellPassed: the validator's verdict passed.
	CellPassed CellStatus = "passed"
	// CellInProgress: the evaluation started and there is no verdict yet.
	CellInProgress CellStatus = "in_progress"
	// CellCarried: a result carried from a named earlier round while its
	// replacement is evaluated.
	CellCarried CellStatus = "carried"
	// CellRejected: the validator's verdict rejected the submission.
	CellRejected CellStatus = "rejected"
	// CellEmpty: the validator has no entry for the miner.
	CellEmpty CellStatus = ""
)

// RewardStatus is whether a miner is rewarded, shown apart from audit progress.
type RewardStatus string

const (
	// RewardRewarded: the miner receives emission for the round.
	RewardRewarded RewardStatus = "rewarded"
	// RewardUnrewarded: the miner receives nothing for the round.
	RewardUnrewarded RewardStatus = "unrewarded"
	// RewardPending: the reward is not decided yet.
	RewardPending RewardStatus = "pending"
)

// Entry is one validator's status on one miner, as plain values.
type Entry struct {
	Miner     string `json:"miner"`
	Validator string `json:"validator"`
	// Sequence orders the entries of one validator on one miner: the highest
	// counts.
	Sequence uint64     `json:"sequence"`
	Status   CellStatus `json:"status"`
	// Score is the verdict's score (the carried score for CellCarried); it is
	// kept as given for CellInProgress, where it is normally 0.
	Score Ratio `json:"score"`
	// CarriedFrom names the earlier round of a carried result; it is set exactly
	// when Status is CellCarried.
	CarriedFrom string `json:"carried_from,omitempty"`
	// Submission and Verdict point at the evidence; both are optional.
	Submission digest.Digest `json:"submission,omitempty"`
	Verdict    digest.Digest `json:"verdict,omitempty"`
	// UnverifiedBeacon reports a verdict whose audit sample was drawn from a
	// beacon value nothing shows was not chosen (not a verified drand round).
	UnverifiedBeacon bool `json:"unverified_beacon,omitempty"`
	// Unscored marks a passed verdict of a protocol whose verdicts carry no
	// score (optimizer): Score is 0 and means nothing.
	Unscored bool `json:"unscored,omitempty"`
	// Reason is the verdict's reason, as it gives it; Summary what it
	// decided in a few words (a scenarios score of its maximum and cost, an
	// optimizer outcome and losses).
	Reason  string `json:"reason,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// Standing is a miner's reward status and consensus score, which order the rows.
type Standing struct {
	Miner  string       `json:"miner"`
	Score  Ratio        `json:"score"`
	Reward RewardStatus `json:"reward"`
}

// Cell is one cell of the leaderboard.
type Cell struct {
	Status      CellStatus    `json:"status"`
	Score       Ratio         `json:"score"`
	CarriedFrom string        `json:"carried_from,omitempty"`
	Submission  digest.Digest `json:"submission,omitempty"`
	Verdict     digest.Digest `json:"verdict,omitempty"`
	// UnverifiedBeacon, Unscored, Reason and Summary are the entry's.
	UnverifiedBeacon bool   `json:"unverified_beacon,omitempty"`
	Unscored         bool   `json:"unscored,omitempty"`
	Reason           string `json:"reason,omitempty"`
	Summary          string `json:"summary,omitempty"`
}

// Audit counts a row's cells by status.
type Audit struct {
	Passed     int `json:"passed"`
	InProgress int `json:"in_progress"`
	Carried    int `json:"carried"`
	Rejected   int `json:"rejected"`
	Empty      int `json:"empty"`
}

// Row is one miner's row.
type Row struct {
	Miner string `json:"miner"`
	// Scored reports whether a standing gave the miner a consensus Score.
	Scored bool  `json:"scored"`
	Score  Ratio `json:"score"`
	// Reward is the miner's reward status (pending without a standing).
	Reward RewardStatus `json:"reward"`
	// Audit summarizes Cells.
	Audit Audit `json:"audit"`
	// Cells holds one cell per validator, in the order of Board.Validators.
	Cells []Cell `json:"cells"`
}

// Board is the leaderboard matrix.
type Board struct {
	// Validators are the columns, sorted.
	Validators []string `json:"validators"`
	// Rows are sorted: scored rows first by Score descending, then the others;
	// ties by miner.
	Rows []Row `json:"rows"`
}

// Leaderboard builds the matrix with one row per miner (every miner named by an
// entry or a standing) and one column per validator named by an entry. Of several
// entries of one validator on one miner the highest Sequence counts; identical
// duplicates are merged, and two different entries with the same Sequence are an
// error wrapping [ErrConflictingEntries], whatever their Sequence. Leaderboard also
// fails on an entry with an empty miner or validator, an unknown status, a
// carried entry without CarriedFrom (or CarriedFrom on another status), and on a
// standing with an empty miner, an unknown reward status or a second standing
// for one miner. The result does not depend on input order.
func Leaderboard(entries []Entry, standings []Standing) (Board, error) {
	type key struct{ miner, validator string }
	type seqKey struct {
		key
		seq uint64
	}
	latest := make(map[key]Entry)
	seen := make(map[seqKey]Entry)
	miners := make(map[string]bool)
	validators := make(map[string]bool)
	for i, e := range entries {
		if err := e.validate(); err != nil {
			return Board{}, fmt.Errorf("leaderboard: entry %d: %w", i, err)
		}
		k := key{e.Miner, e.Validator}
		if other, ok := seen[seqKey{k, e.Sequence}]; ok && !sameEntry(e, other) {
			return Board{}, fmt.Errorf("leaderboard: miner %s, validator %s, sequence %d: %w", e.Miner, e.Validator, e.Sequence, ErrConflictingEntries)
		}
		seen[seqKey{k, e.Sequence}] = e
		if prev, ok := latest[k]; !ok || e.Sequence > prev.Sequence {
			latest[k] = e
		}
		miners[e.Miner] = true
		validators[e.Validator] = true
	}
	byMiner := make(map[string]Standing)
	for i, s := range standings {
		switch {
		case s.Miner == "":
			return Board{}, fmt.Errorf("leaderboard: standing %d: empty miner", i)
		case s.Reward != RewardRewarded && s.Reward != RewardUnrewarded && s.Reward != RewardPending:
			return Board{}, fmt.Errorf("leaderboard: standing %d: unknown reward status %q", i, s.Reward)
		}
		if _, dup := byMiner[s.Miner]; dup {
			return Board{}, fmt.Errorf("leaderboard: standing %d: second standing for miner %s", i, s.Miner)
		}
		byMiner[s.Miner] = s
		miners[s.Miner] = true
	}

	b := Board{Validators: sortedKeys(validators), Rows: make([]Row, 0, len(miners))}
	for _, m := range sortedKeys(miners) {
		row := Row{Miner: m, Reward: RewardPending, Cells: make([]Cell, len(b.Validators))}
		if s, ok := byMiner[m]; ok {
			row.Scored, row.Score, row.Reward = true, s.Score, s.Reward
		}
		for j, v := range b.Validators {
			e, ok := latest[key{m, v}]
			if !ok {
				row.Audit.Empty++
				continue
			}
			row.Cells[j] = Cell{Status: e.Status, Score: e.Score, CarriedFrom: e.CarriedFrom, Submission: e.Submission, Verdict: e.Verdict,
				UnverifiedBeacon: e.UnverifiedBeacon, Unscored: e.Unscored, Reason: e.Reason, Summary: e.Summary}
			switch e.Status {
			case CellPassed:
				row.Audit.Passed++
			case CellInProgress:
				row.Audit.InProgress++
			case CellCarried:
				row.Audit.Carried++
			case CellRejected:
				row.Audit.Rejected++
			}
		}
		b.Rows = append(b.Rows, row)
	}
	slices.SortStableFunc(b.Rows, func(x, y Row) int {
		switch {
		case x.Scored && !y.Scored:
			return -1
		case !x.Scored && y.Scored:
			return 1
		case x.Scored:
			return cmp.Or(y.Score.Cmp(x.Score), cmp.Compare(x.Miner, y.Miner))
		}
		return cmp.Compare(x.Miner, y.Miner)
	})
	return b, nil
}

func (e Entry) validate() error {
	switch {
	case e.Miner == "":
		return errors.New("empty miner")
	case e.Validator == "":
		return errors.New("empty validator")
	}
	switch e.Status {
	case CellPassed, CellInProgress, CellRejected:
		if e.CarriedFrom != "" {
			return fmt.Errorf("status %s with carried_from %q", e.Status, e.CarriedFrom)
		}
	case CellCarried:
		if e.CarriedFrom == "" {
			return errors.New("carried result without the round it is carried from")
		}
	default:
		return fmt.Errorf("unknown status %q", e.Status)
	}
	return nil
}

func sameEntry(a, b Entry) bool {
	return a.Status == b.Status && a.Score.Cmp(b.Score) == 0 && a.CarriedFrom == b.CarriedFrom &&
		a.Submission == b.Submission && a.Verdict == b.Verdict && a.UnverifiedBeacon == b.UnverifiedBeacon &&
		a.Unscored == b.Unscored && a.Reason == b.Reason && a.Summary == b.Summary
}

func sortedKeys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
