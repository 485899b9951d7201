package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/feval/feval/sandbox"
	"github.com/urfave/cli/v2"
)

func sandboxCommand(a *appEnv) *cli.Command {
	return &cli.Command{
		Name:        "sandbox",
		Usage:       "inspect and use the sandbox that runs all submission code",
		Subcommands: []*cli.Command{sandboxCheckCommand(a), sandboxRunCommand(a)},
	}
}

type checkResult struct {
	Capabilities sandbox.Capabilities      `json:"capabilities"`
	Guarantees   []sandbox.GuaranteeStatus `json:"guarantees"`
}

func sandboxCheckCommand(a *appEnv) *cli.Command {
	out := &outputOptions{}
	return &cli.Command{
		Name:  "check",
		Usage: "print which isolation mechanisms this host provides and which guarantees therefore hold",
		Flags: out.Flags(),
		Action: func(c *cli.Context) error {
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			caps := sandbox.Check()
			res := checkResult{Capabilities: caps, Guarantees: caps.Guarantees()}
			if err := a.render(out, res, func(w *tabw) {
				yes := func(b bool) string {
					if b {
						return "yes"
					}
					return "NO"
				}
				orNo := func(s string) string {
					if s == "" {
						return "NO"
					}
					return s
				}
				w.line("MECHANISM\tAVAILABLE")
				w.line("user namespace\t%s", yes(caps.UserNamespace))
				w.line("mount namespace\t%s", yes(caps.MountNamespace))
				w.line("pid namespace\t%s", yes(caps.PIDNamespace))
				w.line("network namespace\t%s", yes(caps.NetworkNamespace))
				w.line("ipc / uts namespaces\t%s / %s", yes(caps.IPCNamespace), yes(caps.UTSNamespace))
				w.line("seccomp\t%s", yes(caps.Seccomp))
				w.line("landlock\t%s (ABI %d)", yes(caps.Landlock), caps.LandlockABI)
				w.line("memory cgroup\t%s", orNo(caps.MemoryCgroup))
				w.line("pids cgroup\t%s", orNo(caps.PidsCgroup))
				w.line("cpu cgroup\t%s", orNo(caps.CPUCgroup))
				w.line("cpu bandwidth cgroup\t%s", orNo(caps.CPUQuotaCgroup))
				w.line("")
				w.line("GUARANTEE\tHOLDS\tBY")
				for _, g := range res.Guarantees {
					by := strings.Join(g.Mechanisms, ", ")
					if !g.Holds {
						by = "missing: " + strings.Join(g.Missing, ", ")
					}
					w.line("%s\t%s\t%s", g.Name, yes(g.Holds), by)
				}
				for _, p := range caps.Problems {
					w.line("problem\t%s", p)
				}
			}); err != nil {
				return err
			}
			for _, g := range res.Guarantees {
				if !g.Holds {
					return &renderedError{code: exitUnavailable, err: sandbox.ErrUnavailable,
						summary: "some sandbox guarantees do not hold on this host (listed on stdout); submission code cannot be evaluated here"}
				}
			}
			return nil
		},
	}
}

func sandboxRunCommand(a *appEnv) *cli.Command {
	out := &outputOptions{}
	d := sandbox.DefaultLimits()
	return &cli.Command{
		Name:      "run",
		Usage:     "run a command under the sandbox, as evaluations do, and report what happened",
		ArgsUsage: "-- CMD [ARGS...]",
		Flags: flagSet([]cli.Flag{
			&cli.StringSliceFlag{Name: "input", Usage: "HOST:TARGET mounted read-only (TARGET under /in; repeatable)"},
			&cli.StringFlag{Name: "output", Usage: "host directory that receives what the command leaves in /out"},
			&cli.StringSliceFlag{Name: "env", Usage: "KEY=VALUE for the command (nothing is inherited; repeatable)"},
			&cli.StringFlag{Name: "socket", Usage: "host Unix socket made reachable at " + sandbox.SocketPath},
			&cli.StringFlag{Name: "listen", Usage: "host path of a Unix socket the command accepts connections on, as descriptor 3"},
			&cli.Int64Flag{Name: "wall-ms", Value: d.WallMillis, Usage: "wall-clock limit"},
			&cli.Int64Flag{Name: "cpu-ms", Value: d.CPUMillis, Usage: "CPU-time limit"},
			&cli.Int64Flag{Name: "memory-bytes", Value: d.MemoryBytes, Usage: "memory limit"},
			&cli.Int64Flag{Name: "processes", Value: d.Processes, Usage: "process and thread limit"},
			&cli.Int64Flag{Name: "open-files", Value: d.OpenFiles, Usage: "open file limit"},
			&cli.Int64Flag{Name: "output-bytes", Value: d.OutputBytes, Usage: "size of /out"},
			&cli.BoolFlag{Name: "unsandboxed-dev-mode-no-isolation", Usage: "DANGER: run without any isolation (development only; results are marked unsandboxed and refused by validators)"},
		}, out.Flags()),
		Action: func(c *cli.Context) error {
			out.Parse(c)
			if c.NArg() == 0 {
				return usagef("give the command after --, e.g. 'feval sandbox run -- /bin/true'")
			}
			spec := sandbox.Spec{Args: c.Args().Slice(), Env: c.StringSlice("env"), OutputDir: c.String("output"), Socket: c.String("socket"), Listen: c.String("listen"),
				Limits: sandbox.Limits{WallMillis: c.Int64("wall-ms"), CPUMillis: c.Int64("cpu-ms"), MemoryBytes: c.Int64("memory-bytes"),
					Processes: c.Int64("processes"), OpenFiles: c.Int64("open-files"), OutputBytes: c.Int64("output-bytes")},
				Unsandboxed: c.Bool("unsandboxed-dev-mode-no-isolation")}
			for _, in := range c.StringSlice("input") {
				host, target, ok := strings.Cut(in, ":")
				if !ok {
					return usagef("--input %q: want HOST:TARGET", in)
				}
				spec.Inputs = append(spec.Inputs, sandbox.Mount{Source: host, Target: target})
			}
			if spec.Unsandboxed {
				fmt.Fprintln(a.stderr, "feval: WARNING: running WITHOUT ANY ISOLATION; the result is marked unsandboxed")
			}
			spec = spec.WithDefaults()
			if err := spec.Validate(); err != nil {
				return usagef("%v", err)
			}
			res, err := sandbox.Run(c.Context, spec)
			if err != nil && !errors.Is(err, sandbox.ErrUnavailable) && res.Class == "" {
				return err
			}
			// Captured output is always a (base64) string, empty when nothing came.
			res.Stdout, res.Stderr = append([]byte{}, res.Stdout...), append([]byte{}, res.Stderr...)
			if rerr := a.render(out, res, func(w *tabw) {
				w.line("class\t%s", res.Class)
				if res.Detail != "" {
					w.line("detail\t%s", res.Detail)
				}
				w.line("exit code\t%d", res.ExitCode)
				w.line("wall / cpu\t%d ms / %d ms", res.WallMillis, res.CPUMillis)
				w.line("peak memory\t%s", humanBytes(res.PeakMemoryBytes))
				if len(res.Stdout) > 0 {
					w.line("stdout\t%q", res.Stdout)
				}
				if len(res.Stderr) > 0 {
					w.line("stderr\t%q", res.Stderr)
				}
			}); rerr != nil {
				return rerr
			}
			switch {
			case err != nil:
				return fmt.Errorf("%w: %v", sandbox.ErrUnavailable, err)
			case res.Class == sandbox.ClassOK:
				return nil
			case res.Class == sandbox.ClassInfraError:
				return &renderedError{code: exitUnavailable, err: sandbox.ErrUnavailable, summary: "the sandbox could not be set up: " + res.Detail}
			}
			return &renderedError{code: exitRejected, err: errors.New(string(res.Class)), summary: fmt.Sprintf("the command ended as %s", res.Class)}
		},
	}
}
