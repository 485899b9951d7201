package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/opencontainers/go-digest"
	"github.com/urfave/cli/v2"
)

// evaluateBatch is what 'feval evaluate' prints for several reveals or a
// round: one result per reveal, in the order evaluated.
type evaluateBatch struct {
	Results  []evaluateResult `json:"results"`
	Passed   int              `json:"passed"`   // verdicts with status passed
	Rejected int              `json:"rejected"` // rejected verdicts, and rejected reveals of a protocol without verdicts
	Other    int              `json:"other"`    // verdicts undetermined or infra_error
	Failed   int              `json:"failed"`   // reveals without a verdict: an error
}

// evaluateResult is the outcome of one reveal of a batch.
type evaluateResult struct {
	Reveal string `json:"reveal"`
	// Status is the verdict's status, "rejected" for a reveal of a protocol
	// without verdicts that failed its checks, or "error".
	Status  string            `json:"status"`
	Reason  string            `json:"reason,omitempty"`
	Outcome *evaluate.Outcome `json:"result,omitempty"`
	Entry   *protocol.Entry   `json:"entry,omitempty"` // the reveal check of a rejected reveal without a verdict
	Error   string            `json:"error,omitempty"`
	// ExitCode is the code evaluating this reveal alone exits with.
	ExitCode int `json:"exit_code"`
}

const evaluateDescription = `Evaluates one or several reveals, or with --round every reveal that answers
a commitment of a round, in one process: the round is collected and its reveal
checks run once, each task is parsed once, and each reveal gets the verdict
(the same bytes) it gets evaluated alone. The signing key is decrypted while
the reveal checks run; nothing is written if it cannot be.

With one REVEAL the verdict is printed (--json: the outcome) and the exit code
is the reveal's. With several, or --round, one line (--json: one result) per
reveal, and the exit code is 0 when every reveal got a verdict that is not
rejected, 6 when every reveal got a verdict (or a reveal-check result) and some
are rejected, and otherwise the code of the first reveal that got none.`

