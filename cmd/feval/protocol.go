package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/urfave/cli/v2"
)

// clockOptions: the validator's clock reading and optional chain anchor.
type clockOptions struct {
	obs protocol.Observation
}

func (o *clockOptions) Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "now", Usage: "the clock reading to record as first-seen time (RFC 3339; default: the system clock)"},
		&cli.Int64Flag{Name: "height", Usage: "an external anchor (block height) to record with first-seen times", Value: -1, DefaultText: "none"},
	}
}

func (o *clockOptions) Parse(c *cli.Context) error {
	o.obs.Now = time.Now().UTC().Truncate(time.Second)
	if s := c.String("now"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return usagef("--now %q: want an RFC 3339 time such as 2026-12-01T00:00:00Z", s)
		}
		o.obs.Now = t.UTC()
	}
	if h := c.Int64("height"); h >= 0 {
		o.obs.Height = &h
	}
	return nil
}

// windowOptions: the clock the miner's commands and 'round open' check a
// round's windows against, and the override for the rare case.
type windowOptions struct {
	now    time.Time
	ignore bool
}

func (o *windowOptions) Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "now", EnvVars: []string{envNow}, Usage: "the clock reading the round's windows are checked against (RFC 3339; default: the system clock)"},
		&cli.BoolFlag{Name: "ignore-window", Usage: "act even though the round's windows make it pointless or harmful"},
	}
}

func (o *windowOptions) Parse(c *cli.Context) error {
	o.ignore = c.Bool("ignore-window")
	o.now = time.Now().UTC().Truncate(time.Second)
	if s := c.String("now"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return usagef("--now %q: want an RFC 3339 time such as 2026-12-01T00:00:00Z", s)
		}
		o.now = t.UTC()
	}
	return nil
}

// windowTime is a window's time; ok is false for a height window, which
// only the chain can judge.
func windowTime(w protocol.Window) (time.Time, bool) {
	if w.Kind != "time" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, w.Time)
	return t, err == nil
}

// refuse is the error of an action a round's window makes pointless or
// harmful, unless --ignore-window overrides it.
func (o *windowOptions) refuse(format string, a ...any) error {
	if o.ignore {
		return nil
	}
	return usagef(format+"; give --ignore-window to do it anyway", a...)
}

// checkCommit refuses a commitment after the round's commit window closed.
func (o *windowOptions) checkCommit(r protocol.Round) error {
	if cu, ok := windowTime(r.CommitUntil); ok && o.now.After(cu) {
		return o.refuse("the round's commit window closed at %s (now %s): validators reject a later commitment",
			r.CommitUntil, o.now.Format(time.RFC3339))
	}
	return nil
}

// checkReveal refuses a reveal while commits are open (it would publish the
// submission and its salt to miners who can still commit) and after the
// reveal window closed.
func (o *windowOptions) checkReveal(r protocol.Round) error {
	if cu, ok := windowTime(r.CommitUntil); ok && !o.now.After(cu) {
		return o.refuse("commits are open until %s (now %s): revealing now shows your submission to miners who can still commit; reveal after that",
			r.CommitUntil, o.now.Format(time.RFC3339))
	}
	if ru, ok := windowTime(r.RevealUntil); ok && o.now.After(ru) {
		return o.refuse("the round's reveal window closed at %s (now %s): validators reject a later reveal",
			r.RevealUntil, o.now.Format(time.RFC3339))
	}
	return nil
}

// checkOpen refuses a round whose commit window is already over: no miner
// could commit to it.
func (o *windowOptions) checkOpen(cu protocol.Window) error {
	if t, ok := windowTime(cu); ok && !t.After(o.now) {
		return o.refuse("--commit-until %s is not in the future (now %s): no miner could commit to the round",
			cu, o.now.Format(time.RFC3339))
	}
	return nil
}

func taskCommand(a *appEnv) *cli.Command {
	st, k, out := &storeOptions{}, &keyOptions{}, &outputOptions{}
	return &cli.Command{
		Name:  "task",
		Usage: "manage tasks",
		Subcommands: []*cli.Command{{
			Name:      "create",
			Usage:     "pack a task directory into a signed task artifact and print its digest",
			ArgsUsage: "DIR",
			Flags: flagSet([]cli.Flag{
				&cli.StringFlag{Name: "protocol", Usage: "rollouts, scenarios or optimizer; required"},
				&cli.StringFlag{Name: "tag", Usage: "also name the task with this tag"},
			}, st.Flags(), k.Flags(), out.Flags()),
			Action: func(c *cli.Context) error {
				st.Parse(c)
				k.Parse(c)
				out.Parse(c)
				if err := args(c, 1, "one DIR"); err != nil {
					return err
				}
				p := c.String("protocol")
				if !protocol.ValidProtocol(p) {
					return usagef("--protocol %q: want one of %s", p, strings.Join(protocol.Protocols, ", "))
				}
				dir := c.Args().First()
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					return usagef("%s is not a directory: a task is a directory", dir)
				}
				if err := evaluate.ValidateTask(p, os.DirFS(dir)); err != nil {
					return usagef("%s is not a valid %s task: %v", dir, p, err)
				}
				l, s, ts, err := openForWrite(a, st, k)
				if err != nil {
					return err
				}
				desc, err := protocol.CreateTask(c.Context, l, s, p, c.Args().First(), ts)
				if err != nil {
					return err
				}
				if err := tagAndClose(c.Context, l, desc, c.String("tag")); err != nil {
					return err
				}
				return a.render(out, cas.Descriptor(desc), func(w *tabw) { w.line("%s", desc.Digest) })
			},
		}},
	}
}

func roundCommand(a *appEnv) *cli.Command {
	st, k, out, win := &storeOptions{}, &keyOptions{}, &outputOptions{}, &windowOptions{}
	return &cli.Command{
		Name:  "round",
		Usage: "manage rounds",
		Subcommands: []*cli.Command{{
			Name:  "open",
			Usage: "write a signed round for a task: when commits and reveals close",
			Flags: flagSet([]cli.Flag{
				&cli.StringFlag{Name: "task", Usage: "task digest, prefix or tag; required"},
				&cli.StringFlag{Name: "commit-until", Usage: "end of the commit window: RFC 3339 UTC time or height:N; required"},
				&cli.StringFlag{Name: "reveal-until", Usage: "end of the reveal window: RFC 3339 UTC time or height:N; required"},
				&cli.StringFlag{Name: "tag", Usage: "also name the round with this tag"},
			}, st.Flags(), k.Flags(), win.Flags(), out.Flags()),
			Action: func(c *cli.Context) error {
				st.Parse(c)
				k.Parse(c)
				out.Parse(c)
				if err := win.Parse(c); err != nil {
					return err
				}
				if err := args(c, 0, "no arguments"); err != nil {
					return err
				}
				for _, f := range []string{"task", "commit-until", "reveal-until"} {
					if c.String(f) == "" {
						return usagef("--%s is required", f)
					}
				}
				cu, err := protocol.ParseWindow(c.String("commit-until"))
				if err != nil {
					return usagef("--commit-until %v", err)
				}
				ru, err := protocol.ParseWindow(c.String("reveal-until"))
				if err != nil {
					return usagef("--reveal-until %v", err)
				}
				if err := win.checkOpen(cu); err != nil {
					return err
				}
				l, s, ts, err := openForWrite(a, st, k)
				if err != nil {
					return err
				}
				task, err := cas.ResolveRef(c.Context, l, c.String("task"))
				if err != nil {
					return err
				}
				desc, err := protocol.OpenRound(c.Context, l, s, task, cu, ru, ts)
				if err != nil {
					return usagef("%v", err)
				}
				if err := tagAndClose(c.Context, l, desc, c.String("tag")); err != nil {
					return err
				}
				return a.render(out, cas.Descriptor(desc), func(w *tabw) { w.line("%s", desc.Digest) })
			},
		}},
	}
}

