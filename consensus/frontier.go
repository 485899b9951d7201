package consensus

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
)

// RunsRequest names an optimizer round whose signed verdicts become frontier
// runs.
type RunsRequest struct {
	// Round is the optimizer round.
	Round digest.Digest
	// Launch is the competition's launch; a run's at_sec is its reveal's
	// first-seen time, as the validator recorded it, minus Launch (at least 0).
	Launch time.Time
	// Trusted are the validator keys whose verdicts count; there must be at
	// least one: an aggregate never counts whoever signed.
	Trusted []*bundle.PublicKey
}

// Why a verdict found for a round's entries was left out of its runs
// (Runs.LeftOut).
const (
	LeftUnsigned   = "unsigned"       // no valid feval signature
	LeftUntrusted  = "untrusted"      // validly signed, by none of the trusted keys
	LeftMalformed  = "malformed"      // not a readable optimizer verdict
	LeftOtherEntry = "other_entry"    // about another round, reveal or miner than the entry it hangs on
	LeftNotPassed  = "not_passed"     // rejected or infra_error: no losses to count
	LeftNoTime     = "no_reveal_time" // no first-seen time of the reveal to order it by
)

// Runs is the outcome of [RunsFromVerdicts].
type Runs struct {
	// Runs are in the order [scoring.FoldFrontier] takes them.
	Runs []scoring.Run `json:"runs"`
	// BaselineMicroNats is the round's task's baseline.
	BaselineMicroNats int64 `json:"baseline_micro_nats"`
	// Verdicts are the verdicts the runs come from, sorted.
	Verdicts []digest.Digest `json:"verdicts"`
	// Reconciled lists the runs whose verdicts disagree (different steps
	// or losses, as for a run the budget stopped on machines that counted
	// differently; docs/OPTIMIZER.md §3, "Step reconciliation"), in the
	// order of Runs. The higher loss counted for each.
	Reconciled []Reconciled `json:"reconciled"`
	// LeftOut counts the verdicts found for the round's entries that did
	// not count, by reason (Left*).
	LeftOut map[string]int `json:"left_out"`
}

// Reconciled is one run that several verdicts report differently.
type Reconciled struct {
	Submission digest.Digest `json:"submission"`
	RunIndex   uint64        `json:"run_index"`
	// Reports are every verdict's report of the run, by verdict digest.
	Reports []RunReport `json:"reports"`
}

// RunReport is what one verdict says of a run.
type RunReport struct {
	Verdict       digest.Digest `json:"verdict"`
	Steps         int           `json:"steps"`
	Stop          string        `json:"stop"`
	LossMicroNats int64         `json:"loss_micro_nats"`
}

