package main

import (
	"fmt"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	"github.com/urfave/cli/v2"
)

type transferResult struct {
	Digest    digest.Digest `json:"digest"`
	Reference string        `json:"reference"`
	Manifests int           `json:"manifests"`
	Blobs     int           `json:"blobs"`
	Bytes     int64         `json:"bytes"`
}

func pushCommand(a *appEnv) *cli.Command {
	st, rem, out := &storeOptions{}, &remoteOptions{}, &outputOptions{}
	return &cli.Command{
		Name:      "push",
		Usage:     "copy an artifact with its referrers, and its subjects with their signatures, to a registry",
		ArgsUsage: "DIGEST|PREFIX|TAG REF (REF = host[:port]/repository[:tag])",
		Flags:     flagSet(st.Flags(), rem.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			if err := args(c, 2, "DIGEST and REF"); err != nil {
				return err
			}
			l, err := st.Open()
			if err != nil {
				return err
			}
			desc, err := cas.ResolveRef(c.Context, l, c.Args().Get(0))
			if err != nil {
				return err
			}
			r, tag, err := rem.Open(c.Args().Get(1))
			if err != nil {
				return err
			}
			if _, err := digest.Parse(tag); err == nil {
				return usagef("REF %s names a digest: give a repository, optionally with a tag", c.Args().Get(1))
			}
			res, err := cas.Copy(c.Context, l, r, desc, cas.CopyOptions{Referrers: true, Subjects: true, Tag: tag, Progress: a.progress(out, "push")})
			if err != nil {
				return fmt.Errorf("pushing %s to %s: %w", desc.Digest, r.Name(), err)
			}
			tr := transferResult{desc.Digest, c.Args().Get(1), len(res.Manifests), res.Blobs, res.Bytes}
			return a.render(out, tr, func(w *tabw) {
				w.line("pushed %s to %s (%d manifests, %d blobs, %s sent)", tr.Digest, tr.Reference, tr.Manifests, tr.Blobs, humanBytes(tr.Bytes))
			})
		},
	}
}

func pullCommand(a *appEnv) *cli.Command {
	st, rem, out := &storeOptions{}, &remoteOptions{}, &outputOptions{}
	return &cli.Command{
		Name:      "pull",
		Usage:     "copy an artifact with its subjects, signatures and other referrers from a registry into the local store",
		ArgsUsage: "REF (host[:port]/repository:tag or @digest)",
		Flags: flagSet([]cli.Flag{
			&cli.StringFlag{Name: "tag", Usage: "also name the pulled artifact with this local tag"},
		}, st.Flags(), rem.Flags(), out.Flags()),
		Action: func(c *cli.Context) error {
			st.Parse(c)
			rem.Parse(c)
			out.Parse(c)
			if err := args(c, 1, "one REF"); err != nil {
				return err
			}
			r, ref, err := rem.Open(c.Args().First())
			if err != nil {
				return err
			}
			if ref == "" {
				return usagef("REF %s names no tag or digest: add :tag or @sha256:...", c.Args().First())
			}
			l, err := st.Open()
			if err != nil {
				return err
			}
			r.WarmReferrers(c.Context) // alongside the resolve
			desc, err := r.Resolve(c.Context, ref)
			if err != nil {
				return err
			}
			res, err := cas.Copy(c.Context, r, l, desc, cas.CopyOptions{Referrers: true, Subjects: true, Siblings: true, Progress: a.progress(out, "pull")})
			if err != nil {
				return fmt.Errorf("pulling %s: %w", c.Args().First(), err)
			}
			if t := c.String("tag"); t != "" {
				if err := l.Tag(c.Context, desc, t); err != nil {
					return err
				}
			}
			if err := l.Close(); err != nil {
				return err
			}
			tr := transferResult{desc.Digest, c.Args().First(), len(res.Manifests), res.Blobs, res.Bytes}
			return a.render(out, tr, func(w *tabw) { w.line("%s", tr.Digest) })
		},
	}
}
