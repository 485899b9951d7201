package consensus

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// BoardRequest names what a leaderboard shows.
type BoardRequest struct {
	// Round is the round's digest, prefix or tag, in the local store or in
	// Source.
	Round string
	// Source, when not nil, is a registry the round (and CarryFrom) is first
	// gathered from (see [Gather]).
	Source cas.Store
	// Trusted are the keys whose signatures count: on a verdict (a column per
	// trusted validator) and on a consensus record. There must be at least
	// one.
	Trusted []*bundle.PublicKey
	// Consensus, when set, is a consensus record of the round (digest, prefix
	// or tag) that gives the miners' scores, reward status and seat; it must
	// be signed by a trusted key. When empty, the latest record of the round
	// that a trusted key signed is used, if there is one.
	Consensus string
	// CarryFrom, when set, is an earlier round (digest, prefix or tag) whose
	// results are carried into cells the round has no final verdict for.
	CarryFrom string
}

// Reasons a leaderboard leaves a verdict of the round out (Board.LeftOut);
// the first three are those of [Runs.LeftOut].
const (
	LeftNotStaked  = "not_staked" // signed by a trusted key that the consensus record's stake table does not name
	LeftSuperseded = "superseded" // the same validator signed a later verdict on the miner
)

// Board is the leaderboard of a round: [scoring.Board] with what it was built
// from, the seat and what was left out.
type Board struct {
	Round     digest.Digest `json:"round"`
	Consensus digest.Digest `json:"consensus,omitempty"`
	CarryFrom digest.Digest `json:"carry_from,omitempty"`
	// Seat is the consensus record's seat decision; nil without a record.
	Seat *Seat `json:"seat,omitempty"`
	// Stakes are the stakes of the validators shown, from the consensus
	// record's stake table; nil without a record.
	Stakes map[string]uint64 `json:"validator_stakes,omitempty"`
	// LeftOut counts the verdicts of the round's entries that no cell
	// shows, by reason (Left*).
	LeftOut map[string]int `json:"left_out"`
	scoring.Board
}

// Seat is a seat decision with the miners whose entries hold and challenge
// the seat ("" when the record has no entry of theirs).
type Seat struct {
	scoring.SeatDecision
	HolderMiner     string `json:"holder_miner,omitempty"`
	ChallengerMiner string `json:"challenger_miner,omitempty"`
}

