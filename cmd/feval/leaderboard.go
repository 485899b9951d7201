package main

import (
	"fmt"
	"strings"

	"github.com/feval/feval/consensus"
	"github.com/feval/feval/scoring"
	"github.com/urfave/cli/v2"
)

func leaderboardCommand(a *appEnv) *cli.Command {
	st, rem, out := &storeOptions{}, &remoteOptions{}, &outputOptions{}
	return &cli.Command{
		Name:  "leaderboard",
		Usage: "show a round as a matrix: one row per miner, one column per validator, each cell a verdict's status and score",
		Description: "Cells: Passed or Rejected (the validator's latest verdict), In progress (an undetermined or\n" +
			"infra_error verdict: no final verdict yet), Carried (from --carry-from while the replacement is\n" +
			"evaluated), '-' (nothing). Reward status comes only from --consensus, apart from audit progress.",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "round", Usage: "round digest, prefix or tag; required"},
			&cli.StringFlag{Name: "from", Usage: "registry repository to gather the round, its submissions and verdicts from"},
			&cli.StringFlag{Name: "consensus", Usage: "a consensus record of the round (digest, prefix or tag) for scores and reward status"},
			&cli.StringFlag{Name: "carry-from", Usage: "an earlier round (digest, prefix or tag) whose results are carried into cells without a final verdict"},
		}, st.Flags(), rem.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			req := consensus.BoardRequest{Round: c.String("round"), Consensus: c.String("consensus"), CarryFrom: c.String("carry-from")}
			if req.Round == "" {
				return usagef("--round is required")
			}
			if from := c.String("from"); from != "" {
				src, _, err := rem.Open(from)
				if err != nil {
					return err
				}
				req.Source = src
			}
			l, err := st.Open()
			if err != nil {
				return err
			}
			b, err := consensus.Leaderboard(c.Context, l, req)
			if err != nil {
				return err
			}
			if err := l.Close(); err != nil {
				return err
			}
			return a.render(out, b, func(w *tabw) { renderBoard(w, b) })
		},
	}
}

func renderBoard(w *tabw, b consensus.Board) {
	w.line("round\t%s", b.Round)
	if b.Consensus != "" {
		w.line("consensus\t%s", b.Consensus)
	}
	if b.CarryFrom != "" {
		w.line("carried from\t%s", b.CarryFrom)
	}
	w.line("")
	head := []string{"MINER", "SCORE", "REWARD", "AUDIT"}
	for _, v := range b.Validators {
		head = append(head, short(v))
	}
	w.row(head...)
	for _, r := range b.Rows {
		score := "-"
		if r.Scored {
			score = ratioText(r.Score)
		}
		cols := []string{short(r.Miner), score, string(r.Reward), auditText(r.Audit)}
		for _, c := range r.Cells {
			cols = append(cols, cellText(c))
		}
		w.row(cols...)
	}
}

func cellText(c scoring.Cell) string {
	if c.UnverifiedBeacon {
		return cellStatusText(c) + " (unverified beacon)"
	}
	return cellStatusText(c)
}

func cellStatusText(c scoring.Cell) string {
	switch c.Status {
	case scoring.CellPassed:
		return "Passed " + c.Score.String()
	case scoring.CellRejected:
		return "Rejected " + c.Score.String()
	case scoring.CellInProgress:
		return "In progress"
	case scoring.CellCarried:
		return fmt.Sprintf("Carried %s (%s)", c.Score, short(c.CarriedFrom))
	}
	return "-"
}

func auditText(a scoring.Audit) string {
	var parts []string
	for _, p := range []struct {
		n    int
		name string
	}{{a.Passed, "passed"}, {a.InProgress, "in progress"}, {a.Carried, "carried"}, {a.Rejected, "rejected"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.name))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
