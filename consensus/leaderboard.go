package consensus

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
)

// BoardRequest names what a leaderboard shows.
type BoardRequest struct {
	// Round is the round's digest, prefix or tag, in the local store or in
	// Source.
	Round string
	// Source, when not nil, is a registry the round (and CarryFrom) is first
	// gathered from (see [Gather]).
	Source cas.Store
	// Consensus, when set, is a consensus record of the round (digest, prefix
	// or tag) that gives the miners' scores and reward status.
	Consensus string
	// CarryFrom, when set, is an earlier round (digest, prefix or tag) whose
	// results are carried into cells the round has no final verdict for.
	CarryFrom string
}

// Board is the leaderboard of a round: [scoring.Board] with what it was built
// from.
type Board struct {
	Round     digest.Digest `json:"round"`
	Consensus digest.Digest `json:"consensus,omitempty"`
	CarryFrom digest.Digest `json:"carry_from,omitempty"`
	scoring.Board
}

// Leaderboard builds the matrix of a round: one row per miner, one column per
// validator. A cell is the validator's latest verdict on the miner's entries
// (highest sequence number; ties: smallest verdict digest), counted for every
// key that validly signed it: passed (with the claimed score), rejected (score
// 0), or in progress for an undetermined or infra_error verdict (the evaluation
// started; there is no final verdict yet). Unsigned, mis-signed, malformed and
// stale verdicts are not shown. With CarryFrom, a cell without a passed or
// rejected verdict shows the validator's latest passed or rejected verdict on
// the same miner in that round as carried. With Consensus, the columns are
// limited to the validators of the record's stake table, and each miner's row
// shows its best consensus score and whether the record's weight vector rewards
// it; otherwise every key that signed a verdict has a column and reward is
// pending.
func Leaderboard(ctx context.Context, l *cas.Layout, req BoardRequest) (Board, error) {
	round, err := resolveRound(ctx, l, req.Source, req.Round)
	if err != nil {
		return Board{}, err
	}
	b := Board{Round: round.desc.Digest}
	cells, err := roundCells(ctx, l, round)
	if err != nil {
		return Board{}, err
	}
	if req.CarryFrom != "" {
		earlier, err := resolveRound(ctx, l, req.Source, req.CarryFrom)
		if err != nil {
			return Board{}, err
		}
		b.CarryFrom = earlier.desc.Digest
		old, err := roundCells(ctx, l, earlier)
		if err != nil {
			return Board{}, err
		}
		for k, e := range old {
			if e.Status != scoring.CellPassed && e.Status != scoring.CellRejected {
				continue
			}
			if cur, ok := cells[k]; ok && (cur.Status == scoring.CellPassed || cur.Status == scoring.CellRejected) {
				continue
			}
			e.Status, e.CarriedFrom, e.Sequence = scoring.CellCarried, earlier.desc.Digest.String(), 0
			cells[k] = e
		}
	}
	var standings []scoring.Standing
	var stakes map[string]uint64
	if req.Consensus != "" {
		desc, err := cas.ResolveRef(ctx, l, req.Consensus)
		if err != nil {
			return Board{}, fmt.Errorf("consensus %s: %w", req.Consensus, err)
		}
		var rec Record
		if _, err := protocol.LoadAs(ctx, l, desc, KindConsensus, &rec); err != nil {
			return Board{}, fmt.Errorf("consensus %s: %w", req.Consensus, err)
		}
		if rec.Inputs.Round != round.desc.Digest {
			return Board{}, fmt.Errorf("%w: consensus %s is about round %s, not %s", ErrInput, desc.Digest, rec.Inputs.Round, round.desc.Digest)
		}
		sd, err := l.Resolve(ctx, rec.Inputs.Stakes.String())
		if err != nil {
			return Board{}, fmt.Errorf("stake table %s of consensus %s: %w", rec.Inputs.Stakes, desc.Digest, err)
		}
		t, err := LoadStakes(ctx, l, sd)
		if err != nil {
			return Board{}, err
		}
		b.Consensus, standings, stakes = desc.Digest, standingsOf(rec), t.Stakes
	}
	entries := make([]scoring.Entry, 0, len(cells))
	for k, e := range cells {
		if _, ok := stakes[k.validator]; stakes == nil || ok {
			entries = append(entries, e)
		}
	}
	if b.Board, err = scoring.Leaderboard(entries, standings); err != nil {
		return Board{}, err
	}
	return b, nil
}

