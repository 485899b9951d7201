package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/feval/feval/consensus"
	"github.com/feval/feval/scoring"
	"github.com/urfave/cli/v2"
)

func leaderboardCommand(a *appEnv) *cli.Command {
	st, rem, out, tr := &storeOptions{}, &remoteOptions{}, &outputOptions{}, &trustOptions{}
	return &cli.Command{
		Name:  "leaderboard",
		Usage: "show a round as a matrix: one row per miner, one column per validator, each cell a verdict's status and score",
		Description: "Only verdicts signed by a trusted key count (--pub or FEVAL_PUB, default: your own key's .pub):\n" +
			"one column per trusted validator; the others are counted as left out, on stderr and in --json.\n" +
			"Cells: Passed or Rejected (the validator's latest verdict, with its reason), In progress (an\n" +
			"undetermined or infra_error verdict: no final verdict yet), Carried (from --carry-from while the\n" +
			"replacement is evaluated), '-' (nothing). Scores, reward status and the seat come from the\n" +
			"round's latest consensus record a trusted key signed (or --consensus), apart from audit progress.",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "round", Usage: "round digest, prefix or tag; required"},
			&cli.StringFlag{Name: "from", Usage: "registry repository to gather the round, its submissions and verdicts from"},
			&cli.StringFlag{Name: "consensus", Usage: "a consensus record of the round (digest, prefix or tag; default: the latest a trusted key signed)"},
			&cli.StringFlag{Name: "carry-from", Usage: "an earlier round (digest, prefix or tag) whose results are carried into cells without a final verdict"},
		}, st.Flags(), tr.Flags(), rem.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			tr.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			req := consensus.BoardRequest{Round: c.String("round"), Consensus: c.String("consensus"), CarryFrom: c.String("carry-from")}
			if req.Round == "" {
				return usagef("--round is required")
			}
			var err error
			if req.Trusted, err = tr.LoadForAggregate(); err != nil {
				return err
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
			if errors.Is(err, consensus.ErrInput) {
				return usagef("%v", err)
			}
			if err != nil {
				return err
			}
			if err := l.Close(); err != nil {
				return err
			}
			if n := leftOutTotal(b.LeftOut); n > 0 {
				fmt.Fprintf(a.stderr, "feval: left out %d of the round's verdicts: %s\n", n, leftOutText(b.LeftOut))
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
	if s := b.Seat; s != nil {
		w.line("seat\t%s", seatText(*s))
	}
	w.line("")
	head := []string{"MINER", "SCORE", "REWARD", "AUDIT"}
	for _, v := range b.Validators {
		if s, ok := b.Stakes[v]; ok {
			head = append(head, fmt.Sprintf("%s (STAKE %d)", short(v), s))
		} else {
			head = append(head, short(v))
		}
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
		if c.Summary != "" {
			return "Passed " + c.Summary
		}
		if c.Unscored {
			return "Passed"
		}
		return "Passed " + c.Score.String()
	case scoring.CellRejected:
		return "Rejected" + reasonText(c.Reason)
	case scoring.CellInProgress:
		return "In progress" + reasonText(c.Reason)
	case scoring.CellCarried:
		return fmt.Sprintf("Carried %s (%s)", c.Score, short(c.CarriedFrom))
	}
	return "-"
}

// reasonText is a verdict's reason in parentheses, cut to 60 characters so
// that the matrix stays readable ("" without a reason).
func reasonText(r string) string {
	if r == "" {
		return ""
	}
	if rs := []rune(r); len(rs) > 60 {
		r = string(rs[:59]) + "…"
	}
	return " (" + r + ")"
}

// seatText is the seat line of a leaderboard.
func seatText(s consensus.Seat) string {
	holder := "miner " + short(s.HolderMiner)
	if s.HolderMiner == "" {
		holder = "entry " + short(s.Holder.String())
	}
	switch s.Outcome {
	case scoring.SeatVacant:
		return "vacant: no challenger passed"
	case scoring.SeatKept:
		return fmt.Sprintf("kept by %s with %s", holder, ratioText(s.HolderScore))
	}
	return fmt.Sprintf("taken by %s with %s", holder, ratioText(s.HolderScore))
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