// RunsFromVerdicts turns the signed optimizer verdicts of a round held in st
// into frontier runs. It reads the round's entries (reveals that pass the
// entry checks), the verdicts attached to their submissions or reveals, keeps
// those that are validly signed by a trusted key (req.Trusted must name at
// least one) and counts the others in LeftOut, name
// the entry's submission and miner, and passed; each of their runs with a
// held-out loss becomes a run (run_index = the run's index, author = the
// miner). When several verdicts report the same run, the higher loss counts:
// a frontier move must hold for every validator that reported it; runs they
// report differently are listed in Reconciled. Runs are ordered by at_sec,
// then submission, then run index.
func RunsFromVerdicts(ctx context.Context, st cas.Store, req RunsRequest) (Runs, error) {
	if len(req.Trusted) == 0 {
		return Runs{}, fmt.Errorf("%w: no trusted keys: name the validators whose verdicts count", ErrInput)
	}
	round, err := loadRound(ctx, st, req.Round)
	if err != nil {
		return Runs{}, err
	}
	if round.rec.Protocol != "optimizer" {
		return Runs{}, fmt.Errorf("%w: round %s is for protocol %q, not optimizer", ErrInput, req.Round, round.rec.Protocol)
	}
	taskFS, err := protocol.LoadTaskFS(ctx, st, round.rec.Task)
	if err != nil {
		return Runs{}, err
	}
	spec, err := optimizer.LoadTask(taskFS)
	if err != nil {
		return Runs{}, err
	}
	reveals, err := discoverReveals(ctx, st, round.desc)
	if err != nil {
		return Runs{}, err
	}
	var es []entry
	bySubmission := map[digest.Digest]entry{}
	for _, rd := range reveals {
		e, ok, err := checkEntry(ctx, st, req.Round, rd)
		if err != nil {
			return Runs{}, err
		}
		if ok {
			es = append(es, e)
			bySubmission[e.submission] = e
		}
	}
	cands, err := discoverVerdicts(ctx, st, es)
	if err != nil {
		return Runs{}, err
	}
	type key struct {
		sub digest.Digest
		idx uint64
	}
	runs := map[key]scoring.Run{}
	reports := map[key][]RunReport{}
	out := Runs{BaselineMicroNats: spec.BaselineMicroNats, Verdicts: []digest.Digest{}, Runs: []scoring.Run{}, Reconciled: []Reconciled{},
		LeftOut: map[string]int{}}
	for _, c := range cands {
		signers, err := validSigners(ctx, st, c.desc, c.sigs)
		if err != nil {
			return Runs{}, err
		}
		switch {
		case len(signers) == 0:
			out.LeftOut[LeftUnsigned]++
			continue
		case !anyTrusted(signers, req.Trusted):
			out.LeftOut[LeftUntrusted]++
			continue
		}
		var v optimizer.Verdict
		if _, err := protocol.LoadAs(ctx, st, c.desc, protocol.KindVerdict, &v); err != nil {
			if hardError(err) {
				return Runs{}, err
			}
			out.LeftOut[LeftMalformed]++
			continue
		}
		e, ok := bySubmission[v.Submission]
		switch {
		case v.Protocol != "optimizer":
			out.LeftOut[LeftMalformed]++
			continue
		case !ok || v.Inputs.Miner != e.miner || v.Inputs.Round != req.Round || v.Inputs.Reveal != e.reveal:
			out.LeftOut[LeftOtherEntry]++
			continue
		case v.Status != protocol.VerdictPassed:
			out.LeftOut[LeftNotPassed]++
			continue
		}
		seen, err := time.Parse(time.RFC3339, v.RevealCheck.RevealSeen.Time)
		if err != nil {
			out.LeftOut[LeftNoTime]++
			continue
		}
		at := max(int64(seen.Sub(req.Launch)/time.Second), 0)
		used := false
		for _, r := range v.Runs {
			if r.HeldOutLossMicroNats == nil || r.Index < 0 {
				continue
			}
			k := key{v.Submission, uint64(r.Index)}
			prev, had := runs[k]
			run := scoring.Run{Submission: v.Submission, Author: e.miner, RunIndex: k.idx, LossMicroNats: *r.HeldOutLossMicroNats, AtSec: at}
			if had {
				run.LossMicroNats = max(run.LossMicroNats, prev.LossMicroNats)
				run.AtSec = max(run.AtSec, prev.AtSec)
			}
			runs[k] = run
			reports[k] = append(reports[k], RunReport{Verdict: c.desc.Digest, Steps: r.Steps, Stop: r.Stop, LossMicroNats: *r.HeldOutLossMicroNats})
			used = true
		}
		if used {
			out.Verdicts = append(out.Verdicts, c.desc.Digest)
		}
	}
	for _, r := range runs {
		out.Runs = append(out.Runs, r)
	}
	slices.SortFunc(out.Runs, func(a, b scoring.Run) int {
		return cmp.Or(cmp.Compare(a.AtSec, b.AtSec), cmp.Compare(a.Submission, b.Submission), cmp.Compare(a.RunIndex, b.RunIndex))
	})
	slices.Sort(out.Verdicts)
	for _, r := range out.Runs {
		rs := reports[key{r.Submission, r.RunIndex}]
		if slices.ContainsFunc(rs, func(x RunReport) bool { return x.Steps != rs[0].Steps || x.LossMicroNats != rs[0].LossMicroNats }) {
			slices.SortFunc(rs, func(a, b RunReport) int { return cmp.Compare(a.Verdict, b.Verdict) })
			out.Reconciled = append(out.Reconciled, Reconciled{Submission: r.Submission, RunIndex: r.RunIndex, Reports: rs})
		}
	}
	return out, ctx.Err()
}

func anyTrusted(signers []string, trusted []*bundle.PublicKey) bool {
	for _, s := range signers {
		for _, k := range trusted {
			if k.Fingerprint == s {
				return true
			}
		}
	}
	return false
}
