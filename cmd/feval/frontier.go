package main

import (
	"fmt"
	"io"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"strconv"
	"strings"
	"time"

	"github.com/feval/feval/consensus"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	"github.com/urfave/cli/v2"
)

// frontierOptions: the runs (from a round's signed verdicts, or a what-if
// file), the baseline and the rules of the frontier.
type frontierOptions struct {
	// stderr receives a line for each run the verdicts report differently.
	stderr   io.Writer
	runs     []scoring.Run
	baseline int64
	rules    scoring.Rules
	// round says, with --round, what the round's verdicts left out.
	round RoundRuns
	st    storeOptions
	tr    trustOptions
	rem   remoteOptions
}

// RoundRuns is what --json adds with --round: the round, the counts of its
// verdicts that did not count, by reason, and the runs its verdicts report
// differently (stderr says the same in words).
type RoundRuns struct {
	Round      digest.Digest          `json:"round,omitempty"`
	LeftOut    map[string]int         `json:"left_out,omitempty"`
	Reconciled []consensus.Reconciled `json:"reconciled,omitempty"`
}

// frontierResult is what 'feval frontier --json' prints.
type frontierResult struct {
	scoring.FrontierHistory
	RoundRuns
}

// emissionResult is what 'feval emission --json' prints.
type emissionResult struct {
	scoring.Emission
	RoundRuns
}

func (o *frontierOptions) Flags() []cli.Flag {
	return flagSet([]cli.Flag{
		&cli.StringFlag{Name: "round", Usage: "optimizer round whose signed verdicts give the runs (digest, prefix or tag)"},
		&cli.StringFlag{Name: "from", Usage: "with --round: registry repository to gather the round and its verdicts from"},
		&cli.StringFlag{Name: "launch", Usage: "with --round: the competition's launch (RFC 3339); runs are timed by their reveal's first-seen time (default: the round's commit deadline)"},
		&cli.StringFlag{Name: "events", Usage: "instead of --round, a what-if JSON list of runs in the order they became final: {submission, author, run_index, loss_micro_nats, at_sec}"},
		&cli.Int64Flag{Name: "baseline", Usage: "the bar at launch, in micro-nats of held-out loss (required with --events; default with --round: the task's baseline)"},
		&cli.StringFlag{Name: "rules", Usage: "rules JSON file (default: the documented defaults)"},
	}, o.st.Flags(), o.tr.Flags(), o.rem.Flags())
}

func (o *frontierOptions) Parse(c *cli.Context) error {
	o.st.Parse(c)
	o.tr.Parse(c)
	o.rem.Parse(c)
	switch {
	case c.String("events") != "" && c.String("round") != "":
		return usagef("--events and --round both give the runs: use one")
	case c.String("round") != "":
		if err := o.fromVerdicts(c); err != nil {
			return err
		}
	case c.String("events") == "" || !c.IsSet("baseline"):
		return usagef("--round ROUND (signed verdicts), or --events FILE with --baseline MICRONATS, is required")
	default:
		b, err := readInputFile(c.String("events"))
		if err != nil {
			return err
		}
		if o.runs, err = consensus.ParseRuns(b); err != nil {
			return usagef("%s: %v", c.String("events"), err)
		}
		o.baseline = c.Int64("baseline")
	}
	o.rules = scoring.DefaultRules()
	if p := c.String("rules"); p != "" {
		b, err := readInputFile(p)
		if err != nil {
			return err
		}
		if o.rules, err = consensus.ParseRules(b); err != nil {
			return usagef("%s: %v", p, err)
		}
	}
	return nil
}

func frontierCommand(a *appEnv) *cli.Command {
	fo, out := &frontierOptions{stderr: a.stderr}, &outputOptions{}
	return &cli.Command{
		Name:  "frontier",
		Usage: "optimizer: fold runs into the frontier history (confirmed events, the bar, each run's outcome)",
		Flags: flagSet(fo.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			if err := fo.Parse(c); err != nil {
				return err
			}
			h, err := scoring.FoldFrontier(fo.baseline, fo.runs, fo.rules.Frontier)
			if err != nil {
				return usagef("%v", err)
			}
			return a.render(out, frontierResult{h, fo.round}, func(w *tabw) { renderFrontier(w, h) })
		},
	}
}

