package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/protocol"
	"github.com/urfave/cli/v2"
)

func meterCommand(a *appEnv) *cli.Command {
	return &cli.Command{
		Name:        "meter",
		Usage:       "the metering proxy every model call of a scenario goes through",
		Subcommands: []*cli.Command{meterServeCommand(a)},
	}
}

// meterServeOptions are the choices of 'feval meter serve'.
type meterServeOptions struct {
	Task, ConfigFile string
	Listen           string
	Upstream         string
	Scenario         string
	Replay           string
	Record           bool
	Subject          string
}

// meterServeResult is what the command prints when it stops.
type meterServeResult struct {
	Listen      string             `json:"listen"`
	Replay      bool               `json:"replay"`
	Summaries   []meter.Summary    `json:"summaries"`
	Divergences []meter.Divergence `json:"divergences"`
	Artifacts   *meterArtifacts    `json:"artifacts,omitempty"`
}

// meterArtifacts are the signed trace and receipts a recording meter wrote.
type meterArtifacts struct {
	Trace    cas.Descriptor `json:"trace_artifact"`
	Receipts cas.Descriptor `json:"receipts_artifact"`
}

func meterServeCommand(a *appEnv) *cli.Command {
	st, k, out := &storeOptions{}, &keyOptions{}, &outputOptions{}
	return &cli.Command{
		Name:  "serve",
		Usage: "serve the OpenAI chat API subset with the task's allowlist, prices and cap until interrupted; print receipts' totals",
		Description: "Calls are attributed to the scenario named by the Feval-Scenario header (or --scenario).\n" +
			"The upstream's bearer token comes from $" + envMeterKey + " and is never recorded.\n" +
			"With --record, the trace and receipts are written as signed artifacts about --subject when\n" +
			"the meter stops (SIGINT or SIGTERM). With --replay TRACE, answers come from a recorded trace\n" +
			"and no upstream is contacted.",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "task", Usage: "digest, prefix or tag of the task whose " + meter.TaskConfigFile + " configures the meter"},
			&cli.StringFlag{Name: "config", Usage: "a meter configuration file instead of a task (format " + meter.ConfigFormat + ")"},
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8400", Usage: "unix:PATH or a loopback HOST:PORT"},
			&cli.StringFlag{Name: "upstream", Usage: "base URL that replaces every model's upstream (e.g. the fixture upstream)"},
			&cli.StringFlag{Name: "scenario", Usage: "attribute every call to this scenario, whatever its header says"},
			&cli.StringFlag{Name: "replay", Usage: "digest, prefix or tag of a trace to answer from (no upstream)"},
			&cli.BoolFlag{Name: "record", Usage: "write the signed trace and receipts when the meter stops"},
			&cli.StringFlag{Name: "subject", Usage: "digest, prefix or tag of the submission the recording is about (with --record)"},
		}, st.Flags(), k.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			k.Parse(c)
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			o := meterServeOptions{Task: c.String("task"), ConfigFile: c.String("config"), Listen: c.String("listen"),
				Upstream: c.String("upstream"), Scenario: c.String("scenario"), Replay: c.String("replay"),
				Record: c.Bool("record"), Subject: c.String("subject")}
			if err := o.check(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := runMeterServe(ctx, a, st, k, o, func(addr string) {
				if !out.Quiet {
					fmt.Fprintf(a.stderr, "feval: meter listening on %s (stop with Ctrl-C)\n", addr)
				}
			})
			if err != nil {
				return err
			}
			return a.render(out, res, func(w *tabw) {
				w.line("SCENARIO\tSTATUS\tCALLS\tCOST_MICRO_USD")
				for _, s := range res.Summaries {
					w.line("%s\t%s\t%d\t%d", s.Scenario, s.Status, s.Calls, s.CostMicroUSD)
				}
				for _, d := range res.Divergences {
					w.line("divergence\t%s call %d: request %s (occurrence %d) is not in the trace", d.Scenario, d.Seq, d.RequestDigest, d.Occurrence)
				}
				if res.Artifacts != nil {
					w.line("trace\t%s", res.Artifacts.Trace.Digest)
					w.line("receipts\t%s", res.Artifacts.Receipts.Digest)
				}
			})
		},
	}
}

