package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/consensus"
	"github.com/feval/feval/replay"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	"github.com/urfave/cli/v2"
)

func consensusCommand(a *appEnv) *cli.Command {
	st, k, rem, out, tr := &storeOptions{}, &keyOptions{}, &remoteOptions{}, &outputOptions{}, &trustOptions{}
	return &cli.Command{
		Name:  "consensus",
		Usage: "aggregate a round's signed verdicts into a signed consensus record: scores, seat, weights, exclusions",
		Description: "The stake table is a JSON file {\"stakes\": {\"FINGERPRINT\": STAKE, ...}} or a signed 'stakes'\n" +
			"artifact; the rules a JSON file (omitted members keep their defaults, see docs/CONSENSUS.md) or a\n" +
			"signed 'rules' artifact. Files are recorded as signed artifacts so that 'feval replay' can\n" +
			"re-derive the record from its inputs. A stakes or rules artifact must be signed by your key or\n" +
			"by a key given with --pub (the round owner's, for one); other signers are not trusted.",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "round", Usage: "round digest, prefix or tag; required"},
			&cli.StringFlag{Name: "stakes", Usage: "stake table: a JSON file, or a stakes artifact's digest, prefix or tag; required"},
			&cli.StringFlag{Name: "rules", Usage: "rules: a JSON file, or a rules artifact's digest, prefix or tag (default: the documented defaults)"},
			&cli.StringFlag{Name: "from", Usage: "registry repository to gather the round, its submissions and verdicts from"},
			&cli.StringFlag{Name: "to", Usage: "registry repository to push the record (and any input it lacks) to"},
			&cli.StringFlag{Name: "incumbent", Usage: "submission digest of the seat holder before the round (default: the seat is vacant)"},
			&cli.StringFlag{Name: "incumbent-score", Usage: "the incumbent's recorded seat score, an exact rational such as 7/10; required with --incumbent"},
		}, st.Flags(), k.Flags(), inputTrustFlags(), rem.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			k.Parse(c)
			tr.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			opts, err := consensusOptions(c)
			if err != nil {
				return err
			}
			if len(tr.Keys) > 0 {
				if opts.Trusted, err = tr.Load(); err != nil {
					return err
				}
			}
			src, err := rem.OpenOptional(c.String("from"))
			if err != nil {
				return err
			}
			if src != nil {
				opts.Source = src
			}
			dst, err := rem.OpenOptional(c.String("to"))
			if err != nil {
				return err
			}
			l, s, ts, err := openForWrite(a, st, k)
			if err != nil {
				return err
			}
			opts.Created = ts
			res, err := consensus.Run(c.Context, l, s, opts)
			if errors.Is(err, consensus.ErrInput) {
				return usagef("%v", err)
			}
			if err != nil {
				return err
			}
			if dst != nil {
				if err := consensus.Publish(c.Context, l, dst, res); err != nil {
					return fmt.Errorf("pushing consensus: %w", err)
				}
			}
			if x := res.Record.Excluded; len(x) > 0 {
				fmt.Fprintf(a.stderr, "feval: left out %d of the round's votes: %s (listed under EXCLUDED)\n", len(x), exclusionText(x))
			}
			return a.render(out, res, func(w *tabw) { renderConsensus(w, res) })
		},
	}
}

// consensusOptions reads the flags that name the inputs.
func consensusOptions(c *cli.Context) (consensus.Options, error) {
	var opts consensus.Options
	opts.Round = c.String("round")
	if opts.Round == "" {
		return opts, usagef("--round is required")
	}
	if c.String("stakes") == "" {
		return opts, usagef("--stakes is required: a JSON file {\"stakes\": {\"FINGERPRINT\": STAKE}} or a stakes artifact")
	}
	var err error
	if opts.Stakes, err = fileOrRef(c.String("stakes")); err != nil {
		return opts, err
	}
	if r := c.String("rules"); r != "" {
		if opts.Rules, err = fileOrRef(r); err != nil {
			return opts, err
		}
	}
	inc, score := c.String("incumbent"), c.String("incumbent-score")
	switch {
	case inc == "" && score == "":
	case inc == "" || score == "":
		return opts, usagef("--incumbent and --incumbent-score go together")
	default:
		d, err := digest.Parse(inc)
		if err != nil {
			return opts, usagef("--incumbent %q: want a full submission digest (sha256:...)", inc)
		}
		r, err := scoring.ParseRatio(score)
		if err != nil {
			return opts, usagef("--incumbent-score %q: want an exact rational such as 7/10 or 1", score)
		}
		opts.Incumbent = &consensus.Incumbent{Submission: d, Score: r}
	}
	return opts, nil
}

// fileOrRef reads a JSON input file if s names one, else treats s as an
// artifact reference.
func fileOrRef(s string) (consensus.Input, error) {
	fi, err := os.Stat(s)
	if err != nil || fi.IsDir() {
		return consensus.Input{Ref: s}, nil
	}
	b, err := readInputFile(s)
	return consensus.Input{JSON: b}, err
}

// readInputFile reads a JSON input of at most bundle.MaxRecordSize bytes.
func readInputFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, cas.ErrNotFound)
	}
	if err != nil {
		return nil, usagef("%v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, bundle.MaxRecordSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > bundle.MaxRecordSize {
		return nil, usagef("%s: larger than %d bytes", path, bundle.MaxRecordSize)
	}
	return b, nil
}

