package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/urfave/cli/v2"
)

func recordCommand(a *appEnv) *cli.Command {
	st, k, out := &storeOptions{}, &keyOptions{}, &outputOptions{}
	return &cli.Command{
		Name:      "record",
		Usage:     "write a JSON record as a signed artifact of a kind (canonicalised; floats refused) and print its digest",
		ArgsUsage: "FILE.json (- for stdin)",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "kind", Usage: "artifact kind; required"},
			&cli.StringFlag{Name: "subject", Usage: "digest, prefix or tag of the artifact this record is about"},
			&cli.StringSliceFlag{Name: "layer", Usage: "attach FILE as a raw payload layer titled with its base name (repeatable, in order)"},
		}, st.Flags(), k.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			k.Parse(c)
			out.Parse(c)
			if err := args(c, 1, "one FILE"); err != nil {
				return err
			}
			kind := c.String("kind")
			if !bundle.ValidKind(kind) {
				return usagef("--kind %q: want lower-case letters, digits and '-'", kind)
			}
			var r io.Reader = a.stdin
			if name := c.Args().First(); name != "-" {
				f, err := os.Open(name)
				if err != nil {
					return usagef("%v", err)
				}
				defer f.Close()
				r = f
			}
			raw, err := io.ReadAll(io.LimitReader(r, bundle.MaxRecordSize+1))
			if err != nil {
				return err
			}
			canon, err := bundle.Canonicalize(raw)
			if err != nil {
				return usagef("%s: %v", c.Args().First(), err)
			}
			l, s, ts, err := openForWrite(a, st, k)
			if err != nil {
				return err
			}
			art := bundle.Artifact{Kind: kind, Record: rawJSON(canon), Created: ts}
			if subj := c.String("subject"); subj != "" {
				d, err := cas.ResolveRef(c.Context, l, subj)
				if err != nil {
					return fmt.Errorf("--subject: %w", err)
				}
				art.Subject = &d
			}
			for _, name := range c.StringSlice("layer") {
				b, err := os.ReadFile(name)
				if err != nil {
					return usagef("--layer: %v", err)
				}
				layer, err := bundle.PushData(c.Context, l, filepath.Base(name), b)
				if err != nil {
					return err
				}
				art.Layers = append(art.Layers, layer)
			}
			desc, err := bundle.WriteSigned(c.Context, l, s, art)
			if err != nil {
				return err
			}
			if err := l.Close(); err != nil {
				return err
			}
			return a.render(out, cas.Descriptor(desc), func(w *tabw) { w.line("%s", desc.Digest) })
		},
	}
}

// rawJSON is already-canonical JSON that encodes as itself.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }
