package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/model"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/urfave/cli/v2"
)

func rolloutsCommand(a *appEnv) *cli.Command {
	return &cli.Command{
		Name:        "rollouts",
		Usage:       "miner: work with rollouts tasks that bind rows to a model",
		Subcommands: []*cli.Command{rolloutsGenerateCommand(a), rolloutsCheckRuntimeCommand(a)},
	}
}

// generateResult is what rollouts generate prints.
type generateResult struct {
	Counts rollouts.Generated `json:"counts"`
	// Out is the directory written: a submission feval commit takes.
	Out string `json:"out"`
	// ModelRevision is the model the rows were generated with, as
	// submission.json names it.
	ModelRevision string `json:"model_revision"`
}

func rolloutsGenerateCommand(a *appEnv) *cli.Command {
	st, k, out := &storeOptions{}, &keyOptions{}, &outputOptions{}
	return &cli.Command{
		Name:      "generate",
		Usage:     "generate every row of a round's model-bound task with the seeded sampler and the reference runtime",
		ArgsUsage: "DIR",
		Description: `Writes DIR/rows.jsonl, one token row per task item in task order, each the
seeded completion of the item's prompt_tokens by the model (docs/PROTOCOL.md,
"Seeded sampling") with the reward its response earns as its claim, then
DIR/submission.json naming the model: a directory 'feval commit' takes. The
sampling randomness derives from the round, the task id and your key, so the
rows are yours alone. An interrupted run resumes: run the same command again.
With --runtime, an external runtime (torch on a GPU, for a large model)
generates instead of the reference runtime, through the process protocol of
docs/PROTOCOL.md "External runtimes"; {model} in its command line is
replaced by a directory holding the committed model's files. Validators
check its rows as any; 'feval rollouts check-runtime' checks a runtime first.`,
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "round", Usage: "round digest, prefix or tag; required"},
			&cli.StringFlag{Name: "model", Usage: "model artifact (feval pack --model) digest, prefix or tag; required"},
			&cli.IntFlag{Name: "workers", Usage: "rows generated at once", Value: runtime.GOMAXPROCS(0)},
			&cli.StringFlag{Name: "runtime", Usage: "an external runtime's command line (words split at spaces) speaking the process protocol of docs/PROTOCOL.md 'External runtimes', {model} replaced by a directory holding the committed model's files; default: the reference runtime in feval"},
		}, st.Flags(), k.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			k.Parse(c)
			out.Parse(c)
			if err := args(c, 1, "one DIR"); err != nil {
				return err
			}
			if c.String("round") == "" || c.String("model") == "" {
				return usagef("--round and --model are required")
			}
			if c.Int("workers") < 1 {
				return usagef("--workers %d: want at least 1", c.Int("workers"))
			}
			l, err := st.Open()
			if err != nil {
				return err
			}
			round, err := cas.ResolveRef(c.Context, l, c.String("round"))
			if err != nil {
				return err
			}
			md, err := cas.ResolveRef(c.Context, l, c.String("model"))
			if err != nil {
				return err
			}
			s, err := k.Signer(a)
			if err != nil {
				return err
			}
			argv := strings.Fields(c.String("runtime"))
			g, err := rollouts.NewGenerator(c.Context, l, round, md, s.Public().Fingerprint, len(argv) > 0)
			if err != nil {
				return err
			}
			g.Workers = c.Int("workers")
			if len(argv) > 0 {
				// The runtime runs the committed model's very files.
				p, stop, err := startRuntime(argv, a.stderr, func(dir string) error {
					_, err := bundle.ExtractModel(c.Context, l, md, dir)
					return err
				})
				if err != nil {
					return err
				}
				defer stop()
				g.Model, g.Workers = p, 1 // it answers one request at a time
			}
			if !out.JSON && !out.Quiet {
				g.Progress = rowProgress(a.stderr, "generated", len(g.Task.Items), time.Now)
			}
			dir := c.Args().First()
			res, err := g.Run(c.Context, dir)
			if err != nil {
				return err
			}
			r := generateResult{Counts: res, Out: dir, ModelRevision: md.Digest.String()}
			return a.render(out, r, func(w *tabw) {
				w.line("rows\t%d (%d generated, %d resumed), %d completion tokens generated", res.Rows, res.Generated, res.Resumed, res.Tokens)
				w.line("submission\t%s (model %s): commit it with 'feval commit --round ROUND %s'", dir, r.ModelRevision, dir)
			})
		},
	}
}

// checkRuntimeResult is what rollouts check-runtime prints.
type checkRuntimeResult struct {
	rollouts.RuntimeCheck
	// Runtime is the command line run, {model} replaced.
	Runtime string `json:"runtime"`
}

func rolloutsCheckRuntimeCommand(a *appEnv) *cli.Command {
	out := &outputOptions{}
	return &cli.Command{
		Name:  "check-runtime",
		Usage: "hold an external runtime to the seeded-sampling check before generating with it",
		Description: `Writes the reference tiny Qwen3 model into a temporary directory, starts the
runtime (--runtime, words split at spaces, {model} replaced by that
directory), asks it for the completions of the conformance prompts (the
reference task's, with fixed seed inputs) through the process protocol of
docs/PROTOCOL.md "External runtimes", and checks each as a validator checks
an audited row. Exits 0 when every completion passes, 6 when one does not
(each failure named with its position, tokens and margin), 7 when the
runtime fails to answer.`,
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "runtime", Usage: "the runtime's command line (words split at spaces); {model} is replaced by the test model's directory; required"},
			&cli.IntFlag{Name: "rows", Usage: "conformance prompts to run", Value: 16},
		}, out.Flags()),
		Action: func(c *cli.Context) error {
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			argv := strings.Fields(c.String("runtime"))
			if !namesModelDir(argv) {
				return usagef("--runtime must name the test model's directory as {model}, e.g. --runtime 'python3 serve.py {model}'")
			}
			if n := c.Int("rows"); n < 1 || n > 1000 {
				return usagef("--rows %d: want 1 to 1000", n)
			}
			files, ref, items, err := fx.RuntimeConformance(c.Int("rows"))
			if err != nil {
				return err
			}
			p, stop, err := startRuntime(argv, a.stderr, files.Write)
			if err != nil {
				return err
			}
			defer stop()
			var progress func(int)
			if !out.JSON && !out.Quiet {
				progress = rowProgress(a.stderr, "checked", len(items), time.Now)
			}
			rc, err := rollouts.CheckRuntime(p, ref, items, fx.ReferenceSampling, fx.ConformanceRound, fx.ConformanceMiner, progress)
			if err != nil {
				return err
			}
			r := checkRuntimeResult{RuntimeCheck: rc, Runtime: strings.Join(p.Args(), " ")}
			if err := a.render(out, r, func(w *tabw) {
				w.line("runtime\t%s", r.Runtime)
				w.line("rows\t%d: %d pass the check, %d identical to the reference runtime", rc.Rows, rc.Passed, rc.Identical)
				for _, f := range rc.Failures {
					w.line("failed\t%s: %s", f.TaskID, f.Provenance.Text())
				}
			}); err != nil {
				return err
			}
			if len(rc.Failures) > 0 {
				msg := fmt.Sprintf("%d of %d completions fail the check: the runtime does not sample as docs/PROTOCOL.md \"Seeded sampling\" says", len(rc.Failures), rc.Rows)
				return &renderedError{code: exitRejected, summary: msg, err: errors.New(msg)}
			}
			return nil
		},
	}
}

// modelDirWord is the word of a runtime's command line that feval replaces
// by the directory of the model the runtime is to run.
const modelDirWord = "{model}"

// namesModelDir reports whether a runtime's command line holds modelDirWord.
func namesModelDir(argv []string) bool {
	return slices.ContainsFunc(argv, func(w string) bool { return strings.Contains(w, modelDirWord) })
}

// startRuntime starts an external runtime. When its command line names
// modelDirWord, writeModel first fills a new temporary directory with the
// model the runtime is to run, and the word is replaced by that directory.
// stop ends the runtime, then removes the directory.
func startRuntime(argv []string, stderr io.Writer, writeModel func(dir string) error) (p *model.ProcessGenerator, stop func(), err error) {
	dir := ""
	if namesModelDir(argv) {
		if dir, err = os.MkdirTemp("", "feval-model-"); err != nil {
			return nil, nil, err
		}
		if err := writeModel(dir); err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
		words := make([]string, len(argv))
		for i, w := range argv {
			words[i] = strings.ReplaceAll(w, modelDirWord, dir)
		}
		argv = words
	}
	if p, err = model.StartProcess(argv, stderr); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return p, func() { p.Close(); os.RemoveAll(dir) }, nil
}

// rowProgress reports rows done (verb: "generated", "checked") on w: a line
// at most every two seconds and at the last row, with the rate and the time
// left.
func rowProgress(w io.Writer, verb string, total int, now func() time.Time) func(done int) {
	var mu sync.Mutex
	start, first := now(), -1
	last := start
	return func(done int) {
		mu.Lock()
		defer mu.Unlock()
		t := now()
		if first < 0 {
			first = done - 1 // rows resumed before this run
		}
		if done < total && t.Sub(last) < 2*time.Second {
			return
		}
		last = t
		rate := float64(done-first) / max(t.Sub(start).Seconds(), 1e-3)
		left := time.Duration(float64(total-done) / max(rate, 1e-9) * float64(time.Second))
		fmt.Fprintf(w, "%s %d/%d rows (%.0f rows/s, %s left)\n", verb, done, total, rate, left.Round(time.Second))
	}
}