func commitCommand(a *appEnv) *cli.Command {
	st, k, rem, out, win := &storeOptions{}, &keyOptions{}, &remoteOptions{}, &outputOptions{}, &windowOptions{}
	return &cli.Command{
		Name:      "commit",
		Usage:     "miner: pack a submission privately and print the commitment to publish",
		ArgsUsage: "PATH",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "round", Usage: "round digest, prefix or tag; required"},
			&cli.StringFlag{Name: "to", Usage: "also push the commitment (never the submission) to this registry repository"},
			&cli.BoolFlag{Name: "skip-gate-check", Usage: "commit even if the submission fails the task's static gate or model check (validators will reject it)"},
		}, st.Flags(), k.Flags(), rem.Flags(), win.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			k.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			if err := win.Parse(c); err != nil {
				return err
			}
			if err := args(c, 1, "one PATH"); err != nil {
				return err
			}
			if c.String("round") == "" {
				return usagef("--round is required (pull the round first with 'feval pull')")
			}
			dst, err := rem.OpenOptional(c.String("to"))
			if err != nil {
				return err
			}
			l, s, ts, err := openForWrite(a, st, k)
			if err != nil {
				return err
			}
			round, err := cas.ResolveRef(c.Context, l, c.String("round"))
			if err != nil {
				return err
			}
			var r protocol.Round
			if _, err := protocol.LoadAs(c.Context, l, round, protocol.KindRound, &r); err != nil {
				return err
			}
			if err := win.checkCommit(r); err != nil {
				return err
			}
			if !c.Bool("skip-gate-check") {
				vs, err := protocol.PreCheck(c.Context, l, round, c.Args().First(), evaluate.Gate)
				if err != nil {
					return err
				}
				if len(vs) > 0 {
					lines := make([]string, len(vs))
					for i, v := range vs {
						lines[i] = v.String()
					}
					return fmt.Errorf("%w (%d violations); nothing was committed; validators would reject it at reveal:\n%s",
						protocol.ErrGate, len(vs), strings.Join(lines, "\n"))
				}
				if err := rollouts.PreCheckModel(c.Context, l, round, c.Args().First()); err != nil {
					return err
				}
			}
			res, err := protocol.Commit(c.Context, l, s, round, c.Args().First(), ts, rand.Reader)
			if err != nil {
				return err
			}
			if err := l.Close(); err != nil {
				return err
			}
			if dst != nil {
				if err := publish(c.Context, l, dst, res.Artifact.OCI(), "commitment"); err != nil {
					return err
				}
			}
			return a.render(out, res, func(w *tabw) { w.line("%s", res.Commitment) })
		},
	}
}

func revealCommand(a *appEnv) *cli.Command {
	st, k, rem, out, win := &storeOptions{}, &keyOptions{}, &remoteOptions{}, &outputOptions{}, &windowOptions{}
	return &cli.Command{
		Name:      "reveal",
		Usage:     "miner: open a commitment: push the submission and a signed reveal (salt included)",
		ArgsUsage: "COMMITMENT",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "to", Usage: "registry repository to push the reveal and submission to"},
		}, st.Flags(), k.Flags(), rem.Flags(), win.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			k.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			if err := win.Parse(c); err != nil {
				return err
			}
			if err := args(c, 1, "one COMMITMENT"); err != nil {
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
			sec, err := protocol.LoadSecret(l, c.Args().First())
			if err != nil {
				return err
			}
			rd, err := l.Resolve(c.Context, sec.Round.String())
			if err != nil {
				return fmt.Errorf("the commitment's round %s: %w", sec.Round, err)
			}
			var r protocol.Round
			if _, err := protocol.LoadAs(c.Context, l, rd, protocol.KindRound, &r); err != nil {
				return err
			}
			if err := win.checkReveal(r); err != nil {
				return err
			}
			res, err := protocol.RevealCommitment(c.Context, l, s, sec, ts)
			if err != nil {
				return err
			}
			if err := l.Close(); err != nil {
				return err
			}
			if dst != nil {
				sub, err := l.Resolve(c.Context, res.Submission.String())
				if err != nil {
					return err
				}
				if err := protocol.CopySubmission(c.Context, l, dst, sub); err != nil {
					return fmt.Errorf("pushing submission: %w", err)
				}
				if err := publish(c.Context, l, dst, res.Artifact.OCI(), "reveal"); err != nil {
					return err
				}
			}
			return a.render(out, res, func(w *tabw) { w.line("%s", res.Artifact.Digest) })
		},
	}
}

