package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/web"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/urfave/cli/v2"
)

// signatureFields are the summary lines of an artifact's signatures against
// the trusted keys: who signed, and a warning when no trusted key did.
func signatureFields(ctx context.Context, l *cas.Layout, desc ociDesc, tr *trustOptions) ([]web.Field, error) {
	keys, err := tr.Load()
	if errors.Is(err, errNoKey) {
		keys, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	checks, err := bundle.CheckSignatures(ctx, l, desc, keys)
	if err != nil {
		return nil, err
	}
	var signers []string
	for _, c := range checks {
		switch {
		case c.Trusted:
			signers = append(signers, short(c.Signer)+" (trusted)")
		case c.Signer != "" && !c.Malformed:
			signers = append(signers, short(c.Signer)+" (not a key you trust)")
		default:
			signers = append(signers, short(c.Signature.String())+" (invalid: "+c.Reason+")")
		}
	}
	var out []web.Field
	switch {
	case len(checks) == 0:
		out = append(out, web.Field{Name: "warning", Value: "unsigned: what the record says is only a claim"})
	case len(keys) == 0:
		out = append(out, web.Field{Name: "warning", Value: "no trusted key named (--pub or " + envPub + "): no signature is checked against one"})
	case len(bundle.TrustedSigners(checks)) == 0:
		out = append(out, web.Field{Name: "warning", Value: "untrusted: no key you trust signed it, so what it says is only a claim"})
	}
	if len(signers) > 0 {
		out = append(out, web.Field{Name: "signed by", Value: strings.Join(signers, ", ")})
	}
	return out, nil
}

type inspectResult struct {
	Digest    string           `json:"digest"`
	Kind      string           `json:"kind"`
	Subject   *cas.Descriptor  `json:"subject,omitempty"`
	Fields    []web.Field      `json:"fields"`
	Record    json.RawMessage  `json:"record"`
	Payloads  []cas.Descriptor `json:"payloads"`
	Referrers []cas.Descriptor `json:"referrers"`
}

func inspectCommand(a *appEnv) *cli.Command {
	st, out, tr := &storeOptions{}, &outputOptions{}, &trustOptions{}
	return &cli.Command{
		Name:  "inspect",
		Usage: "show an artifact: its record summarized by kind (a verdict: status, reason, scores, audit, mismatches, inputs), payload layers and referrers",
		Description: "The text output summarizes the record; --record prints the record's canonical JSON bytes\n" +
			"and --json the whole result, record included. Signatures are checked against the keys you trust\n" +
			"(--pub or FEVAL_PUB, default: your own key's .pub); a verdict none of them signed is marked\n" +
			"untrusted next to its status, as are an infra_error and an unverified beacon.",
		ArgsUsage: "DIGEST|PREFIX|TAG",
		Flags: flagSet([]cli.Flag{
			&cli.BoolFlag{Name: "record", Usage: "print only the record's canonical JSON bytes (the full record)"},
		}, st.Flags(), tr.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			out.Parse(c)
			tr.Parse(c)
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
			if desc.ArtifactType == bundle.ArtifactTypeModelManifest {
				if c.Bool("record") {
					return usagef("%s is a model artifact, which has no record: inspect it without --record", desc.Digest)
				}
				return a.inspectModel(c.Context, out, l, desc, tr)
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
			res := inspectResult{Digest: desc.Digest.String(), Kind: art.Kind,
				Fields: web.Summarize(art.Kind, art.Record), Record: art.Record,
				Payloads: cas.Descriptors(art.Payloads), Referrers: cas.Descriptors(refs)}
			if s := art.Manifest.Subject; s != nil {
				res.Subject = (*cas.Descriptor)(s)
			}
			trust, err := signatureFields(c.Context, l, desc, tr)
			if err != nil {
				return err
			}
			at := 0
			if art.Kind == protocol.KindVerdict {
				at = web.StatusEnd(res.Fields)
			}
			res.Fields = append(res.Fields[:at], append(trust, res.Fields[at:]...)...)
			if res.Payloads == nil {
				res.Payloads = []cas.Descriptor{}
			}
			return a.render(out, res, func(w *tabw) {
				w.line("digest\t%s", res.Digest)
				w.line("kind\t%s", res.Kind)
				if res.Subject != nil {
					w.line("subject\t%s", res.Subject.Digest)
				}
				for _, f := range res.Fields {
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
