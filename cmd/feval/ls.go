package main

import (
	"sort"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/opencontainers/go-digest"
	"github.com/urfave/cli/v2"
)

type lsEntry struct {
	Digest digest.Digest `json:"digest"`
	Kind   string        `json:"kind"`
	Size   int64         `json:"size"`
	Tags   []string      `json:"tags"`
}

func lsCommand(a *appEnv) *cli.Command {
	st, out := &storeOptions{}, &outputOptions{}
	return &cli.Command{
		Name:  "ls",
		Usage: "list the artifacts in the local store (signatures with --all)",
		Flags: flagSet([]cli.Flag{
			&cli.BoolFlag{Name: "all", Usage: "include signatures and foreign manifests"},
			&cli.StringFlag{Name: "kind", Usage: "only artifacts of this kind"},
		}, st.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			out.Parse(c)
			if err := args(c, 0, "no arguments"); err != nil {
				return err
			}
			l, err := st.Open()
			if err != nil {
				return err
			}
			tags := map[digest.Digest][]string{}
			for t, d := range l.Tags() {
				tags[d.Digest] = append(tags[d.Digest], t)
			}
			res := []lsEntry{}
			for _, m := range l.Manifests() {
				kind := bundle.KindOf(m.ArtifactType)
				switch m.ArtifactType {
				case bundle.MediaTypeSigstoreBundle:
					kind = "(signature)"
				case bundle.ArtifactTypeModelManifest:
					kind = modelKind(c.Context, l, m)
				}
				if (kind == "" || kind == "(signature)") && !c.Bool("all") {
					continue
				}
				if k := c.String("kind"); k != "" && k != kind {
					continue
				}
				t := tags[m.Digest]
				sort.Strings(t)
				if t == nil {
					t = []string{}
				}
				res = append(res, lsEntry{Digest: m.Digest, Kind: kind, Size: m.Size, Tags: t})
			}
			return a.render(out, res, func(w *tabw) {
				w.row("DIGEST", "KIND", "TAGS")
				for _, e := range res {
					w.row(shortDigest(e.Digest), e.Kind, strings.Join(e.Tags, ","))
				}
			})
		},
	}
}
