package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// unpackModel restores a model artifact (docs/FORMAT.md, "Model artifacts")
// into dir and reports whether desc was one; other artifacts are left to the
// tree and file path of 'feval unpack'.
func unpackModel(ctx context.Context, a *appEnv, s cas.Store, desc ocispec.Descriptor, dir string, out *outputOptions) (bool, error) {
	node, _, err := cas.FetchNode(ctx, s, desc)
	if err != nil || node.ArtifactType != bundle.ArtifactTypeModelManifest {
		return false, nil // the tree path reports the error
	}
	ctx = cas.WithProgress(ctx, a.progress(out, "unpack"))
	n, err := bundle.ExtractModel(ctx, s, desc, dir)
	switch {
	case errors.Is(err, bundle.ErrTargetNotEmpty):
		return true, usagef("%v: choose an empty or new directory", err)
	case errors.Is(err, bundle.ErrUnsafeEntry), errors.Is(err, bundle.ErrNotArtifact):
		return true, fmt.Errorf("%w: %w", bundle.ErrVerify, err)
	case err != nil:
		return true, err
	}
	files, _ := bundle.LoadModel(ctx, s, desc)
	var size int64
	for _, f := range files {
		size += f.Layer.Size
	}
	res := bundle.Extracted{Dir: dir, Content: bundle.Content{Type: "model", Digest: desc.Digest, Size: size}, Files: n}
	return true, a.render(out, res, func(w *tabw) {
		w.line("unpacked model %s (%d files, %s) into %s", desc.Digest, res.Files, humanBytes(size), res.Dir)
	})
}
