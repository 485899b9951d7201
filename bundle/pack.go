package bundle

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// ContentRecord is the record of an artifact made by PackPath: what the payload
// is, identified by its uncompressed digest.
type ContentRecord struct {
	Content Content `json:"content"`
}

// Content describes a packed file or tree.
type Content struct {
	Type   string        `json:"type"` // "file" or "tree"
	Name   string        `json:"name,omitempty"`
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
}

// PackOptions controls PackPath.
type PackOptions struct {
	Kind    string
	Created string
	// Progress receives the bytes packed; nil means the context's
	// (cas.WithProgress).
	Progress cas.Progress
	// Subject, when set, is the artifact's subject: a manifest already in
	// the layout that the packed artifact is about (a rollouts submission's
	// model). A copy with CopyOptions.Subjects brings it along.
	Subject *ocispec.Descriptor
}

// Packed is the outcome of PackPath.
type Packed struct {
	Artifact  cas.Descriptor `json:"artifact"`
	Signature cas.Descriptor `json:"signature_artifact"`
	Content   Content        `json:"payload"`
}

// PackPath packs a file or a directory into a signed artifact of the given kind in
// the layout. A directory becomes one tree layer and is identified by content
// alone; a file keeps its base name (the title oras uses when pulling it).
func PackPath(ctx context.Context, l *cas.Layout, s *Signer, path string, opts PackOptions) (Packed, error) {
	return PackPathSigner(ctx, l, func() (*Signer, error) { return s, nil }, path, opts)
}

// PackPathSigner is PackPath with the signer supplied by signer, which is
// called once, after the payload is packed: a caller can decrypt its key while
// the payload is being packed. The payload is staged (cas.Layout.StageBlob) and
// published only once the artifact is signed, so a signer that fails (a wrong
// password) leaves nothing in the store.
func PackPathSigner(ctx context.Context, l *cas.Layout, signer func() (*Signer, error), path string, opts PackOptions) (Packed, error) {
	if !ValidKind(opts.Kind) {
		return Packed{}, fmt.Errorf("kind %q: want lower-case letters, digits and '-'", opts.Kind)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Packed{}, err
	}
	prog := opts.Progress
	if prog == nil {
		prog = cas.ProgressFrom(ctx)
	}
	stage := &stager{l: l}
	defer stage.discard()
	var layer ocispec.Descriptor
	var c Content
	switch {
	case fi.IsDir():
		layer, err = PackTree(stage, path, prog)
		c.Type = "tree"
	case fi.Mode().IsRegular():
		layer, err = PackFile(stage, path, prog)
		c.Type, c.Name = "file", filepath.Base(path)
	default:
		return Packed{}, fmt.Errorf("%s: %w: only files and directories can be packed", path, ErrUnsafeEntry)
	}
	if err != nil {
		return Packed{}, err
	}
	s, err := signer()
	if err != nil {
		return Packed{}, err
	}
	c.Digest = digest.Digest(layer.Annotations[AnnotationContentDigest])
	fmt.Sscan(layer.Annotations[AnnotationContentSize], &c.Size)
	a := Artifact{Kind: opts.Kind, Record: ContentRecord{Content: c}, Layers: []ocispec.Descriptor{layer}, Subject: opts.Subject, Created: opts.Created}
	return stage.publishSigned(ctx, s, a, c)
}

// stager is a BlobWriter that stages blobs in a layout until publish, with
// direct I/O (cas.Layout.StageBlobDirect): a packed payload is not read
// again by the pack, so it need not pass through the page cache.
type stager struct {
	l      *cas.Layout
	staged []*cas.Staged
}

func (s *stager) WriteBlob(mediaType string, fill func(io.Writer) error) (ocispec.Descriptor, error) {
	st, err := s.l.StageBlobDirect(mediaType, fill)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	s.staged = append(s.staged, st)
	return st.Desc, nil
}

func (s *stager) publish() error {
	for _, st := range s.staged {
		if err := st.Publish(); err != nil {
			return err
		}
	}
	s.staged = nil
	return nil
}

// publishSigned signs the artifact a (whose payload layers are staged),
// then publishes the staged blobs and writes a and its signature: nothing
// reaches the store unless signing succeeded.
func (s *stager) publishSigned(ctx context.Context, signer *Signer, a Artifact, c Content) (Packed, error) {
	enc, err := Encode(a)
	if err != nil {
		return Packed{}, err
	}
	sb, err := signer.SignatureBytes(enc.Desc)
	if err != nil {
		return Packed{}, err
	}
	// Signed: from here on the store receives the artifact.
	if err := s.publish(); err != nil {
		return Packed{}, err
	}
	desc, err := Write(ctx, s.l, a)
	if err != nil {
		return Packed{}, err
	}
	sig, err := pushSignature(ctx, s.l, sb, desc)
	if err != nil {
		return Packed{}, err
	}
	return Packed{Artifact: cas.Descriptor(desc), Signature: cas.Descriptor(sig), Content: c}, nil
}

func (s *stager) discard() {
	for _, st := range s.staged {
		st.Discard()
	}
	s.staged = nil
}

// WriteSigned writes an artifact and signs it: the one way feval records anything.
func WriteSigned(ctx context.Context, st cas.Store, s *Signer, a Artifact) (ocispec.Descriptor, error) {
	desc, err := Write(ctx, st, a)
	if err != nil {
		return desc, err
	}
	if _, err := Sign(ctx, st, s, desc); err != nil {
		return desc, fmt.Errorf("signing %s: %w", desc.Digest, err)
	}
	return desc, nil
}
