package main

import (
	"fmt"
	"math/big"

	"github.com/feval/feval/beacon"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/scoring"
	"github.com/urfave/cli/v2"
)

// beaconOptions: the public randomness of a round (a rollouts audit's rows, an
// optimizer round's seeds and held-out windows), a drand round (verified)
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
	Rows       []string        `json:"sampled_rows"`
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