func resolveRound(ctx context.Context, l *cas.Layout, src cas.Store, ref string) (roundInfo, error) {
	desc, err := cas.ResolveRef(ctx, l, ref)
	if errors.Is(err, cas.ErrNotFound) && src != nil {
		desc, err = cas.ResolveRef(ctx, src, ref)
	}
	if err != nil {
		return roundInfo{}, fmt.Errorf("round %s: %w", ref, err)
	}
	if src != nil {
		if err := Gather(ctx, src, l, desc); err != nil {
			return roundInfo{}, err
		}
	}
	return loadRound(ctx, l, desc.Digest)
}

type cellKey struct{ miner, validator string }

// roundCells returns the latest verdict of each validator on each miner of a
// round as a leaderboard entry.
func roundCells(ctx context.Context, st cas.Store, round roundInfo) (map[cellKey]scoring.Entry, error) {
	reveals, err := discoverReveals(ctx, st, round.desc)
	if err != nil {
		return nil, err
	}
	byReveal := make(map[digest.Digest]entry)
	var es []entry
	for _, rd := range reveals {
		e, ok, err := checkEntry(ctx, st, round.desc.Digest, rd)
		if err != nil {
			return nil, fmt.Errorf("reveal %s: %w", rd.Digest, err)
		}
		if ok && byReveal[e.reveal] == (entry{}) {
			byReveal[e.reveal] = e
			es = append(es, e)
		}
	}
	cands, err := discoverVerdicts(ctx, st, es)
	if err != nil {
		return nil, err
	}
	cells := make(map[cellKey]scoring.Entry)
	for _, c := range cands {
		vs, meta, err := votes(ctx, st, c, round, byReveal)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			e, ok := byReveal[v.Submission] // the vote's key is its entry
			if v.Exclude != "" || !ok {
				continue
			}
			cell := scoring.Entry{Miner: e.miner, Validator: v.Validator, Sequence: v.Sequence, Score: v.Score,
				Submission: meta.submission, Verdict: v.Verdict, UnverifiedBeacon: meta.unverifiedBeacon}
			switch v.Status {
			case scoring.StatusPassed:
				cell.Status = scoring.CellPassed
			case scoring.StatusRejected:
				cell.Status = scoring.CellRejected
				cell.Score = scoring.Ratio{}
			case scoring.StatusUndetermined, scoring.StatusInfraError:
				cell.Status, cell.Score = scoring.CellInProgress, scoring.Ratio{}
			default:
				continue
			}
			k := cellKey{e.miner, v.Validator}
			if prev, ok := cells[k]; ok && cmp.Or(cmp.Compare(prev.Sequence, cell.Sequence), cmp.Compare(cell.Verdict, prev.Verdict)) > 0 {
				continue // prev is later (or equal with a smaller digest)
			}
			cells[k] = cell
		}
	}
	return cells, nil
}

// standingsOf gives each miner of a record its best consensus score and its
// reward status: rewarded when its weight is positive, unrewarded otherwise.
func standingsOf(rec Record) []scoring.Standing {
	best := make(map[string]scoring.Ratio)
	var order []string
	for _, r := range rec.Results {
		s, ok := best[r.Miner]
		if !ok {
			order = append(order, r.Miner)
		}
		if !ok || r.Score.Cmp(s) > 0 {
			best[r.Miner] = r.Score
		}
	}
	rewarded := make(map[string]bool)
	for _, w := range rec.Weights.Miners {
		rewarded[w.Miner] = w.Weight.Sign() > 0
	}
	out := make([]scoring.Standing, 0, len(order))
	for _, m := range order {
		st := scoring.Standing{Miner: m, Score: best[m], Reward: scoring.RewardUnrewarded}
		if rewarded[m] {
			st.Reward = scoring.RewardRewarded
		}
		out = append(out, st)
	}
	return out
}
