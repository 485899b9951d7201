package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/consensus"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	"github.com/feval/feval/web"
	"github.com/urfave/cli/v2"
)

// serveConfig is everything 'feval serve' needs, parsed from flags.
type serveConfig struct {
	addr        string
	allowRemote bool
	store       string
	from        string
	rounds      []string
	opts        web.Options
}

func serveCommand(a *appEnv) *cli.Command {
	st, rem, tr := &storeOptions{}, &remoteOptions{}, &trustOptions{}
	return &cli.Command{
		Name:  "serve",
		Usage: "read-only web viewer: rounds, leaderboards, each verdict's evidence, the optimizer frontier, any artifact",
		Description: "Serves HTML pages (no script, no external resource) and the same data as JSON under /api.\n" +
			"The viewer binds to a loopback address unless --allow-remote is given, and then answers only to a\n" +
			"loopback Host. Verdicts and signatures count only when made by a trusted key: --pub or FEVAL_PUB\n" +
			"(default: your own key's .pub); with none, serve refuses.\n" +
			"With --from, artifacts missing locally are gathered from the registry into the local store, and\n" +
			"--round names rounds to gather at start (a registry cannot list its rounds).",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "address to listen on (host:port; port 0 picks a free one)"},
			&cli.BoolFlag{Name: "allow-remote", Usage: "allow listening on a non-loopback address (anyone who can reach it can read the store)"},
			&cli.StringFlag{Name: "from", Usage: "registry repository to gather rounds, verdicts and artifacts from"},
			&cli.StringSliceFlag{Name: "round", Usage: "with --from: a round (digest or tag in the registry) to gather at start; repeatable"},
			&cli.DurationFlag{Name: "refresh", Value: 30 * time.Second, Usage: "reload the rounds, leaderboard and frontier pages this often to follow new verdicts (0: never)"},
			&cli.StringFlag{Name: "frontier-round", Usage: "an optimizer round (digest, prefix or tag) whose trusted verdicts the frontier page folds, read anew at every request"},
			&cli.StringFlag{Name: "launch", Usage: "with --frontier-round: the competition's launch, RFC 3339 (default: when the round's commits close)"},
			&cli.StringFlag{Name: "events", Usage: "optimizer runs JSON, as for 'feval frontier', shown on the frontier page"},
			&cli.Int64Flag{Name: "baseline", Usage: "with --events: the bar at launch, in micro-nats"},
			&cli.StringFlag{Name: "rules", Usage: "with --events or --frontier-round: rules JSON file (default: the documented defaults)"},
		}, st.Flags(), rem.Flags(), tr.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			rem.Parse(c)
			tr.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			cfg := serveConfig{addr: c.String("addr"), allowRemote: c.Bool("allow-remote"), store: st.Path,
				from: c.String("from"), rounds: c.StringSlice("round")}
			if err := checkServeAddr(cfg.addr, cfg.allowRemote); err != nil {
				return err
			}
			if len(cfg.rounds) > 0 && cfg.from == "" {
				return usagef("--round gathers from a registry: give --from REPO too")
			}
			f, err := serveFrontier(c)
			if err != nil {
				return err
			}
			cfg.opts.Frontier = f
			if cfg.opts.Refresh = c.Duration("refresh"); cfg.opts.Refresh < 0 {
				return usagef("--refresh %s: want a duration of 0 or more", cfg.opts.Refresh)
			}
			keys, err := serveTrusted(tr)
			if err != nil {
				return err
			}
			cfg.opts.Trusted = keys
			if cfg.from != "" {
				src, _, err := rem.Open(cfg.from)
				if err != nil {
					return err
				}
				cfg.opts.Source, cfg.opts.SourceName = src, cfg.from
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			if r := c.String("frontier-round"); r != "" {
				if err := cfg.resolveFrontier(ctx, r, c.String("launch")); err != nil {
					return err
				}
			}
			return runServe(ctx, cfg, a.stdout, a.stderr)
		},
	}
}

// serveFrontier reads what the frontier page folds: a runs file with its
// baseline, or the rules of an optimizer round's verdicts (the round itself
// is resolved by resolveFrontier); nil when neither is given.
func serveFrontier(c *cli.Context) (*web.Frontier, error) {
	events, round := c.String("events"), c.String("frontier-round")
	switch {
	case events != "" && round != "":
		return nil, usagef("--events and --frontier-round both give the frontier's runs: use one")
	case events == "" && c.IsSet("baseline"):
		return nil, usagef("--baseline goes with --events FILE")
	case round == "" && c.String("launch") != "":
		return nil, usagef("--launch goes with --frontier-round ROUND")
	case events == "" && round == "":
		if c.String("rules") != "" {
			return nil, usagef("--rules applies to the frontier: give --frontier-round ROUND, or --events FILE and --baseline MICRONATS")
		}
		return nil, nil
	}
	f := &web.Frontier{Rules: scoring.DefaultRules()}
	if p := c.String("rules"); p != "" {
		b, err := readInputFile(p)
		if err != nil {
			return nil, err
		}
		if f.Rules, err = consensus.ParseRules(b); err != nil {
			return nil, usagef("%s: %v", p, err)
		}
	}
	if events != "" {
		if !c.IsSet("baseline") {
			return nil, usagef("--events needs --baseline MICRONATS, the bar at launch")
		}
		b, err := readInputFile(events)
		if err != nil {
			return nil, err
		}
		if f.Runs, err = consensus.ParseRuns(b); err != nil {
			return nil, usagef("%s: %v", events, err)
		}
		f.BaselineMicroNats = c.Int64("baseline")
	}
	return f, nil
}

