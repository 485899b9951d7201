package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
	"github.com/feval/feval/protocol"
	"github.com/urfave/cli/v2"
)

func policyCommand(a *appEnv) *cli.Command {
	return &cli.Command{
		Name:        "policy",
		Usage:       "fusion policies of scenario packs",
		Subcommands: []*cli.Command{policyTryCommand(a)},
	}
}

// policyTryOptions are the choices of 'feval policy try'.
type policyTryOptions struct {
	Pack             string
	Task, ConfigFile string
	Upstream         string
	Models           string
}

func policyTryCommand(a *appEnv) *cli.Command {
	st, out := &storeOptions{}, &outputOptions{}
	return &cli.Command{
		Name:      "try",
		Usage:     "run a pack's policy on sample requests and print each route, model call, tokens and cost",
		ArgsUsage: "PACK",
		Description: "Gates the pack, then runs its policy in the policy sidecar (policy.py and server packs in the\n" +
			"sandbox) on four sample requests of one session: a question, a task with tools, a tool result\n" +
			"and a streamed question. Model calls go through an in-process meter with the task's allowlist,\n" +
			"prices and cap (--task or --config; the reference configuration otherwise) to --upstream, or to\n" +
			"the fixture upstream started in process when none is given. Nothing is recorded.",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "task", Usage: "digest, prefix or tag of the task whose " + meter.TaskConfigFile + " configures the meter"},
			&cli.StringFlag{Name: "config", Usage: "a meter configuration file instead of a task (format " + meter.ConfigFormat + ")"},
			&cli.StringFlag{Name: "upstream", Usage: "base URL that replaces every model's upstream (default: the fixture upstream, in process)"},
			&cli.StringFlag{Name: "models", Usage: "an allowlist file (one model a line) for the reference configuration (default: the reference task's 8 models)"},
		}, st.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			out.Parse(c)
			if err := args(c, 1, "one argument, the pack directory"); err != nil {
				return err
			}
			o := policyTryOptions{Pack: c.Args().First(), Task: c.String("task"), ConfigFile: c.String("config"),
				Upstream: c.String("upstream"), Models: c.String("models")}
			if n := btoi(o.Task != "") + btoi(o.ConfigFile != "") + btoi(o.Models != ""); n > 1 {
				return usagef("give at most one of --task, --config and --models")
			}
			res, err := runPolicyTry(c.Context, st, o)
			if err != nil {
				return err
			}
			return a.render(out, res, func(w *tabw) {
				w.line("REQUEST\tTURN\tROUTE\tSTATUS\tMODEL\tOUTCOME\tTOKENS_IN\tTOKENS_OUT\tCOST_MICRO_USD")
				for _, r := range res.Requests {
					route := r.Route
					if route == "" {
						route = "-"
					}
					status := fmt.Sprint(r.HTTPStatus)
					if r.Failure != nil {
						status += " policy " + r.Failure.Kind
					}
					if len(r.Calls) == 0 {
						w.line("%s\t%d\t%s\t%s\t-\t-\t0\t0\t0", r.Name, r.Turn, route, status)
					}
					for _, call := range r.Calls {
						w.line("%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d", r.Name, r.Turn, route, status, call.Model, call.Outcome,
							call.InputTokens, call.OutputTokens, call.CostMicroUSD)
					}
					if r.Failure != nil {
						w.line("%s\t\tfailure\t%s", r.Name, strings.ReplaceAll(r.Failure.Message, "\t", " "))
					}
				}
				w.line("total\t\t\t\t\t\t\t\t%d (cap %d)", res.CostMicroUSD, res.CapMicroUSD)
			})
		},
	}
}

// runPolicyTry builds the meter configuration and runs the try session.
func runPolicyTry(ctx context.Context, st *storeOptions, o policyTryOptions) (policy.TryResult, error) {
	var cfg meter.Config
	switch {
	case o.ConfigFile != "":
		b, err := os.ReadFile(o.ConfigFile)
		if err != nil {
			return policy.TryResult{}, usagef("--config: %v", err)
		}
		if cfg, err = meter.ParseConfig(b); err != nil {
			return policy.TryResult{}, usagef("--config %s: %v", o.ConfigFile, err)
		}
	case o.Task != "":
		l, err := st.Open()
		if err != nil {
			return policy.TryResult{}, err
		}
		task, err := cas.ResolveRef(ctx, l, o.Task)
		if err != nil {
			return policy.TryResult{}, fmt.Errorf("task %s: %w", o.Task, err)
		}
		fsys, err := protocol.LoadTaskFS(ctx, l, task.Digest)
		if err != nil {
			return policy.TryResult{}, err
		}
		if cfg, err = meter.LoadTaskConfig(fsys); err != nil {
			return policy.TryResult{}, usagef("task %s: %v", task.Digest, err)
		}
	default:
		var models []string
		if o.Models == "" {
			for _, m := range upstream.Models { // the reference allowlist, in its order
				models = append(models, m.Name)
			}
		} else {
			b, err := os.ReadFile(o.Models)
			if err != nil {
				return policy.TryResult{}, usagef("--models: %v", err)
			}
			for _, l := range strings.Split(string(b), "\n") {
				if l = strings.TrimSpace(l); l != "" {
					models = append(models, l)
				}
			}
		}
		cfg = meter.ReferenceConfig(models, "http://unset.invalid/v1")
	}
	var names []string
	for _, m := range cfg.Models {
		names = append(names, m.Name)
	}
	pack, err := policy.LoadPack(o.Pack, names)
	if err != nil {
		return policy.TryResult{}, err
	}
	mopts := meter.Options{Upstream: o.Upstream, Credentials: func(string) string { return os.Getenv(envMeterKey) }}
	if o.Upstream == "" {
		url, stop, err := upstream.Start(upstream.New(upstream.Options{}))
		if err != nil {
			return policy.TryResult{}, fmt.Errorf("starting the fixture upstream: %w", err)
		}
		defer stop()
		mopts.Upstream = url
	}
	return policy.Try(ctx, pack, cfg, mopts, policy.Options{}, policy.SampleRequests())
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