func revealsCommand(a *appEnv) *cli.Command {
	st, rem, out, clk := &storeOptions{}, &remoteOptions{}, &outputOptions{}, &clockOptions{}
	return &cli.Command{
		Name:  "reveals",
		Usage: "validator: collect a round's commitments and reveals, record when each was first seen, and list every reveal with its status",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "round", Usage: "round digest, prefix or tag; required"},
			&cli.StringFlag{Name: "from", Usage: "registry repository to collect from (default: the local store only)"},
		}, st.Flags(), rem.Flags(), clk.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			if err := clk.Parse(c); err != nil {
				return err
			}
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			if c.String("round") == "" {
				return usagef("--round is required")
			}
			l, err := st.Open()
			if err != nil {
				return err
			}
			var src cas.Store = l
			if from := c.String("from"); from != "" {
				if src, _, err = rem.Open(from); err != nil {
					return err
				}
			}
			round, err := resolveIn(c.Context, l, src, c.String("round"))
			if err != nil {
				return err
			}
			seen, err := protocol.Collect(c.Context, src, l, round, clk.obs)
			if err != nil {
				return err
			}
			rep, err := protocol.CheckRound(c.Context, l, round, seen, clk.obs, evaluate.Gate)
			if err != nil {
				return err
			}
			if err := a.render(out, rep, func(w *tabw) {
				w.row("COMMITMENT", "MINER", "REVEAL", "STATUS", "REASON", "DETAIL")
				for _, e := range append(rep.Entries, rep.Extra...) {
					w.row(short(e.Commitment), short(e.Miner), short(e.Reveal.String()), e.Status, e.Reason, e.Detail)
				}
			}); err != nil {
				return err
			}
			return rejectedReveals(rep)
		},
	}
}

// rejectedReveals is the exit status of a listing already rendered: exit 6
// when any commitment or reveal of it is rejected, whatever the protocol.
func rejectedReveals(rep protocol.RoundReport) error {
	n, total := 0, 0
	for _, e := range append(append([]protocol.Entry{}, rep.Entries...), rep.Extra...) {
		total++
		if e.Status == protocol.StatusRejected {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return &renderedError{code: exitRejected, err: fmt.Errorf("%d rejected", n),
		summary: fmt.Sprintf("%d of %d commitments and reveals rejected (listed on stdout)", n, total)}
}

func short(s string) string {
	s = strings.TrimPrefix(s, "sha256:")
	if len(s) > 12 {
		return s[:12]
	}
	if s == "" {
		return "-"
	}
	return s
}

// resolveIn resolves ref in the local store, else in src.
func resolveIn(ctx context.Context, l *cas.Layout, src cas.Store, ref string) (ociDesc, error) {
	d, err := cas.ResolveRef(ctx, l, ref)
	if err == nil || src == cas.Store(l) {
		return d, err
	}
	return cas.ResolveRef(ctx, src, ref)
}

// openForWrite opens the local store and the signing key, and reads the fixed
// creation time, before anything is written.
func openForWrite(a *appEnv, st *storeOptions, k *keyOptions) (*cas.Layout, *signerT, string, error) {
	ts, err := created()
	if err != nil {
		return nil, nil, "", err
	}
	l, err := st.Open()
	if err != nil {
		return nil, nil, "", err
	}
	s, err := k.Signer(a)
	if err != nil {
		return nil, nil, "", err
	}
	return l, s, ts, nil
}

func tagAndClose(ctx context.Context, l *cas.Layout, desc ociDesc, tag string) error {
	if tag != "" {
		if err := l.Tag(ctx, desc, tag); err != nil {
			return err
		}
	}
	return l.Close()
}
