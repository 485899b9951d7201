package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/replay"
	"github.com/urfave/cli/v2"
)

// replayBatch is what 'feval replay' prints with --json for several digests:
// each one's result as 'feval replay DIGEST --json' prints it alone.
type replayBatch struct {
	Results []replayItem `json:"results"`
}

// replayItem is the replay of one digest of a batch.
type replayItem struct {
	Ref string `json:"ref"`
	// Result is the replay's result (a verdict's or a consensus record's),
	// absent when the replay could not run (Error).
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	ExitCode int             `json:"exit_code"` // the code replaying it alone exits with
}

const replayDescription = `Replays one or several verdicts or consensus records in one process (the
task of a round is parsed once for all). With several, each is printed as it
is alone (--json: {"results": [...]}, one result per digest), and the exit
code is 0 when every replay is identical, 5 when every replay ran and some
differ, and otherwise the code of the first that could not run.`

func replayCommand(a *appEnv) *cli.Command {
	st, tr, rem, out := &storeOptions{}, &trustOptions{}, &remoteOptions{}, &outputOptions{}
	return &cli.Command{
		Name:        "replay",
		Usage:       "auditor: regenerate verdicts (or consensus records) from their recorded inputs and compare: identical or differs",
		ArgsUsage:   "VERDICT|CONSENSUS...",
		Description: replayDescription,
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "registry repository to fetch the verdicts and their inputs from"},
			&cli.BoolFlag{Name: "retrain", Usage: "optimizer: also train again for the recorded steps and compare checkpoints bit for bit (runs the submission in the sandbox)"},
			&cli.BoolFlag{Name: "verify-only", Usage: "scenarios: re-run only the verifiers (hidden tests) on the recorded final workspaces"},
			&cli.StringFlag{Name: "key", Hidden: true, EnvVars: []string{envKey}},
		}, st.Flags(), tr.Flags(), rem.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			tr.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			if c.NArg() == 0 {
				return usagef("'%s' takes one or more VERDICT arguments (got 0 arguments)\n%s", c.Command.HelpName, usageText([]string{"feval", "replay"}, c.Command))
			}
			// Replay decides on the auditor's keys (--pub, else its own), never
			// on whoever signed.
			trusted, err := tr.Load()
			if err != nil {
				return err
			}
			l, err := st.Open()
			if err != nil {
				return err
			}
			var src *cas.Remote
			if from := c.String("from"); from != "" {
				if src, _, err = rem.Open(from); err != nil {
					return err
				}
			}
			// One session: the inputs the verdicts share are verified once.
			session := replay.NewSession(l, trusted, evaluate.Options{Retrain: c.Bool("retrain"), VerifyOnly: c.Bool("verify-only")})
			one := func(a *appEnv, ref string) error { return a.replayOne(c.Context, out, l, src, ref, trusted, session) }
			if c.NArg() == 1 {
				return one(a, c.Args().First())
			}
			codes := make([]int, c.NArg())
			batch := replayBatch{Results: []replayItem{}}
			for i, ref := range c.Args().Slice() {
				var err error
				if out.JSON {
					var buf bytes.Buffer
					err = one(&appEnv{stdin: a.stdin, stdout: &buf, stderr: a.stderr}, ref)
					item := replayItem{Ref: ref, ExitCode: exitCode(err)}
					if buf.Len() > 0 {
						item.Result = json.RawMessage(bytes.TrimSpace(buf.Bytes()))
					}
					var rendered *renderedError
					if err != nil && !errors.As(err, &rendered) {
						item.Error = err.Error()
					}
					batch.Results = append(batch.Results, item)
				} else if err = one(a, ref); err != nil {
					var rendered *renderedError
					if !errors.As(err, &rendered) {
						fmt.Fprintf(a.stdout, "error %s: %v\n", ref, err)
					}
				}
				codes[i] = exitCode(err)
			}
			if out.JSON {
				if err := a.render(out, batch, nil); err != nil {
					return err
				}
			}
			if code := batchExitCode(codes); code != exitOK {
				n := 0
				for _, c := range codes {
					if c != exitOK {
						n++
					}
				}
				return &renderedError{code: code, err: errors.New("some replays are not identical"),
					summary: fmt.Sprintf("%d of %d replays not identical (listed on stdout)", n, len(codes))}
			}
			return nil
		},
	}
}

// replayOne replays one verdict or consensus record and renders the result
// on a's stdout; a replay that differs is a renderedError.
func (a *appEnv) replayOne(ctx context.Context, out *outputOptions, l *cas.Layout, src *cas.Remote, ref string, trusted []*bundle.PublicKey, session *replay.Session) error {
	var desc ociDesc
	var err error
	if src != nil {
		if desc, err = resolveIn(ctx, l, src, ref); err != nil {
			return err
		}
		if ok, err := a.replayConsensus(ctx, out, l, src, desc, trusted); ok || err != nil {
			return err
		}
		if err := replay.Fetch(ctx, src, l, desc); err != nil {
			return err
		}
	} else if desc, err = cas.ResolveRef(ctx, l, ref); err != nil {
		return err
	} else if ok, err := a.replayConsensus(ctx, out, l, nil, desc, trusted); ok || err != nil {
		return err
	}
	res, err := session.Run(ctx, desc)
	if err != nil {
		return err
	}
	if err := a.render(out, res, func(w *tabw) {
		w.line("%s %s (status %s, signed by %s)", res.Outcome, res.Verdict, res.Status, fingerprints(res.Signers))
		for _, ch := range res.Checks {
			w.line("checked %s: %s", ch.Path, ch.Recomputed)
		}
		for _, u := range res.Unchecked {
			w.line("unchecked %s: %s, %s", u.Path, u.Recorded, u.Recomputed)
		}
		renderSkipped(w, res.Skipped)
		if res.Outcome == replay.Differs {
			w.line("recomputed %s", res.Recomputed)
			w.row("PATH", "RECORDED", "RECOMPUTED")
			for _, d := range res.Diffs {
				w.row(d.Path, d.Recorded, d.Recomputed)
			}
		}
	}); err != nil {
		return err
	}
	switch res.Outcome {
	case replay.Differs:
		return &renderedError{code: exitDiffers, err: errors.New("replay differs"),
			summary: fmt.Sprintf("replay of %s differs in %d fields (listed on stdout)", res.Verdict, len(res.Diffs))}
	case replay.Unchecked:
		return &renderedError{code: exitUnchecked, err: errors.New("replay unchecked"),
			summary: fmt.Sprintf("replay of %s left %d recorded outcomes unchecked (listed on stdout); replay --retrain re-runs them", res.Verdict, len(res.Unchecked))}
	}
	return nil
}
