package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/feval/feval/consensus"
	"github.com/feval/feval/scoring"
	"github.com/urfave/cli/v2"
)

// frontierOptions: the runs file, the baseline and the rules of the frontier.
type frontierOptions struct {
	runs     []scoring.Run
	baseline int64
	rules    scoring.Rules
}

func (o *frontierOptions) Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "events", Usage: "JSON list of runs, in the order they became final: {submission, author, run_index, loss_micro_nats, at_sec}; required"},
		&cli.Int64Flag{Name: "baseline", Usage: "the bar at launch, in micro-nats of held-out loss; required"},
		&cli.StringFlag{Name: "rules", Usage: "rules JSON file (default: the documented defaults)"},
	}
}

func (o *frontierOptions) Parse(c *cli.Context) error {
	if c.String("events") == "" || !c.IsSet("baseline") {
		return usagef("--events FILE and --baseline MICRONATS are required")
	}
	b, err := readInputFile(c.String("events"))
	if err != nil {
		return err
	}
	if o.runs, err = consensus.ParseRuns(b); err != nil {
		return usagef("%s: %v", c.String("events"), err)
	}
	o.baseline = c.Int64("baseline")
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
	fo, out := &frontierOptions{}, &outputOptions{}
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
			return a.render(out, h, func(w *tabw) { renderFrontier(w, h) })
		},
	}
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
	fo, out := &frontierOptions{}, &outputOptions{}
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
			return a.render(out, e, func(w *tabw) { renderEmission(w, e) })
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