func evaluateCommand(a *appEnv) *cli.Command {
	st, k, rem, out, clk, bo := &storeOptions{}, &keyOptions{}, &remoteOptions{}, &outputOptions{}, &clockOptions{}, &beaconOptions{}
	return &cli.Command{
		Name:        "evaluate",
		Usage:       "validator: check reveals, evaluate them by their task's protocol (audit rows, train an optimizer), and write signed verdicts",
		ArgsUsage:   "REVEAL... | --round ROUND",
		Description: evaluateDescription,
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "task", Usage: "the task the reveals must belong to (digest, prefix or tag); required"},
			&cli.StringFlag{Name: "round", Usage: "evaluate every reveal that answers a commitment of this round (digest, prefix or tag), instead of naming reveals"},
			&cli.StringFlag{Name: "from", Usage: "registry repository to collect the round from"},
			&cli.StringFlag{Name: "to", Usage: "registry repository to push the verdicts to"},
			&cli.BoolFlag{Name: "full", Usage: "rollouts: recompute every row instead of a sample"},
			&cli.Int64Flag{Name: "bar", Usage: "optimizer: the bar in force, in micro-nats of held-out loss (default: the task's baseline)"},
			&cli.Int64Flag{Name: "floor", Usage: "optimizer: the least improvement that clears the bar, in micro-nats (default: the rules' floor)"},
			&cli.StringFlag{Name: "upstream", Usage: "scenarios: base URL of the OpenAI-compatible API that serves every allowlisted model (replaces the task's upstreams)", EnvVars: []string{envMeterUp}},
			&cli.IntFlag{Name: "parallel", Value: 2, Usage: "scenarios: how many scenarios run at once"},
			&cli.StringFlag{Name: "hidden", Usage: "scenarios: the task's hidden tests (digest, prefix or tag of the tests artifact in the local store, published by the task owner after reveals close); required for scenarios rounds"},
		}, bo.Flags(), clk.Flags(), st.Flags(), k.Flags(), rem.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			k.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			// A beacon picks a rollouts audit's rows and an optimizer
			// round's seeds and held-out windows; those drivers refuse an
			// accepted reveal without one.
			if c.IsSet("beacon") || c.IsSet("beacon-source") || c.IsSet("drand-round") || c.IsSet("drand-signature") {
				if err := bo.Parse(c); err != nil {
					return err
				}
			}
			if err := clk.Parse(c); err != nil {
				return err
			}
			round := c.String("round")
			switch {
			case round != "" && c.NArg() > 0:
				return usagef("give REVEAL arguments or --round, not both: --round evaluates every reveal of the round")
			case round == "" && c.NArg() == 0:
				return usagef("'%s' takes one or more REVEAL arguments, or --round ROUND\n%s", c.Command.HelpName, usageText([]string{"feval", "evaluate"}, c.Command))
			}
			if c.String("task") == "" {
				return usagef("--task is required: the task you are evaluating for")
			}
			if c.Int("parallel") < 1 || c.Int("parallel") > 64 {
				return usagef("--parallel %d: want 1 to 64 scenarios at once", c.Int("parallel"))
			}
			if c.Int64("bar") < 0 || c.Int64("floor") < 0 {
				return usagef("--bar and --floor are non-negative micro-nats")
			}
			src, err := rem.OpenOptional(c.String("from"))
			if err != nil {
				return err
			}
			dst, err := rem.OpenOptional(c.String("to"))
			if err != nil {
				return err
			}
			ts, err := created()
			if err != nil {
				return err
			}
			l, err := st.Open()
			if err != nil {
				return err
			}
			// The key is decrypted while the round is checked; the library
			// waits for it before its first write.
			signer, err := k.SignerAsync(a)
			if err != nil {
				return err
			}
			var hidden digest.Digest
			if ref := c.String("hidden"); ref != "" {
				d, err := cas.ResolveRef(c.Context, l, ref)
				if err != nil {
					return fmt.Errorf("--hidden %s: %w", ref, err)
				}
				hidden = d.Digest
			}
			b := evaluate.Batch{Reveals: c.Args().Slice(), Round: round, Task: c.String("task"), Obs: clk.obs, Created: ts,
				Options: evaluate.Options{
					Rollouts:  rollouts.Params{Beacon: bo.b, Full: c.Bool("full")},
					Optimizer: optimizer.Params{BarMicroNats: c.Int64("bar"), FloorMicroNats: c.Int64("floor"), Beacon: bo.b},
					Scenarios: scenarios.Params{Upstream: c.String("upstream"), Parallel: c.Int("parallel"), Hidden: hidden,
						Credentials: func(string) string { return os.Getenv(envMeterKey) }},
				}}
			if src != nil {
				b.Source = src
			}
			rs, err := evaluate.EvaluateAll(c.Context, l, signer, b)
			if err != nil {
				return evaluateError(err)
			}
			push := func(ctx context.Context, o *evaluate.Outcome) error {
				if dst == nil || o == nil {
					return nil
				}
				for _, e := range o.Evidence {
					if err := publish(ctx, l, dst, e.OCI(), "evidence"); err != nil {
						return err
					}
				}
				return publish(ctx, l, dst, o.Artifact.OCI(), "verdict")
			}
			if round == "" && len(rs) == 1 {
				if err := push(c.Context, rs[0].Outcome); err != nil {
					return err
				}
				return a.renderEvaluated(out, rs[0])
			}
			batch := evaluateBatch{Results: []evaluateResult{}}
			for _, r := range rs {
				if err := push(c.Context, r.Outcome); err != nil {
					r.Outcome, r.Err = nil, err
				}
				er := evaluatedResult(r)
				switch {
				case er.Status == protocol.VerdictPassed:
					batch.Passed++
				case er.Status == protocol.VerdictRejected:
					batch.Rejected++
				case er.Status == "error":
					batch.Failed++
				default:
					batch.Other++
				}
				batch.Results = append(batch.Results, er)
			}
			if err := a.render(out, batch, func(w *tabw) {
				w.row("REVEAL", "STATUS", "VERDICT")
				for _, r := range batch.Results {
					switch {
					case r.Outcome != nil:
						w.row(r.Reveal, r.Status+" "+r.Reason, r.Outcome.Artifact.Digest.String())
					case r.Entry != nil:
						w.row(r.Reveal, r.Status+" "+r.Reason, "none: "+r.Entry.Detail)
					default:
						w.row(r.Reveal, "error", r.Error)
					}
				}
			}); err != nil {
				return err
			}
			codes := make([]int, len(batch.Results))
			for i, r := range batch.Results {
				codes[i] = r.ExitCode
			}
			if code := batchExitCode(codes); code != exitOK {
				return &renderedError{code: code, err: errors.New("some reveals did not pass"),
					summary: fmt.Sprintf("%d reveals: %d passed, %d rejected, %d other, %d without a verdict (listed on stdout)",
						len(batch.Results), batch.Passed, batch.Rejected, batch.Other, batch.Failed)}
			}
			return nil
		},
	}
}

