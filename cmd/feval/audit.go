package main

import (
	"errors"
	"fmt"
	"math/big"
	"os"

	"github.com/feval/feval/beacon"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/feval/feval/replay"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	"github.com/urfave/cli/v2"
)

// beaconOptions: the public randomness of an audit, a drand round (verified)
// or a plain value (unverified, for tests).
type beaconOptions struct {
	b rollouts.Beacon
}

func (o *beaconOptions) Flags() []cli.Flag {
	return []cli.Flag{
		&cli.Uint64Flag{Name: "drand-round", Usage: "verifiable beacon: the drand round (quicknet: the first round after commits closed)", DefaultText: "none"},
		&cli.StringFlag{Name: "drand-signature", Usage: "verifiable beacon: that round's signature (96 lower-case hex, the relay's \"signature\")"},
		&cli.StringFlag{Name: "drand-chain", Usage: "verifiable beacon: the drand chain hash", Value: beacon.Quicknet.Hash, DefaultText: "quicknet"},
		&cli.StringFlag{Name: "beacon", Usage: "unverified beacon for tests: a value (recorded as unverified); with --beacon-source"},
		&cli.StringFlag{Name: "beacon-source", Usage: "unverified beacon for tests: where the value comes from, e.g. block:4200"},
	}
}

func (o *beaconOptions) Parse(c *cli.Context) error {
	drand := c.IsSet("drand-round") || c.IsSet("drand-signature")
	plain := c.IsSet("beacon") || c.IsSet("beacon-source")
	switch {
	case drand && plain:
		return usagef("--drand-round/--drand-signature and --beacon/--beacon-source are two kinds of beacon: give one")
	case drand:
		if !c.IsSet("drand-round") || !c.IsSet("drand-signature") {
			return usagef("--drand-round and --drand-signature are both required for a drand beacon")
		}
		o.b = rollouts.Beacon{Drand: &beacon.Drand{Chain: c.String("drand-chain"), Round: c.Uint64("drand-round"), Signature: c.String("drand-signature")}}
		if len(o.b.Drand.Signature) > 1024 || len(o.b.Drand.Chain) > 256 {
			return usagef("--drand-signature or --drand-chain too long")
		}
		return nil
	}
	o.b = rollouts.Beacon{Source: c.String("beacon-source"), Value: c.String("beacon")}
	if o.b.Value == "" || o.b.Source == "" {
		return usagef("a beacon is required: --drand-round N --drand-signature HEX (verifiable), or --beacon V --beacon-source S (unverified, for tests)")
	}
	if len(o.b.Value) > 1024 || len(o.b.Source) > 256 {
		return usagef("--beacon (1024) or --beacon-source (256 bytes) too long")
	}
	return nil
}

// beaconText names a beacon and says whether it was verified.
func beaconText(b rollouts.Beacon) string { return b.Text() }

type sampleResult struct {
	Seed       string          `json:"seed"`
	Beacon     rollouts.Beacon `json:"beacon"`
	Commitment string          `json:"commitment"`
	Submission string          `json:"submission"`
	RowsTotal  int             `json:"rows_total"`
	SampleSize int             `json:"sample_size"`
	Rows       []string        `json:"rows"`
	Detection  []detection     `json:"detection"`
}

type detection struct {
	CheatRate   string `json:"cheat_rate"`
	CheatRows   int    `json:"cheat_rows"`
	Probability string `json:"probability"` // decimal, 6 places, rounded down
}

func sampleCommand(a *appEnv) *cli.Command {
	st, out, bo := &storeOptions{}, &outputOptions{}, &beaconOptions{}
	return &cli.Command{
		Name:      "sample",
		Usage:     "re-derive the audit rows a beacon selects for a reveal, and the chance of catching a cheat rate",
		ArgsUsage: "REVEAL",
		Flags: flagSet([]cli.Flag{
			&cli.IntFlag{Name: "n", Usage: "sample size (default: the task's audit size)"},
		}, bo.Flags(), st.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			out.Parse(c)
			if err := bo.Parse(c); err != nil {
				return err
			}
			if err := args(c, 1, "one REVEAL"); err != nil {
				return err
			}
			l, err := st.Open()
			if err != nil {
				return err
			}
			reveal, err := cas.ResolveRef(c.Context, l, c.Args().First())
			if err != nil {
				return err
			}
			refs, err := rollouts.ResolveRefs(c.Context, l, reveal)
			if err != nil {
				return err
			}
			var rv protocol.Reveal
			if _, err := protocol.LoadAs(c.Context, l, reveal, protocol.KindReveal, &rv); err != nil {
				return err
			}
			fsys, err := protocol.LoadTaskFS(c.Context, l, refs.Task)
			if err != nil {
				return err
			}
			task, err := rollouts.LoadTask(fsys)
			if err != nil {
				return err
			}
			n := task.Spec.AuditRows
			if c.IsSet("n") {
				n = c.Int("n")
				if n <= 0 || n > task.Spec.Rows {
					return usagef("-n %d: want 1..%d", n, task.Spec.Rows)
				}
			}
			b, err := bo.b.Derive()
			if err != nil {
				return usagef("%v", err)
			}
			bo.b = b
			seed := scoring.AuditSeed(bo.b.Source, bo.b.Value, rv.Commitment, rv.Submission.String())
			res := sampleResult{Seed: scoring.SeedHex(seed), Beacon: bo.b, Commitment: rv.Commitment, Submission: rv.Submission.String(),
				RowsTotal: task.Spec.Rows, SampleSize: n, Rows: scoring.SampleRows(seed, task.IDs(), n)}
			for _, pct := range []int{1, 5, 10} {
				k := task.Spec.Rows * pct / 100
				p, err := scoring.DetectionProbability(task.Spec.Rows, k, n)
				if err != nil {
					return err
				}
				res.Detection = append(res.Detection, detection{CheatRate: fmt.Sprintf("%d/100", pct), CheatRows: k, Probability: decimal(p, 6)})
			}
			return a.render(out, res, func(w *tabw) {
				w.line("beacon %s", beaconText(res.Beacon))
				w.line("seed %s", res.Seed)
				for _, d := range res.Detection {
					w.line("P(catch | %s of rows cheat) = %s", d.CheatRate, d.Probability)
				}
				for _, id := range res.Rows {
					w.line("%s", id)
				}
			})
		},
	}
}

// decimal renders a rational in [0,1] with the given places, rounded down.
func decimal(r *big.Rat, places int) string {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(places)), nil)
	n := new(big.Int).Mul(r.Num(), scale)
	n.Quo(n, r.Denom())
	s := fmt.Sprintf("%0*s", places+1, n.String())
	return s[:len(s)-places] + "." + s[len(s)-places:]
}

func evaluateCommand(a *appEnv) *cli.Command {
	st, k, rem, out, clk, bo := &storeOptions{}, &keyOptions{}, &remoteOptions{}, &outputOptions{}, &clockOptions{}, &beaconOptions{}
	return &cli.Command{
		Name:      "evaluate",
		Usage:     "validator: check a reveal, evaluate it by its task's protocol (audit rows, train an optimizer), and write a signed verdict",
		ArgsUsage: "REVEAL",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "task", Usage: "the task the reveal must belong to (digest, prefix or tag); required"},
			&cli.StringFlag{Name: "from", Usage: "registry repository to collect the round from"},
			&cli.StringFlag{Name: "to", Usage: "registry repository to push the verdict to"},
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
			// A beacon is for rollouts audits; the rollouts driver refuses an
			// audit without one.
			if c.IsSet("beacon") || c.IsSet("beacon-source") || c.IsSet("drand-round") || c.IsSet("drand-signature") {
				if err := bo.Parse(c); err != nil {
					return err
				}
			}
			if err := clk.Parse(c); err != nil {
				return err
			}
			if err := args(c, 1, "one REVEAL"); err != nil {
				return err
			}
			if c.String("task") == "" {
				return usagef("--task is required: the task you are evaluating for")
			}
			src, err := rem.OpenOptional(c.String("from"))
			if err != nil {
				return err
			}
			dst, err := rem.OpenOptional(c.String("to"))
			if err != nil {
				return err
			}
			l, s, ts, err := openForWrite(a, st, k)
			if err != nil {
				return err
			}
			if c.Int("parallel") < 1 || c.Int("parallel") > 64 {
				return usagef("--parallel %d: want 1 to 64 scenarios at once", c.Int("parallel"))
			}
			if c.Int64("bar") < 0 || c.Int64("floor") < 0 {
				return usagef("--bar and --floor are non-negative micro-nats")
			}
			var hidden digest.Digest
			if ref := c.String("hidden"); ref != "" {
				d, err := cas.ResolveRef(c.Context, l, ref)
				if err != nil {
					return fmt.Errorf("--hidden %s: %w", ref, err)
				}
				hidden = d.Digest
			}
			req := evaluate.Request{Reveal: c.Args().First(), Task: c.String("task"), Obs: clk.obs, Created: ts,
				Options: evaluate.Options{
					Rollouts:  rollouts.Params{Beacon: bo.b, Full: c.Bool("full")},
					Optimizer: optimizer.Params{BarMicroNats: c.Int64("bar"), FloorMicroNats: c.Int64("floor")},
					Scenarios: scenarios.Params{Upstream: c.String("upstream"), Parallel: c.Int("parallel"), Hidden: hidden,
						Credentials: func(string) string { return os.Getenv(envMeterKey) }},
				}}
			if src != nil {
				req.Source = src
			}
			res, err := evaluate.Evaluate(c.Context, l, s, req)
			if errors.Is(err, evaluate.ErrTaskMismatch) || errors.Is(err, scenarios.ErrNoHidden) {
				return usagef("%v", err)
			}
			if errors.Is(err, rollouts.ErrBeacon) {
				return usagef("%v", err)
			}
			var rej *evaluate.RejectedError
			if errors.As(err, &rej) {
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
			if err != nil {
				return err
			}
			if dst != nil {
				for _, e := range res.Evidence {
					if err := publish(c.Context, l, dst, e, "evidence"); err != nil {
						return err
					}
				}
				if err := publish(c.Context, l, dst, res.Artifact, "verdict"); err != nil {
					return err
				}
			}
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
		},
	}
}

func replayCommand(a *appEnv) *cli.Command {
	st, tr, rem, out := &storeOptions{}, &trustOptions{}, &remoteOptions{}, &outputOptions{}
	return &cli.Command{
		Name:      "replay",
		Usage:     "auditor: regenerate a verdict (or a consensus record) from its recorded inputs and compare: identical or differs",
		ArgsUsage: "VERDICT|CONSENSUS",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "registry repository to fetch the verdict and its inputs from"},
			&cli.BoolFlag{Name: "retrain", Usage: "optimizer: also train again for the recorded steps and compare checkpoints bit for bit (runs the submission in the sandbox)"},
			&cli.BoolFlag{Name: "verify-only", Usage: "scenarios: re-run only the verifiers (hidden tests) on the recorded final workspaces"},
			&cli.StringFlag{Name: "key", Hidden: true, EnvVars: []string{envKey}},
		}, st.Flags(), tr.Flags(), rem.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			tr.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			if err := args(c, 1, "one VERDICT"); err != nil {
				return err
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
			var desc ociDesc
			if from := c.String("from"); from != "" {
				src, _, err := rem.Open(from)
				if err != nil {
					return err
				}
				if desc, err = resolveIn(c.Context, l, src, c.Args().First()); err != nil {
					return err
				}
				if ok, err := a.replayConsensus(c.Context, out, l, src, desc, trusted); ok || err != nil {
					return err
				}
				if err := replay.Fetch(c.Context, src, l, desc); err != nil {
					return err
				}
			} else if desc, err = cas.ResolveRef(c.Context, l, c.Args().First()); err != nil {
				return err
			} else if ok, err := a.replayConsensus(c.Context, out, l, nil, desc, trusted); ok || err != nil {
				return err
			}
			res, err := replay.RunWith(c.Context, l, desc, trusted, evaluate.Options{Retrain: c.Bool("retrain"), VerifyOnly: c.Bool("verify-only")})
			if err != nil {
				return err
			}
			if err := a.render(out, res, func(w *tabw) {
				w.line("%s %s (status %s, signed by %s)", res.Outcome, res.Verdict, res.Status, fingerprints(res.Signers))
				for _, ch := range res.Checks {
					w.line("checked %s: %s", ch.Path, ch.Recomputed)
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
			if res.Outcome == replay.Differs {
				return &renderedError{code: exitDiffers, err: errors.New("replay differs"),
					summary: fmt.Sprintf("replay of %s differs in %d fields (listed on stdout)", res.Verdict, len(res.Diffs))}
			}
			return nil
		},
	}
}
