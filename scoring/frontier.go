package scoring

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/opencontainers/go-digest"
)

// ErrRunOrder reports runs given out of time order to [FoldFrontier].
var ErrRunOrder = errors.New("runs out of time order")

// Run is one evaluated training run of an optimizer submission: the held-out loss
// that the validators agreed on for that run. Lower loss is better.
type Run struct {
	// Submission is the digest of the optimizer submission.
	Submission digest.Digest `json:"submission"`
	// Author is the key fingerprint the submission is bound to; it receives the
	// credit of a frontier event.
	Author string `json:"author"`
	// RunIndex distinguishes the runs of one submission; a confirm run has a
	// different index from the first run.
	RunIndex uint64 `json:"run_index"`
	// LossMicroNats is the held-out loss in micro-nats, >= 0.
	LossMicroNats int64 `json:"loss_micro_nats"`
	// AtSec is when the run's verdict became final, in seconds since launch, >= 0.
	AtSec int64 `json:"at_sec"`
}

// RunOutcome names what [FoldFrontier] did with a run.
type RunOutcome string

const (
	// RunPending: a first run that cleared the bar; it awaits a confirm run.
	RunPending RunOutcome = "pending"
	// RunConfirmed: a confirm run that, together with the first run, cleared the
	// bar in force; the frontier moved.
	RunConfirmed RunOutcome = "confirmed"
	// RunNotCleared: a first run that did not clear the bar; the submission is
	// decided.
	RunNotCleared RunOutcome = "not_cleared"
	// RunConfirmFailed: a confirm run such that the worse of the two runs does
	// not clear the bar in force (the confirm run missed it, or the bar moved
	// since the first run); the submission is decided.
	RunConfirmFailed RunOutcome = "confirm_failed"
	// RunRepeated: a run with the same index as the pending first run; ignored.
	RunRepeated RunOutcome = "repeated_run"
	// RunDecided: a run of a submission already decided; ignored.
	RunDecided RunOutcome = "decided"
)

// RunDecision records how one run was applied.
type RunDecision struct {
	Run
	// Outcome is what the run did.
	Outcome RunOutcome `json:"outcome"`
	// BarMicroNats is the bar in force when the run was applied.
	BarMicroNats int64 `json:"bar_micro_nats"`
}

// FrontierEvent is one confirmed move of the frontier: an entry of the
// append-only frontier chain. The caller signs and links the entries.
type FrontierEvent struct {
	// Height is the entry's position in the chain, from 1.
	Height uint64 `json:"height"`
	// Submission and Author name the optimizer that moved the frontier.
	Submission digest.Digest `json:"submission"`
	Author     string        `json:"author"`
	// FirstRun, ConfirmRun and their losses are the two runs that cleared.
	FirstRun             uint64 `json:"first_run"`
	FirstLossMicroNats   int64  `json:"first_loss_micro_nats"`
	ConfirmRun           uint64 `json:"confirm_run"`
	ConfirmLossMicroNats int64  `json:"confirm_loss_micro_nats"`
	// PreviousBarMicroNats is the bar before the event and BarMicroNats the new
	// bar: the worse (higher) loss of the two runs.
	PreviousBarMicroNats int64 `json:"previous_bar_micro_nats"`
	BarMicroNats         int64 `json:"bar_micro_nats"`
	// ImprovementMicroNats = PreviousBarMicroNats - BarMicroNats, at least the
	// floor.
	ImprovementMicroNats int64 `json:"improvement_micro_nats"`
	// AtSec is the time of the confirm run.
	AtSec int64 `json:"at_sec"`
}

// FrontierHistory is the outcome of [FoldFrontier].
type FrontierHistory struct {
	// BaselineMicroNats is the bar at launch.
	BaselineMicroNats int64 `json:"baseline_micro_nats"`
	// BarMicroNats is the bar after the last run.
	BarMicroNats int64 `json:"bar_micro_nats"`
	// Events is the frontier chain, oldest first.
	Events []FrontierEvent `json:"events"`
	// Decisions holds one decision per run, in input order.
	Decisions []RunDecision `json:"decisions"`
	// Pending holds the first runs still awaiting a confirm run, sorted by
	// submission.
	Pending []Run `json:"pending"`
}

