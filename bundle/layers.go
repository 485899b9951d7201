package bundle

import (
	"context"
	"fmt"

	"github.com/feval/feval/cas"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Media types of the layers of a rollouts submission in format 3
// (docs/FORMAT.md "Rollouts submissions"). Both are raw: the layer's bytes
// are its content, so its content digest is its digest.
const (
	// MediaTypeRowsIndex is the rows index (gate.ParseRowsIndex).
	MediaTypeRowsIndex = "application/vnd.feval.rollouts.index.v1"
	// MediaTypeRows is the rows file, JSON Lines, uncompressed so that
	// rows are read by byte range.
	MediaTypeRows = "application/vnd.feval.rollouts.rows.v1+jsonl"
)

// IsRaw reports whether a payload media type stores its content unchanged.
func IsRaw(mediaType string) bool {
	switch mediaType {
	case MediaTypeFile, MediaTypeRowsIndex, MediaTypeRows:
		return true
	}
	return false
}

// PackLayersSigner writes a signed artifact of kind opts.Kind whose payload
// layers build writes through w, with the record {"content": c}, c being what
// build returns (the payload's identity). Like PackPathSigner, layers are
// staged and published only once signer has given a signer and the artifact
// is signed, so a failure anywhere leaves nothing in the store.
func PackLayersSigner(ctx context.Context, l *cas.Layout, signer func() (*Signer, error), opts PackOptions,
	build func(w BlobWriter) ([]ocispec.Descriptor, Content, error)) (Packed, error) {
	if !ValidKind(opts.Kind) {
		return Packed{}, fmt.Errorf("kind %q: want lower-case letters, digits and '-'", opts.Kind)
	}
	stage := &stager{l: l}
	defer stage.discard()
	layers, c, err := build(stage)
	if err != nil {
		return Packed{}, err
	}
	s, err := signer()
	if err != nil {
		return Packed{}, err
	}
	a := Artifact{Kind: opts.Kind, Record: ContentRecord{Content: c}, Layers: layers, Subject: opts.Subject, Created: opts.Created}
	return stage.publishSigned(ctx, s, a, c)
}
