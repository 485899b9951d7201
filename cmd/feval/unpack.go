package main

import (
	"errors"
	"fmt"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/urfave/cli/v2"
)

func unpackCommand(a *appEnv) *cli.Command {
	st, rem, out := &storeOptions{}, &remoteOptions{}, &outputOptions{}
	return &cli.Command{
		Name:      "unpack",
		Usage:     "restore a packed file or tree into a directory, verified and all-or-nothing",
		ArgsUsage: "DIGEST|PREFIX|TAG DIR",
		Description: "A tree becomes DIR's content; a file becomes DIR/NAME. Everything is written into a staging\n" +
			"directory next to DIR and checked against the recorded content digest before DIR is touched.\n" +
			"Entries that would escape DIR, links, devices and modes other than 0644/0755 are refused.\n" +
			"Signatures are not checked here: run 'feval verify' first to know who made the artifact.",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "read the artifact from this registry repository instead of the local store"},
			&cli.BoolFlag{Name: "force", Usage: "replace the content of a non-empty DIR (removed once the new tree is in place)"},
			&cli.Int64Flag{Name: "max-bytes", Usage: "refuse content larger than this many bytes (default: 1 GiB in all, 512 MiB per file)", Value: bundle.DefaultLimits.MaxBytes},
		}, st.Flags(), rem.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			if err := args(c, 2, "DIGEST and DIR"); err != nil {
				return err
			}
			if c.Int64("max-bytes") <= 0 {
				return usagef("--max-bytes %d: want a positive number of bytes", c.Int64("max-bytes"))
			}
			var s cas.Store
			var err error
			if from := c.String("from"); from != "" {
				s, _, err = rem.Open(from)
			} else {
				s, err = st.Open()
			}
			if err != nil {
				return err
			}
			desc, err := cas.ResolveRef(c.Context, s, c.Args().Get(0))
			if err != nil {
				return err
			}
			if model, err := unpackModel(c.Context, a, s, desc, c.Args().Get(1), out); model || err != nil {
				return err
			}
			art, err := bundle.Load(c.Context, s, desc)
			if err != nil {
				return err
			}
			lim := bundle.DefaultLimits
			if c.IsSet("max-bytes") {
				lim.MaxBytes, lim.MaxFile = c.Int64("max-bytes"), c.Int64("max-bytes")
			}
			extract := bundle.Extract
			if protocol.IsRowsIndexed(art) {
				extract = protocol.ExtractSubmission // a rollouts submission in format 3
			}
			res, err := extract(c.Context, s, art, c.Args().Get(1), bundle.ExtractOptions{
				Limits: lim, Replace: c.Bool("force"), Progress: a.progress(out, "unpack")})
			switch {
			case errors.Is(err, bundle.ErrTargetNotEmpty):
				return usagef("%v: choose an empty or new directory, or add --force to replace its content", err)
			case errors.Is(err, bundle.ErrLimit):
				return usagef("%v (raise --max-bytes if you trust it)", err)
			case errors.Is(err, bundle.ErrUnsafeEntry):
				return fmt.Errorf("%w: %w", bundle.ErrVerify, err)
			case err != nil:
				return err
			}
			return a.render(out, res, func(w *tabw) {
				w.line("unpacked %s %s (%d files, %s) into %s", res.Content.Type, desc.Digest, res.Files, humanBytes(res.Content.Size), res.Dir)
			})
		},
	}
}