// FoldFrontier applies runs, oldest first, to a frontier whose bar starts at
// baselineMicroNats, and returns the chain of frontier events with a decision per
// run. Runs must be ordered by AtSec (equal times keep their given order, which
// the caller fixes, for example by chain position).
//
// With bar B and floor F, a run clears when B - loss >= F. The first run of a
// submission that clears becomes pending; one that does not decides the
// submission. The next run of a pending submission with a different run index is
// its confirm run: when max(first loss, confirm loss) <= B - F for the bar B then
// in force, the frontier moves to that worse loss and an event records the
// improvement; otherwise the submission is decided. Runs of a decided submission
// are ignored, so every submission moves the frontier at most once.
//
// Folding a prefix of runs yields a prefix of the events: the chain only grows.
// FoldFrontier fails on invalid rules, a negative baseline or loss or time, an
// empty submission or author, a submission whose author changes, or runs out of
// time order ([ErrRunOrder]).
func FoldFrontier(baselineMicroNats int64, runs []Run, rules FrontierRules) (FrontierHistory, error) {
	if err := rules.Validate(); err != nil {
		return FrontierHistory{}, fmt.Errorf("frontier: %w", err)
	}
	if baselineMicroNats < 0 {
		return FrontierHistory{}, fmt.Errorf("frontier: negative baseline %d", baselineMicroNats)
	}
	h := FrontierHistory{
		BaselineMicroNats: baselineMicroNats,
		BarMicroNats:      baselineMicroNats,
		Events:            []FrontierEvent{},
		Decisions:         make([]RunDecision, 0, len(runs)),
		Pending:           []Run{},
	}
	pending := make(map[digest.Digest]Run)
	decided := make(map[digest.Digest]bool)
	authors := make(map[digest.Digest]string)
	var last int64
	for i, r := range runs {
		switch {
		case r.Submission == "":
			return FrontierHistory{}, fmt.Errorf("frontier: run %d: empty submission", i)
		case r.Author == "":
			return FrontierHistory{}, fmt.Errorf("frontier: run %d: empty author", i)
		case r.LossMicroNats < 0:
			return FrontierHistory{}, fmt.Errorf("frontier: run %d: negative loss %d", i, r.LossMicroNats)
		case r.AtSec < 0:
			return FrontierHistory{}, fmt.Errorf("frontier: run %d: negative time %d", i, r.AtSec)
		case r.AtSec < last:
			return FrontierHistory{}, fmt.Errorf("frontier: run %d at %d s follows a run at %d s: %w", i, r.AtSec, last, ErrRunOrder)
		}
		last = r.AtSec
		if a, ok := authors[r.Submission]; ok && a != r.Author {
			return FrontierHistory{}, fmt.Errorf("frontier: run %d: submission %s is bound to %s, not %s", i, r.Submission, a, r.Author)
		}
		authors[r.Submission] = r.Author

		d := RunDecision{Run: r, BarMicroNats: h.BarMicroNats}
		first, isPending := pending[r.Submission]
		switch {
		case decided[r.Submission]:
			d.Outcome = RunDecided
		case isPending && first.RunIndex == r.RunIndex:
			d.Outcome = RunRepeated
		case isPending:
			delete(pending, r.Submission)
			decided[r.Submission] = true
			worse := max(first.LossMicroNats, r.LossMicroNats)
			if h.BarMicroNats-worse < rules.FloorMicroNats {
				d.Outcome = RunConfirmFailed
				break
			}
			d.Outcome = RunConfirmed
			h.Events = append(h.Events, FrontierEvent{
				Height:               uint64(len(h.Events)) + 1,
				Submission:           r.Submission,
				Author:               r.Author,
				FirstRun:             first.RunIndex,
				FirstLossMicroNats:   first.LossMicroNats,
				ConfirmRun:           r.RunIndex,
				ConfirmLossMicroNats: r.LossMicroNats,
				PreviousBarMicroNats: h.BarMicroNats,
				BarMicroNats:         worse,
				ImprovementMicroNats: h.BarMicroNats - worse,
				AtSec:                r.AtSec,
			})
			h.BarMicroNats = worse
		case h.BarMicroNats-r.LossMicroNats >= rules.FloorMicroNats:
			pending[r.Submission] = r
			d.Outcome = RunPending
		default:
			decided[r.Submission] = true
			d.Outcome = RunNotCleared
		}
		h.Decisions = append(h.Decisions, d)
	}
	for _, r := range pending {
		h.Pending = append(h.Pending, r)
	}
	slices.SortFunc(h.Pending, func(a, b Run) int { return cmp.Compare(a.Submission, b.Submission) })
	return h, nil
}