// fromVerdicts reads the runs of --round from the signed verdicts in the local
// store, after gathering them from --from when given.
func (o *frontierOptions) fromVerdicts(c *cli.Context) error {
	l, err := o.st.Open()
	if err != nil {
		return err
	}
	defer l.Close()
	var src cas.Store = l
	if from := c.String("from"); from != "" {
		if src, _, err = o.rem.Open(from); err != nil {
			return err
		}
	}
	round, err := resolveIn(c.Context, l, src, c.String("round"))
	if err != nil {
		return err
	}
	if src != cas.Store(l) {
		if err := consensus.Gather(c.Context, src, l, round); err != nil {
			return err
		}
	}
	trusted, err := o.tr.LoadForAggregate()
	if err != nil {
		return err
	}
	launch, err := o.launch(c, l, round)
	if err != nil {
		return err
	}
	res, err := consensus.RunsFromVerdicts(c.Context, l, consensus.RunsRequest{Round: round.Digest, Launch: launch, Trusted: trusted})
	if err != nil {
		return err
	}
	o.runs, o.baseline = res.Runs, res.BaselineMicroNats
	o.round = RoundRuns{Round: round.Digest, LeftOut: res.LeftOut, Reconciled: res.Reconciled}
	if n := leftOutTotal(res.LeftOut); n > 0 {
		fmt.Fprintf(o.stderr, "feval: left out %d of the round's verdicts: %s\n", n, leftOutText(res.LeftOut))
	}
	for _, r := range res.Reconciled {
		var parts []string
		for _, rep := range r.Reports {
			parts = append(parts, fmt.Sprintf("%d steps (%s), loss %d in %s", rep.Steps, rep.Stop, rep.LossMicroNats, short(rep.Verdict.String())))
		}
		fmt.Fprintf(o.stderr, "feval: run %d of %s is reported differently: %s; the higher loss counts\n",
			r.RunIndex, short(r.Submission.String()), strings.Join(parts, ", "))
	}
	if c.IsSet("baseline") {
		o.baseline = c.Int64("baseline")
	}
	return nil
}

func (o *frontierOptions) launch(c *cli.Context, l *cas.Layout, round ociDesc) (time.Time, error) {
	if s := c.String("launch"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return t, usagef("--launch %q: want an RFC 3339 time such as 2026-12-01T00:00:00Z", s)
		}
		return t, nil
	}
	var r protocol.Round
	if _, err := protocol.LoadAs(c.Context, l, round, protocol.KindRound, &r); err != nil {
		return time.Time{}, err
	}
	if r.CommitUntil.Kind != "time" {
		return time.Time{}, usagef("the round's windows are block heights: give --launch TIME")
	}
	return time.Parse(time.RFC3339, r.CommitUntil.Time)
}

func renderFrontier(w *tabw, h scoring.FrontierHistory) {
	w.line("baseline\t%d micro-nats", h.BaselineMicroNats)
	w.line("bar\t%d micro-nats after %d events", h.BarMicroNats, len(h.Events))
	w.line("")
	w.row("HEIGHT", "SUBMISSION", "AUTHOR", "RUNS", "LOSSES", "PREVIOUS BAR", "BAR", "IMPROVEMENT", "AT")
	for _, e := range h.Events {
		w.row(fmt.Sprint(e.Height), short(e.Submission.String()), short(e.Author), fmt.Sprintf("%d+%d", e.FirstRun, e.ConfirmRun),
			fmt.Sprintf("%d, %d", e.FirstLossMicroNats, e.ConfirmLossMicroNats), fmt.Sprint(e.PreviousBarMicroNats),
			fmt.Sprint(e.BarMicroNats), fmt.Sprint(e.ImprovementMicroNats), secText(e.AtSec))
	}
	w.line("")
	w.row("RUN", "SUBMISSION", "INDEX", "LOSS", "AT", "BAR THEN", "OUTCOME")
	for i, d := range h.Decisions {
		w.row(fmt.Sprint(i), short(d.Submission.String()), fmt.Sprint(d.RunIndex), fmt.Sprint(d.LossMicroNats), secText(d.AtSec),
			fmt.Sprint(d.BarMicroNats), string(d.Outcome))
	}
}

