package main

import (
	"encoding/json"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/urfave/cli/v2"
)

type inspectResult struct {
	Digest    string               `json:"digest"`
	Kind      string               `json:"kind"`
	Subject   *ocispec.Descriptor  `json:"subject,omitempty"`
	Record    json.RawMessage      `json:"record"`
	Payloads  []ocispec.Descriptor `json:"payloads"`
	Referrers []ocispec.Descriptor `json:"referrers"`
}

func inspectCommand(a *appEnv) *cli.Command {
	st, out := &storeOptions{}, &outputOptions{}
	return &cli.Command{
		Name:      "inspect",
		Usage:     "show an artifact's record, payload layers and referrers",
		ArgsUsage: "DIGEST|PREFIX|TAG",
		Flags: flagSet([]cli.Flag{
			&cli.BoolFlag{Name: "record", Usage: "print only the record's canonical JSON bytes"},
		}, st.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			out.Parse(c)
			if err := args(c, 1, "one DIGEST"); err != nil {
				return err
			}
			l, err := st.Open()
			if err != nil {
				return err
			}
			desc, err := cas.ResolveRef(c.Context, l, c.Args().First())
			if err != nil {
				return err
			}
			art, err := bundle.Load(c.Context, l, desc)
			if err != nil {
				return err
			}
			if c.Bool("record") {
				_, err := a.stdout.Write(append(art.Record, '\n'))
				return err
			}
			refs, err := l.Referrers(c.Context, desc, "")
			if err != nil {
				return err
			}
			res := inspectResult{Digest: desc.Digest.String(), Kind: art.Kind, Subject: art.Manifest.Subject,
				Record: art.Record, Payloads: art.Payloads, Referrers: refs}
			if res.Payloads == nil {
				res.Payloads = []ocispec.Descriptor{}
			}
			return a.render(out, res, func(w *tabw) {
				w.line("digest\t%s", res.Digest)
				w.line("kind\t%s", res.Kind)
				if res.Subject != nil {
					w.line("subject\t%s", res.Subject.Digest)
				}
				w.line("record\t%s", res.Record)
				for _, p := range res.Payloads {
					w.line("payload\t%s\t%s\t%d bytes\t%s", p.Digest, p.MediaType, p.Size, p.Annotations[ocispec.AnnotationTitle])
				}
				for _, r := range refs {
					w.line("referrer\t%s\t%s", r.Digest, r.ArtifactType)
				}
			})
		},
	}
}
