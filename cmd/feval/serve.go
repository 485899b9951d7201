package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/consensus"
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
			&cli.StringFlag{Name: "events", Usage: "optimizer runs JSON, as for 'feval frontier', shown on the frontier page"},
			&cli.Int64Flag{Name: "baseline", Usage: "with --events: the bar at launch, in micro-nats"},
			&cli.StringFlag{Name: "rules", Usage: "with --events: rules JSON file (default: the documented defaults)"},
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
			if c.String("events") != "" || c.IsSet("baseline") {
				fo := &frontierOptions{}
				if err := fo.Parse(c); err != nil {
					return err
				}
				cfg.opts.Frontier = &web.Frontier{BaselineMicroNats: fo.baseline, Runs: fo.runs, Rules: fo.rules}
			} else if c.String("rules") != "" {
				return usagef("--rules applies to the frontier: give --events FILE and --baseline MICRONATS too")
			}
			keys, err := serveTrusted(tr)
			if err != nil {
				return err
			}
			cfg.opts.Trusted = keys
			if st.Path != defaultStore() {
				cfg.opts.StoreName = st.Path
			}
			if cfg.from != "" {
				src, _, err := rem.Open(cfg.from)
				if err != nil {
					return err
				}
				cfg.opts.Source, cfg.opts.SourceName = src, cfg.from
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runServe(ctx, cfg, a.stdout, a.stderr)
		},
	}
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

// serveTrusted reads the trusted keys as every aggregate does: --pub or
// FEVAL_PUB, else the caller's own public key; with none it refuses.
func serveTrusted(tr *trustOptions) ([]web.TrustedKey, error) {
	paths := tr.Keys
	if len(paths) == 0 {
		if _, err := os.Stat(tr.own); errors.Is(err, fs.ErrNotExist) {
			return nil, errNoTrustedKey()
		}
		paths = []string{tr.own}
	}
	var out []web.TrustedKey
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%w: public key %s: %v", errNoKey, p, err)
		}
		k, err := bundle.ParsePublicKey(b)
		if err != nil {
			return nil, usagef("%s: %v", p, err)
		}
		out = append(out, web.TrustedKey{Path: p, Key: k})
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
   feval serve --events runs.json --baseline 3500000
   feval serve --addr 0.0.0.0:8080 --allow-remote`
}