func emissionCommand(a *appEnv) *cli.Command {
	fo, out := &frontierOptions{stderr: a.stderr}, &outputOptions{}
	return &cli.Command{
		Name:  "emission",
		Usage: "optimizer: split emission at a time among frontier contributors: credits, weights, burn, u16 vector",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "at", Usage: "the time since launch: seconds, or a duration such as 14d or 36h; required"},
		}, fo.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			at, err := parseSeconds(c.String("at"))
			if err != nil {
				return usagef("--at %q: %v", c.String("at"), err)
			}
			if err := fo.Parse(c); err != nil {
				return err
			}
			h, err := scoring.FoldFrontier(fo.baseline, fo.runs, fo.rules.Frontier)
			if err != nil {
				return usagef("%v", err)
			}
			e, err := scoring.SplitEmission(h.Events, at, fo.rules.Emission)
			if err != nil {
				return usagef("%v", err)
			}
			return a.render(out, emissionResult{e, fo.round}, func(w *tabw) { renderEmission(w, e) })
		},
	}
}

func renderEmission(w *tabw, e scoring.Emission) {
	w.line("at\t%s", secText(e.AtSec))
	w.line("reference R(t)\t%s micro-nats", ratioText(e.ReferenceMicroNats))
	w.line("total credit\t%d pico-nats", e.CreditPicoNats)
	w.line("payable\t%s", ratioText(e.Payable))
	w.line("burn\t%s, %d units", ratioText(e.Burn), e.BurnUnits)
	w.line("")
	w.row("CONTRIBUTOR", "CREDIT (pico-nats)", "WEIGHT", "UNITS")
	for _, s := range e.Shares {
		w.row(short(s.Contributor), fmt.Sprint(s.CreditPicoNats), ratioText(s.Weight), fmt.Sprint(s.Units))
	}
	w.row("burn", "-", ratioText(e.Burn), fmt.Sprint(e.BurnUnits))
	w.line("")
	w.row("HEIGHT", "AUTHOR", "IMPROVEMENT (micro-nats)", "AGE", "HALVINGS", "CREDIT (pico-nats)")
	for _, c := range e.Credits {
		w.row(fmt.Sprint(c.Height), short(c.Author), fmt.Sprint(c.ImprovementMicroNats), secText(c.AgeSec), fmt.Sprint(c.Halvings), fmt.Sprint(c.CreditPicoNats))
	}
}

// parseSeconds reads a non-negative time in whole seconds: "1209600", "14d" or a
// Go duration such as "36h".
func parseSeconds(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("negative")
		}
		return n, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 || n > (1<<63-1)/86400 {
			return 0, fmt.Errorf("want a whole number of days")
		}
		return n * 86400, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d%time.Second != 0 {
		return 0, fmt.Errorf("want seconds, days (14d) or a whole-second duration (36h)")
	}
	return int64(d / time.Second), nil
}

// secText renders seconds since launch with days when whole.
func secText(s int64) string {
	if s != 0 && s%86400 == 0 {
		return fmt.Sprintf("%d s (%d d)", s, s/86400)
	}
	return fmt.Sprintf("%d s", s)
}

// leftOutTotal is the number of verdicts an aggregate left out.
func leftOutTotal(left map[string]int) int {
	n := 0
	for _, c := range left {
		n += c
	}
	return n
}

// leftOutText renders the counts of left-out verdicts by reason, in a fixed
// order: "2 signed by keys you do not trust, 1 not passed".
func leftOutText(left map[string]int) string {
	var parts []string
	for _, r := range []struct{ key, text string }{
		{consensus.LeftUntrusted, "signed by keys you do not trust (name them with --pub)"},
		{consensus.LeftUnsigned, "without a valid signature"},
		{consensus.LeftMalformed, "malformed"},
		{consensus.LeftOtherEntry, "about another round, reveal or miner"},
		{consensus.LeftNotPassed, "not passed"},
		{consensus.LeftNoTime, "without the reveal's first-seen time"},
		{consensus.LeftNotStaked, "by trusted keys the consensus record's stake table does not name"},
		{consensus.LeftSuperseded, "superseded by the same validator's later verdict"},
	} {
		if n := left[r.key]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, r.text))
		}
	}
	return strings.Join(parts, ", ")
}
