package cas

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Node is what feval needs to know of a manifest to walk the graph: the
// descriptors it points down to and the subject it points up to.
type Node struct {
	ArtifactType string
	Children     []ocispec.Descriptor // config, layers, or index entries
	Subject      *ocispec.Descriptor
}

// ParseNode decodes a manifest or index and validates every descriptor in it
// (ValidateDescriptor): a manifest with a missing config, a malformed layer or
// subject digest is ErrInvalid. Content that is not a manifest has no children.
func ParseNode(desc ocispec.Descriptor, b []byte) (Node, error) {
	n, err := parseNode(desc, b)
	if err != nil {
		return Node{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	for i, c := range n.Children {
		if err := ValidateDescriptor(c); err != nil {
			return Node{}, fmt.Errorf("manifest %s, child %d: %w", desc.Digest, i, err)
		}
	}
	if n.Subject != nil {
		if err := ValidateDescriptor(*n.Subject); err != nil {
			return Node{}, fmt.Errorf("manifest %s, subject: %w", desc.Digest, err)
		}
	}
	return n, nil
}

func parseNode(desc ocispec.Descriptor, b []byte) (Node, error) {
	switch desc.MediaType {
	case ocispec.MediaTypeImageManifest, "application/vnd.docker.distribution.manifest.v2+json":
		var m ocispec.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			return Node{}, fmt.Errorf("manifest %s: %w", desc.Digest, err)
		}
		n := Node{ArtifactType: m.ArtifactType, Subject: m.Subject}
		if n.ArtifactType == "" {
			n.ArtifactType = m.Config.MediaType
		}
		n.Children = append(n.Children, m.Config)
		n.Children = append(n.Children, m.Layers...)
		return n, nil
	case ocispec.MediaTypeImageIndex, "application/vnd.docker.distribution.manifest.list.v2+json":
		var ix ocispec.Index
		if err := json.Unmarshal(b, &ix); err != nil {
			return Node{}, fmt.Errorf("index %s: %w", desc.Digest, err)
		}
		return Node{ArtifactType: ix.ArtifactType, Children: ix.Manifests, Subject: ix.Subject}, nil
	}
	return Node{}, nil
}

// FetchNode reads and parses a manifest, bounded by MaxManifestSize.
func FetchNode(ctx context.Context, s Store, desc ocispec.Descriptor) (Node, []byte, error) {
	b, err := ReadAll(ctx, s, desc, MaxManifestSize)
	if err != nil {
		return Node{}, nil, err
	}
	n, err := ParseNode(desc, b)
	return n, b, err
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
