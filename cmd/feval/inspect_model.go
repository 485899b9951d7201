package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/model"
	"github.com/feval/feval/web"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// modelKind is the feval kind a model artifact was packed as (its
// dev.feval.kind annotation), "" when its manifest cannot be read.
func modelKind(ctx context.Context, l *cas.Layout, desc ocispec.Descriptor) string {
	b, err := cas.ReadAll(ctx, l, desc, cas.MaxManifestSize)
	if err != nil {
		return ""
	}
	var m ocispec.Manifest
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	return m.Annotations[bundle.AnnotationModelKind]
}

// inspectModel describes a model artifact: its files, its signatures, and
// whether it is a rollouts model validators accept (model.LoadArtifact, which
// reads and checks the whole model), with the reason when not.
func (a *appEnv) inspectModel(ctx context.Context, out *outputOptions, l *cas.Layout, desc ocispec.Descriptor, tr *trustOptions) error {
	files, err := bundle.LoadModel(ctx, l, desc)
	if err != nil {
		return err
	}
	refs, err := l.Referrers(ctx, desc, "")
	if err != nil {
		return err
	}
	var total int64
	res := inspectResult{Digest: desc.Digest.String(), Kind: modelKind(ctx, l, desc), Payloads: []cas.Descriptor{}, Referrers: cas.Descriptors(refs)}
	for _, f := range files {
		total += f.Layer.Size
		res.Payloads = append(res.Payloads, cas.Descriptor(f.Layer))
	}
	res.Fields = append(res.Fields, web.Field{Name: "files", Value: fmt.Sprintf("%d, %s", len(files), humanBytes(total))})
	m, err := model.LoadArtifact(ctx, l, desc, model.DefaultLimits)
	switch {
	case errors.Is(err, model.ErrModel):
		res.Fields = append(res.Fields, web.Field{Name: "rollouts model", Value: "refused: " + strings.TrimPrefix(err.Error(), model.ErrModel.Error()+": ")})
	case err != nil:
		return err
	default:
		res.Fields = append(res.Fields, web.Field{Name: "rollouts model", Value: "accepted: " + describeModel(m.Config)})
	}
	trust, err := signatureFields(ctx, l, desc, tr)
	if err != nil {
		return err
	}
	res.Fields = append(trust, res.Fields...)
	return a.render(out, res, func(w *tabw) {
		w.line("digest\t%s", res.Digest)
		w.line("kind\t%s (a ModelPack model)", res.Kind)
		for _, f := range res.Fields {
			w.line("%s\t%s", f.Name, f.Value)
		}
		for _, p := range res.Payloads {
			w.line("file\t%s\t%d bytes\t%s", p.Digest, p.Size, p.Annotations[bundle.AnnotationModelFilepath])
		}
		for _, r := range refs {
			w.line("referrer\t%s\t%s", r.Digest, r.ArtifactType)
		}
	})
}

// describeModel says what a checked configuration is, in one line.
func describeModel(c model.Config) string {
	tied := "untied"
	if c.TieEmbeddings {
		tied = "tied"
	}
	return fmt.Sprintf("qwen3, %d layers, hidden %d, %d heads (%d key/value) of %d, intermediate %d, vocabulary %d, %s embeddings",
		c.Layers, c.HiddenSize, c.Heads, c.KVHeads, c.HeadDim, c.IntermediateSize, c.VocabSize, tied)
}
