package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/urfave/cli/v2"
)

func packCommand(a *appEnv) *cli.Command {
	st, k, out := &storeOptions{}, &keyOptions{}, &outputOptions{}
	flags := []cli.Flag{
		&cli.StringFlag{Name: "kind", Usage: "artifact kind (task, submission, trace, ...); required"},
		&cli.StringFlag{Name: "tag", Usage: "also name the artifact with this tag"},
		&cli.BoolFlag{Name: "model", Usage: "store a directory as a model: one uncompressed layer per file, CNCF ModelPack media types (docs/FORMAT.md)"},
	}
	return &cli.Command{
		Name:      "pack",
		Usage:     "pack a file or directory into a signed artifact in the local store and print its digest",
		ArgsUsage: "PATH",
		Flags:     flagSet(flags, st.Flags(), k.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			k.Parse(c)
			out.Parse(c)
			if err := args(c, 1, "one PATH"); err != nil {
				return err
			}
			kind, tag := c.String("kind"), c.String("tag")
			if kind == "" {
				return usagef("--kind is required, e.g. 'feval pack --kind submission %s'", c.Args().First())
			}
			if !bundle.ValidKind(kind) {
				return usagef("--kind %q: want lower-case letters, digits and '-' (e.g. submission)", kind)
			}
			if tag != "" && !cas.ValidTag(tag) {
				return usagef("--tag %q: want letters, digits, '_', '.', '-'", tag)
			}
			res, err := runPack(c.Context, a, st, k, c.Args().First(), kind, tag, c.Bool("model"), a.progress(out, "pack"))
			if err != nil {
				return err
			}
			return a.render(out, res, func(w *tabw) { w.line("%s", res.Artifact.Digest) })
		},
	}
}

func runPack(ctx context.Context, a *appEnv, st *storeOptions, k *keyOptions, path, kind, tag string, model bool, prog cas.Progress) (bundle.Packed, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return bundle.Packed{}, fmt.Errorf("%s does not exist: %w", path, fs.ErrNotExist)
	}
	ts, err := created()
	if err != nil {
		return bundle.Packed{}, err
	}
	l, err := st.Open()
	if err != nil {
		return bundle.Packed{}, err
	}
	// The key is decrypted while the payload is packed; the payload is published
	// only once the artifact is signed.
	signer, err := k.SignerAsync(a)
	if err != nil {
		return bundle.Packed{}, err
	}
	pack := bundle.PackPathSigner
	if kind == protocol.KindSubmission {
		pack = protocol.PackSubmissionSigner // rollouts submissions in format 3
	}
	if model {
		if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
			return bundle.Packed{}, usagef("--model packs a directory; %s is a file", path)
		}
		pack = bundle.PackModel
	}
	res, err := pack(ctx, l, signer, path, bundle.PackOptions{Kind: kind, Created: ts, Progress: prog})
	if err != nil {
		return res, err
	}
	if tag != "" {
		if err := l.Tag(ctx, res.Artifact.OCI(), tag); err != nil {
			return res, err
		}
	}
	return res, l.Close()
}