// Leaderboard builds the matrix of a round: one row per miner, one column per
// trusted validator. A cell is the validator's latest verdict on the miner's
// entries (highest sequence number; ties: smallest verdict digest), counted
// for every trusted key that validly signed it: passed (with the claimed
// score; an optimizer verdict has none and is marked unscored), rejected
// (score 0), or in progress for an undetermined or infra_error verdict (the
// evaluation started; there is no final verdict yet), with the verdict's
// reason. Verdicts no trusted key signed validly, malformed and stale
// verdicts, and superseded ones are counted in LeftOut. With CarryFrom, a cell
// without a passed or rejected verdict shows the validator's latest passed or
// rejected verdict on the same miner in that round as carried. With a
// consensus record (req.Consensus, or the latest one a trusted key signed),
// the columns are limited to the validators of the record's stake table, and
// each miner's row shows its best consensus score and whether the record's
// weight vector rewards it; otherwise reward is pending.
func Leaderboard(ctx context.Context, l *cas.Layout, req BoardRequest) (Board, error) {
	if len(req.Trusted) == 0 {
		return Board{}, fmt.Errorf("%w: no trusted keys: name the validators whose verdicts count", ErrInput)
	}
	round, err := resolveRound(ctx, l, req.Source, req.Round)
	if err != nil {
		return Board{}, err
	}
	b := Board{Round: round.desc.Digest, LeftOut: map[string]int{}}
	cells, err := roundCells(ctx, l, round, req.Trusted, b.LeftOut)
	if err != nil {
		return Board{}, err
	}
	if req.CarryFrom != "" {
		earlier, err := resolveRound(ctx, l, req.Source, req.CarryFrom)
		if err != nil {
			return Board{}, err
		}
		b.CarryFrom = earlier.desc.Digest
		old, err := roundCells(ctx, l, earlier, req.Trusted, map[string]int{})
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
	cd, found, err := boardConsensus(ctx, l, req, round)
	if err != nil {
		return Board{}, err
	}
	if found {
		_, rec, err := LoadRecord(ctx, l, cd)
		if err != nil {
			return Board{}, fmt.Errorf("consensus %s: %w", cd.Digest, err)
		}
		if rec.Inputs.Round != round.desc.Digest {
			return Board{}, fmt.Errorf("%w: consensus %s is about round %s, not %s", ErrInput, cd.Digest, rec.Inputs.Round, round.desc.Digest)
		}
		sd, err := l.Resolve(ctx, rec.Inputs.Stakes.String())
		if err != nil {
			return Board{}, fmt.Errorf("stake table %s of consensus %s: %w", rec.Inputs.Stakes, cd.Digest, err)
		}
		t, err := LoadStakes(ctx, l, sd)
		if err != nil {
			return Board{}, err
		}
		b.Consensus, standings, stakes, b.Seat = cd.Digest, standingsOf(rec), t.Stakes, seatOf(rec)
	}
	entries := make([]scoring.Entry, 0, len(cells))
	for k, e := range cells {
		if _, ok := stakes[k.validator]; stakes == nil || ok {
			entries = append(entries, e)
		} else if e.Status != scoring.CellCarried {
			b.LeftOut[LeftNotStaked]++
		}
	}
	if b.Board, err = scoring.Leaderboard(entries, standings); err != nil {
		return Board{}, err
	}
	if stakes != nil {
		b.Stakes = map[string]uint64{}
		for _, v := range b.Validators {
			b.Stakes[v] = stakes[v]
		}
	}
	return b, nil
}

// boardConsensus finds the consensus record a leaderboard shows: the one
// req names, which a trusted key must have signed, or else the latest record
// of the round a trusted key signed (by its creation time, then the smallest
// digest). found is false when there is none.
func boardConsensus(ctx context.Context, l *cas.Layout, req BoardRequest, round roundInfo) (ocispec.Descriptor, bool, error) {
	if req.Consensus != "" {
		desc, err := cas.ResolveRef(ctx, l, req.Consensus)
		if err != nil {
			return ocispec.Descriptor{}, false, fmt.Errorf("consensus %s: %w", req.Consensus, err)
		}
		if req.Source != nil { // the stake table and rules are inputs, not referrers
			if err := Fetch(ctx, req.Source, l, desc); err != nil {
				return ocispec.Descriptor{}, false, err
			}
		}
		signers, _ := bundle.Signers(ctx, l, desc)
		if !anyTrusted(signers, req.Trusted) {
			return ocispec.Descriptor{}, false, fmt.Errorf("%w: consensus %s is signed by none of the keys you trust", ErrInput, desc.Digest)
		}
		return desc, true, nil
	}
	recs, err := l.Referrers(ctx, round.desc, bundle.ArtifactType(KindConsensus))
	if err != nil {
		return ocispec.Descriptor{}, false, fmt.Errorf("listing consensus records of %s: %w", round.desc.Digest, err)
	}
	var best ocispec.Descriptor
	var bestAt string
	found := false
	for _, d := range recs {
		art, err := bundle.Load(ctx, l, d)
		if err != nil || art.Kind != KindConsensus {
			continue // not a record: it cannot be shown
		}
		signers, _ := bundle.Signers(ctx, l, d)
		if !anyTrusted(signers, req.Trusted) {
			continue
		}
		at := art.Manifest.Annotations[ocispec.AnnotationCreated]
		if !found || at > bestAt || (at == bestAt && d.Digest < best.Digest) {
			best, bestAt, found = d, at, true
		}
	}
	if found && req.Source != nil {
		if err := Fetch(ctx, req.Source, l, best); err != nil {
			return ocispec.Descriptor{}, false, err
		}
	}
	return best, found, ctx.Err()
}

// seatOf is a record's seat decision with the miners of the holding and
// challenging entries.
func seatOf(rec Record) *Seat {
	s := &Seat{SeatDecision: rec.Seat}
	for _, r := range rec.Results {
		for _, x := range []digest.Digest{r.Reveal, r.Submission} {
			if rec.Seat.Holder != "" && x == rec.Seat.Holder {
				s.HolderMiner = r.Miner
			}
			if rec.Seat.Challenger != "" && x == rec.Seat.Challenger {
				s.ChallengerMiner = r.Miner
			}
		}
	}
	return s
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

// roundCells returns the latest verdict of each trusted validator on each
// miner of a round as a leaderboard entry, and counts the verdicts it leaves
// out in left.
func roundCells(ctx context.Context, st cas.Store, round roundInfo, trusted []*bundle.PublicKey, left map[string]int) (map[cellKey]scoring.Entry, error) {
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
	var placed []digest.Digest // verdicts that gave a cell, before the latest per cell is kept
	for _, c := range cands {
		vs, meta, err := votes(ctx, st, c, round, byReveal)
		if err != nil {
			return nil, err
		}
		// why the verdict gave no cell, decided by the furthest check a
		// trusted vote got to; "" once it gave one.
		why := LeftUntrusted
		if vs[0].Validator == "" {
			why = LeftUnsigned
		}
		for _, v := range vs {
			if v.Validator == "" || !anyTrusted([]string{v.Validator}, trusted) {
				continue
			}
			e, ok := byReveal[v.Submission] // the vote's key is its entry
			unscored := v.Exclude == ReasonMalformed && meta.unscored
			switch {
			case v.Exclude == ReasonMalformed && !unscored:
				why = LeftMalformed
				continue
			case !ok:
				why = LeftOtherEntry
				continue
			}
			cell := scoring.Entry{Miner: e.miner, Validator: v.Validator, Sequence: v.Sequence, Score: v.Score,
				Submission: meta.submission, Verdict: v.Verdict, UnverifiedBeacon: meta.unverifiedBeacon, Unscored: unscored,
				Reason: meta.reason, Summary: meta.summary}
			switch v.Status {
			case scoring.StatusPassed:
				cell.Status = scoring.CellPassed
			case scoring.StatusRejected:
				cell.Status = scoring.CellRejected
				cell.Score = scoring.Ratio{}
			case scoring.StatusUndetermined, scoring.StatusInfraError:
				cell.Status, cell.Score = scoring.CellInProgress, scoring.Ratio{}
			default:
				why = LeftMalformed
				continue
			}
			why = ""
			k := cellKey{e.miner, v.Validator}
			if prev, ok := cells[k]; ok && cmp.Or(cmp.Compare(prev.Sequence, cell.Sequence), cmp.Compare(cell.Verdict, prev.Verdict)) > 0 {
				continue // prev is later (or equal with a smaller digest)
			}
			cells[k] = cell
		}
		if why == "" {
			placed = append(placed, c.desc.Digest)
		} else {
			left[why]++
		}
	}
	shown := make(map[digest.Digest]bool, len(cells))
	for _, e := range cells {
		shown[e.Verdict] = true
	}
	for _, d := range placed {
		if !shown[d] {
			left[LeftSuperseded]++
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
