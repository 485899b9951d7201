package main

import (
	"github.com/feval/feval/cas"
	"github.com/urfave/cli/v2"
)

func initCommand(a *appEnv) *cli.Command {
	st, out := &storeOptions{}, &outputOptions{}
	return &cli.Command{
		Name:  "init",
		Usage: "create the local store (an OCI image layout) if it does not exist",
		Flags: flagSet(st.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			l, err := cas.Init(st.Path)
			if err != nil {
				return err
			}
			if err := l.Close(); err != nil {
				return err
			}
			res := initResult{st.Path}
			return a.render(out, res, func(w *tabw) { w.line("initialised store %s", st.Path) })
		},
	}
}

// initResult is what 'feval init --json' prints.
type initResult struct {
	Store string `json:"store"`
}
