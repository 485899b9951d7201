package main

import (
	"fmt"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/urfave/cli/v2"
)

func verifyCommand(a *appEnv) *cli.Command {
	st, tr, out, rem := &storeOptions{}, &trustOptions{}, &outputOptions{}, &remoteOptions{}
	return &cli.Command{
		Name:      "verify",
		Usage:     "check an artifact's closure: every digest, a trusted signature on every manifest, subject links",
		ArgsUsage: "DIGEST|PREFIX|TAG",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "verify in this registry repository (host/repo) instead of the local store"},
			&cli.StringFlag{Name: "key", Hidden: true, EnvVars: []string{envKey}},
		}, st.Flags(), tr.Flags(), rem.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			tr.Parse(c)
			out.Parse(c)
			rem.Parse(c)
			if err := args(c, 1, "one DIGEST"); err != nil {
				return err
			}
			keys, err := tr.Load()
			if err != nil {
				return err
			}
			var s cas.Store
			if from := c.String("from"); from != "" {
				s, _, err = rem.Open(from)
			} else {
				s, err = st.Open()
			}
			if err != nil {
				return err
			}
			desc, err := cas.ResolveRef(c.Context, s, c.Args().First())
			if err != nil {
				return err
			}
			rep := bundle.Verify(c.Context, s, desc, keys)
			if err := a.render(out, rep, func(w *tabw) {
				if len(rep.Problems) == 0 {
					w.line("verified %s: %d objects, signed by %s", rep.Root, rep.Objects, fingerprints(rep.Signers[rep.Root]))
					renderSkipped(w, rep.Skipped)
					return
				}
				w.row("ROLE", "OBJECT", "PROBLEM")
				for _, p := range rep.Problems {
					w.row(p.Role, p.Object.String(), p.Detail)
				}
			}); err != nil {
				return err
			}
			if err := rep.Err(); err != nil {
				return &renderedError{code: exitVerify, err: err,
					summary: fmt.Sprintf("verification of %s failed: %d problems (listed on stdout)", rep.Root, len(rep.Problems))}
			}
			return nil
		},
	}
}

func fingerprints(fps []string) string {
	s := ""
	for i, f := range fps {
		if i > 0 {
			s += ", "
		}
		if len(f) > 16 {
			f = f[:16]
		}
		s += f
	}
	return s
}
