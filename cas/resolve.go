package cas

import (
	"context"
	"fmt"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// MinPrefix is the fewest hex digits accepted as an abbreviated digest.
const MinPrefix = 12

// Lister is a store that can enumerate its manifests (the local layout can; a
// registry in general cannot).
type Lister interface {
	Manifests() []ocispec.Descriptor
}

// ResolveRef resolves what a user typed where a digest is expected: a full digest,
// an abbreviated one (at least MinPrefix hex digits, with or without "sha256:"), or
// a tag. An abbreviation that matches several manifests is an *AmbiguousError.
func ResolveRef(ctx context.Context, s Store, ref string) (ocispec.Descriptor, error) {
	if ref == "" {
		return ocispec.Descriptor{}, fmt.Errorf("empty reference: %w", ErrBadReference)
	}
	if _, err := digest.Parse(ref); err == nil {
		return s.Resolve(ctx, ref)
	}
	hex := strings.TrimPrefix(ref, "sha256:")
	if isHex(hex) && len(hex) >= MinPrefix && len(hex) < 64 {
		l, ok := s.(Lister)
		if !ok {
			return ocispec.Descriptor{}, fmt.Errorf("%s: abbreviated digests work only in a local store; give the full digest: %w", ref, ErrBadReference)
		}
		var matches []ocispec.Descriptor
		for _, m := range l.Manifests() {
			if strings.HasPrefix(m.Digest.Encoded(), hex) {
				matches = append(matches, m)
			}
		}
		switch len(matches) {
		case 0:
			return ocispec.Descriptor{}, fmt.Errorf("no manifest with digest prefix %s: %w", ref, ErrNotFound)
		case 1:
			return matches[0], nil
		}
		amb := &AmbiguousError{Prefix: ref}
		for _, m := range matches {
			amb.Matches = append(amb.Matches, m.Digest)
		}
		return ocispec.Descriptor{}, amb
	}
	if strings.HasPrefix(ref, "sha256:") || (isHex(ref) && len(ref) < MinPrefix && len(ref) >= 7) {
		return ocispec.Descriptor{}, fmt.Errorf("%s: a digest needs at least %d hex digits: %w", ref, MinPrefix, ErrBadReference)
	}
	if !ValidTag(ref) {
		return ocispec.Descriptor{}, fmt.Errorf("%q is neither a digest nor a tag: %w", ref, ErrBadReference)
	}
	return s.Resolve(ctx, ref)
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
