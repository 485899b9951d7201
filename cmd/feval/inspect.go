package main

import (
	"encoding/json"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/web"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/urfave/cli/v2"
)

type inspectResult struct {
	Digest    string               `json:"digest"`
	Kind      string               `json:"kind"`
	Subject   *ocispec.Descriptor  `json:"subject,omitempty"`
	Summary   []web.Field          `json:"summary"`
	Record    json.RawMessage      `json:"record"`
	Payloads  []ocispec.Descriptor `json:"payloads"`
	Referrers []ocispec.Descriptor `json:"referrers"`
}

func inspectCommand(a *appEnv) *cli.Command {
	st, out := &storeOptions{}, &outputOptions{}
	return &cli.Command{
		Name:  "inspect",
		Usage: "show an artifact: its record summarized by kind (a verdict: status, reason, scores, audit, mismatches, inputs), payload layers and referrers",
		Description: "The text output summarizes the record; --record prints the record's canonical JSON bytes\n" +
			"and --json the whole result, record included.",
		ArgsUsage: "DIGEST|PREFIX|TAG",
		Flags: flagSet([]cli.Flag{
			&cli.BoolFlag{Name: "record", Usage: "print only the record's canonical JSON bytes (the full record)"},
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
				Summary: web.Summarize(art.Kind, art.Record), Record: art.Record, Payloads: art.Payloads, Referrers: refs}
			if res.Payloads == nil {
				res.Payloads = []ocispec.Descriptor{}
			}
			return a.render(out, res, func(w *tabw) {
				w.line("digest\t%s", res.Digest)
				w.line("kind\t%s", res.Kind)
				if res.Subject != nil {
					w.line("subject\t%s", res.Subject.Digest)
				}
				for _, f := range res.Summary {
					w.line("%s\t%s", f.Name, f.Value)
				}
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