func (o meterServeOptions) check() error {
	switch {
	case (o.Task == "") == (o.ConfigFile == ""):
		return usagef("give exactly one of --task and --config")
	case o.Record && o.Subject == "":
		return usagef("--record needs --subject: the submission the trace and receipts are about")
	case !o.Record && o.Subject != "":
		return usagef("--subject is only used with --record")
	case o.Scenario != "" && !meter.ValidScenario(o.Scenario):
		return usagef("--scenario %q: want 1-128 letters, digits, '.', '_' or '-'", o.Scenario)
	}
	return nil
}

// runMeterServe serves until ctx ends, then writes the recording if asked.
// ready is called with the listening address.
func runMeterServe(ctx context.Context, a *appEnv, st *storeOptions, k *keyOptions, o meterServeOptions, ready func(string)) (meterServeResult, error) {
	var l *cas.Layout
	openStore := func() error {
		var err error
		if l == nil {
			l, err = st.Open()
		}
		return err
	}
	var cfg meter.Config
	var err error
	if o.ConfigFile != "" {
		b, rerr := os.ReadFile(o.ConfigFile)
		if rerr != nil {
			return meterServeResult{}, usagef("--config: %v", rerr)
		}
		if cfg, err = meter.ParseConfig(b); err != nil {
			return meterServeResult{}, usagef("--config %s: %v", o.ConfigFile, err)
		}
	} else {
		if err := openStore(); err != nil {
			return meterServeResult{}, err
		}
		task, err := cas.ResolveRef(ctx, l, o.Task)
		if err != nil {
			return meterServeResult{}, fmt.Errorf("task %s: %w", o.Task, err)
		}
		fsys, err := protocol.LoadTaskFS(ctx, l, task.Digest)
		if err != nil {
			return meterServeResult{}, err
		}
		if cfg, err = meter.LoadTaskConfig(fsys); err != nil {
			return meterServeResult{}, usagef("task %s: %v", task.Digest, err)
		}
	}
	opts := meter.Options{Upstream: o.Upstream, Credentials: func(string) string { return os.Getenv(envMeterKey) }}
	if o.Replay != "" {
		if err := openStore(); err != nil {
			return meterServeResult{}, err
		}
		d, err := cas.ResolveRef(ctx, l, o.Replay)
		if err != nil {
			return meterServeResult{}, fmt.Errorf("trace %s: %w", o.Replay, err)
		}
		_, entries, err := meter.LoadTrace(ctx, l, d)
		if err != nil {
			return meterServeResult{}, err
		}
		opts.Replay = entries
		if opts.Replay == nil {
			opts.Replay = []meter.TraceEntry{}
		}
	}
	var signer *signerT
	var subject ociDesc
	if o.Record { // fail before serving, not after
		if err := openStore(); err != nil {
			return meterServeResult{}, err
		}
		if subject, err = cas.ResolveRef(ctx, l, o.Subject); err != nil {
			return meterServeResult{}, fmt.Errorf("subject %s: %w", o.Subject, err)
		}
		if signer, err = k.Signer(a); err != nil {
			return meterServeResult{}, err
		}
	}
	m, err := meter.New(cfg, opts)
	if err != nil {
		return meterServeResult{}, usagef("%v", err)
	}
	defer m.Close()
	h := m.Handler()
	if o.Scenario != "" {
		s, err := m.Scenario(o.Scenario)
		if err != nil {
			return meterServeResult{}, usagef("%v", err)
		}
		h = s.Handler()
	}
	ln, err := meter.Listen(o.Listen)
	if err != nil {
		return meterServeResult{}, usagef("--listen: %v", err)
	}
	ready(ln.Addr().String())
	if err := meter.Serve(ctx, ln, h); err != nil {
		return meterServeResult{}, err
	}
	res := meterServeResult{Listen: ln.Addr().String(), Replay: m.Replaying(),
		Summaries: meter.Summarize(m.Recorder().Receipts()), Divergences: m.Recorder().Divergences()}
	if res.Divergences == nil {
		res.Divergences = []meter.Divergence{}
	}
	if o.Record {
		when, err := created()
		if err != nil {
			return res, err
		}
		arts, err := meter.WriteArtifacts(context.WithoutCancel(ctx), l, signer, m.Recorder(), cfg, subject, when)
		if err != nil {
			return res, err
		}
		res.Artifacts = &meterArtifacts{cas.Descriptor(arts.Trace), cas.Descriptor(arts.Receipts)}
		if err := l.Flush(); err != nil {
			return res, err
		}
	}
	return res, nil
}