// evaluateError is the error of one reveal's evaluation as 'feval evaluate'
// reports it: a mismatched task, missing hidden tests and a missing or
// refused beacon are the caller's mistakes.
func evaluateError(err error) error {
	if errors.Is(err, evaluate.ErrTaskMismatch) || errors.Is(err, scenarios.ErrNoHidden) || errors.Is(err, rollouts.ErrBeacon) || errors.Is(err, optimizer.ErrNoBeacon) {
		return usagef("%v", err)
	}
	return err
}

// evaluatedResult is the printed result of one reveal of a batch, with the
// exit code evaluating it alone gives.
func evaluatedResult(r evaluate.Result) evaluateResult {
	er := evaluateResult{Reveal: r.Reveal}
	var rej *evaluate.RejectedError
	switch {
	case errors.As(r.Err, &rej):
		er.Status, er.Reason, er.Entry, er.ExitCode = protocol.VerdictRejected, rej.Entry.Reason, &rej.Entry, exitRejected
	case r.Err != nil:
		err := evaluateError(r.Err)
		er.Status, er.Error, er.ExitCode = "error", err.Error(), exitCode(err)
	default:
		h := r.Outcome.Verdict.Head()
		er.Status, er.Reason, er.Outcome = h.Status, h.Reason, r.Outcome
		if h.Status == protocol.VerdictRejected {
			er.ExitCode = exitRejected
		}
	}
	return er
}

// renderEvaluated prints the outcome of a single reveal as 'feval evaluate
// REVEAL' always has.
func (a *appEnv) renderEvaluated(out *outputOptions, r evaluate.Result) error {
	var rej *evaluate.RejectedError
	if errors.As(r.Err, &rej) {
		// A protocol without a verdict format: the reveal check is the result.
		if err := a.render(out, rej.Entry, func(w *tabw) {
			w.line("reveal\t%s", rej.Reveal)
			w.line("status\t%s %s", rej.Entry.Status, rej.Entry.Reason)
			w.line("detail\t%s", rej.Entry.Detail)
			for _, vi := range rej.Entry.Violations {
				w.line("violation\t%s", vi)
			}
		}); err != nil {
			return err
		}
		return &renderedError{code: exitRejected, err: rej,
			summary: fmt.Sprintf("reveal %s rejected (%s); no verdict written", rej.Reveal, rej.Entry.Reason)}
	}
	if r.Err != nil {
		return evaluateError(r.Err)
	}
	res := *r.Outcome
	h := res.Verdict.Head()
	if err := a.render(out, res, func(w *tabw) {
		w.line("verdict\t%s", res.Artifact.Digest)
		w.line("status\t%s %s", h.Status, h.Reason)
		w.line("submission\t%s", h.Submission)
		for _, d := range res.Verdict.Details() {
			w.line("%s\t%s", d.Label, d.Value)
		}
	}); err != nil {
		return err
	}
	if h.Status == protocol.VerdictRejected {
		return &renderedError{code: exitRejected, err: fmt.Errorf("rejected: %s", h.Reason),
			summary: fmt.Sprintf("submission %s rejected (%s); verdict %s written", h.Submission, h.Reason, res.Artifact.Digest)}
	}
	return nil
}