// resolveFrontier names the frontier's round by digest, gathering it from
// the registry first when serving from one, and sets the launch: the given
// time, or when the round's commits close.
func (cfg *serveConfig) resolveFrontier(ctx context.Context, ref, launch string) error {
	open := cas.OpenLayout
	if cfg.opts.Source != nil {
		open = cas.Init // the local store is the registry's cache
	}
	l, err := open(cfg.store)
	if err != nil {
		return err
	}
	defer l.Close()
	var src cas.Store = l
	if cfg.opts.Source != nil {
		src = cfg.opts.Source
	}
	desc, err := resolveIn(ctx, l, src, ref)
	if err != nil {
		return err
	}
	if src != cas.Store(l) {
		if err := consensus.Gather(ctx, src, l, desc); err != nil {
			return err
		}
	}
	var r protocol.Round
	if _, err := protocol.LoadAs(ctx, l, desc, protocol.KindRound, &r); err != nil {
		return err
	}
	if r.Protocol != "optimizer" {
		return usagef("--frontier-round %s is a round of protocol %q: the frontier is the optimizer's", ref, r.Protocol)
	}
	f := cfg.opts.Frontier
	f.Round = desc.Digest
	switch {
	case launch != "":
		if f.Launch, err = time.Parse(time.RFC3339, launch); err != nil {
			return usagef("--launch %q: want an RFC 3339 time such as 2026-12-01T00:00:00Z", launch)
		}
	case r.CommitUntil.Kind != "time":
		return usagef("the round's windows are block heights: give --launch TIME")
	default:
		if f.Launch, err = time.Parse(time.RFC3339, r.CommitUntil.Time); err != nil {
			return err
		}
	}
	return nil
}

// checkServeAddr refuses a listening address that is not loopback unless
// allowed explicitly.
func checkServeAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--addr %q: want host:port, e.g. 127.0.0.1:8080", addr)
	}
	if !web.IsLoopbackHost(host) && !allowRemote {
		return usagef("--addr %q is not a loopback address: anyone who reaches it can read the store; add --allow-remote to mean it", addr)
	}
	return nil
}

// serveTrusted reads the trusted keys as every aggregate does
// (trustOptions.LoadForAggregate), each with the file it came from.
func serveTrusted(tr *trustOptions) ([]web.TrustedKey, error) {
	keys, err := tr.LoadForAggregate()
	if err != nil {
		return nil, err
	}
	paths := tr.paths()
	out := make([]web.TrustedKey, len(keys))
	for i, k := range keys {
		out[i] = web.TrustedKey{Path: paths[i], Key: k}
	}
	return out, nil
}

// runServe gathers the named rounds, listens, prints the viewer's URL on out
// and serves until ctx ends.
func runServe(ctx context.Context, cfg serveConfig, out, errw io.Writer) error {
	if cfg.from != "" {
		l, err := cas.Init(cfg.store) // the local store is the registry's cache
		if err != nil {
			return err
		}
		for _, r := range cfg.rounds {
			desc, err := cas.ResolveRef(ctx, cfg.opts.Source, r)
			if err != nil {
				return fmt.Errorf("round %s in %s: %w", r, cfg.from, err)
			}
			if err := consensus.Gather(ctx, cfg.opts.Source, l, desc); err != nil {
				return err
			}
		}
		if err := l.Close(); err != nil {
			return err
		}
	}
	srv, err := web.New(cfg.store, cfg.opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.addr, err)
	}
	var h http.Handler = srv
	if web.IsLoopbackHost(ln.Addr().String()) {
		h = web.LoopbackOnly(srv)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 5 * time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	fmt.Fprintf(out, "http://%s/\n", ln.Addr())
	fmt.Fprintf(errw, "feval serve: serving %s; stop with Ctrl-C\n", cfg.store)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func init() {
	commandExamples["serve"] = `   feval serve
   feval serve --store bin/demo/store --pub bin/demo/validator.pub
   feval serve --from registry.example/comp/rollouts --round round --pub validator.pub
   feval serve --frontier-round opt-round --pub validator.pub
   feval serve --events runs.json --baseline 3500000
   feval serve --addr 0.0.0.0:8080 --allow-remote`
}