func renderConsensus(w *tabw, res consensus.Outcome) {
	rec := res.Record
	w.line("consensus\t%s", res.Artifact.Digest)
	w.line("round\t%s", rec.Inputs.Round)
	w.line("stakes\t%s (active stake %d, quorum %s)", rec.Inputs.Stakes, rec.ActiveStake, ratioText(rec.QuorumStake))
	w.line("rules\t%s", rec.Inputs.Rules)
	w.line("verdicts\t%d considered: %d votes counted, %d excluded", len(rec.Inputs.Verdicts), len(rec.Counted), len(rec.Excluded))
	w.line("")
	w.row("REVEAL", "MINER", "SUBMISSION", "STATUS", "SCORE", "VOTES", "REPORTING STAKE")
	for _, r := range rec.Results {
		w.row(short(r.Reveal.String()), short(r.Miner), short(r.Submission.String()), string(r.Status), ratioText(r.Score),
			fmt.Sprint(r.Votes), fmt.Sprintf("%d/%d", r.ReportingStake, rec.ActiveStake))
	}
	w.line("")
	s := rec.Seat
	switch s.Outcome {
	case scoring.SeatVacant:
		w.line("seat\tvacant: no challenger passed")
	case scoring.SeatKept:
		w.line("seat\tkept by %s (recorded %s; a challenger needed more than %s, best %s)", short(s.Holder.String()),
			ratioText(s.HolderScore), ratioText(s.Threshold), ratioText(s.ChallengerScore))
	case scoring.SeatTaken:
		if s.Incumbent == "" {
			w.line("seat\ttaken by %s with %s (the seat was vacant)", short(s.Holder.String()), ratioText(s.HolderScore))
		} else {
			w.line("seat\ttaken by %s with %s (more than %s, from %s)", short(s.Holder.String()), ratioText(s.HolderScore),
				ratioText(s.Threshold), short(s.Incumbent.String()))
		}
	}
	w.line("")
	w.row("WEIGHT", "MINER", "SCORE", "UNITS")
	for _, m := range rec.Weights.Miners {
		w.row(ratioText(m.Weight), short(m.Miner), ratioText(m.Score), fmt.Sprint(m.Units))
	}
	w.row("burn", "-", "-", fmt.Sprint(rec.Weights.BurnUnits))
	if len(rec.Excluded) > 0 {
		w.line("")
		w.row("EXCLUDED", "VALIDATOR", "REVEAL", "SEQUENCE", "REASON")
		for _, x := range rec.Excluded {
			w.row(short(x.Verdict.String()), short(x.Validator), short(x.Reveal.String()), fmt.Sprint(x.Sequence), string(x.Reason))
		}
	}
}

// exclusionText counts excluded votes by reason, in reason order.
func exclusionText(x []consensus.Exclusion) string {
	n := map[string]int{}
	for _, e := range x {
		n[string(e.Reason)]++
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%d %s", n[r], r))
	}
	return strings.Join(parts, ", ")
}

// ratioText renders an exact rational, with a decimal reading (4 places,
// rounded down) when it is not an integer.
func ratioText(r scoring.Ratio) string {
	s := r.String()
	if !strings.Contains(s, "/") || r.Sign() < 0 {
		return s
	}
	return s + " (" + decimal(r.Rat(), 4) + ")"
}

// replayConsensus replays desc if it is a consensus record, first fetching it
// and its inputs from src when src is not nil. handled is false for any other
// artifact (and for content that is not an artifact), which the verdict replay
// then reports on.
func (a *appEnv) replayConsensus(ctx context.Context, out *outputOptions, l *cas.Layout, src cas.Store, desc ociDesc, trusted []*bundle.PublicKey) (handled bool, err error) {
	art, err := bundle.Load(ctx, l, desc)
	if err != nil && src != nil {
		art, err = bundle.Load(ctx, src, desc)
	}
	if err != nil || art.Kind != consensus.KindConsensus {
		return false, nil
	}
	if src != nil {
		if err := consensus.Fetch(ctx, src, l, desc); err != nil {
			return true, err
		}
	}
	res, err := consensus.Replay(ctx, l, desc.Digest, trusted)
	if err != nil {
		return true, err
	}
	if err := a.render(out, res, func(w *tabw) {
		w.line("%s %s (consensus of round %s, signed by %s)", res.Outcome, res.Consensus, res.Round, fingerprints(res.Signers))
		renderSkipped(w, res.Skipped)
		if res.Outcome == replay.Differs {
			w.line("recomputed %s", res.Recomputed)
			w.row("PATH", "RECORDED", "RECOMPUTED")
			for _, d := range res.Diffs {
				w.row(d.Path, d.Recorded, d.Recomputed)
			}
		}
	}); err != nil {
		return true, err
	}
	if res.Outcome == replay.Differs {
		return true, &renderedError{code: exitDiffers, err: errors.New("replay differs"),
			summary: fmt.Sprintf("replay of consensus %s differs in %d fields (listed on stdout)", res.Consensus, len(res.Diffs))}
	}
	return true, nil
}
