package main

import (
	"fmt"

	"github.com/feval/feval/cas"
	"github.com/urfave/cli/v2"
)

func fsckCommand(a *appEnv) *cli.Command {
	st, out := &storeOptions{}, &outputOptions{}
	return &cli.Command{
		Name:  "fsck",
		Usage: "re-hash every blob of the local store and walk every manifest's closure; --repair rebuilds a damaged index",
		Flags: flagSet([]cli.Flag{
			&cli.BoolFlag{Name: "repair", Usage: "rebuild a damaged index.json from the blobs, drop invalid index entries, remove temporary files left by killed commands"},
		}, st.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			// FsckStore, not st.Open: a store whose index is damaged must still
			// be checked and repaired.
			rep, err := cas.FsckStore(c.Context, st.Path, cas.FsckOptions{Repair: c.Bool("repair"), Progress: a.progress(out, "fsck")})
			if err != nil {
				return err
			}
			if rep.Findings == nil {
				rep.Findings = []cas.Finding{}
			}
			if err := a.render(out, rep, func(w *tabw) {
				for _, r := range rep.Repairs {
					w.line("repaired: %s", r)
				}
				if len(rep.Findings) == 0 {
					w.line("store %s is clean: %d blobs (%s), %d manifests", st.Path, rep.Blobs, humanBytes(rep.Bytes), rep.Manifests)
					return
				}
				w.row("KIND", "OBJECT", "REFERENCED BY", "DETAIL")
				for _, f := range rep.Findings {
					obj := f.Path
					if f.Digest != "" {
						obj = f.Digest.String()
					}
					w.row(string(f.Kind), obj, f.Referrer.String(), f.Detail)
				}
			}); err != nil {
				return err
			}
			if len(rep.Findings) > 0 {
				return &renderedError{code: exitVerify, err: rep.Err(),
					summary: fmt.Sprintf("store %s has %d problems (listed on stdout); 'feval fsck --repair' fixes the index and temporary files, 'feval pull' restores named objects", st.Path, len(rep.Findings))}
			}
			return nil
		},
	}
}
