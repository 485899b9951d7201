package cas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
)

// MaxManifestSize bounds every manifest and index feval will read. Registries
// commonly refuse manifests above 4 MiB; feval's own are a few KiB.
const MaxManifestSize = 4 << 20

var (
	// ErrNotFound reports a digest or tag the store does not hold. It matches
	// oras-go's errdef.ErrNotFound so remote and local errors test alike.
	ErrNotFound = errdef.ErrNotFound
	// ErrNoStore reports a directory that is not an initialised store.
	ErrNoStore = errors.New("no feval store")
	// ErrDigestMismatch reports content whose digest differs from its name.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrSizeMismatch reports content whose length differs from its descriptor.
	ErrSizeMismatch = errors.New("size mismatch")
	// ErrTooLarge reports a manifest or record above its size limit.
	ErrTooLarge = errors.New("content exceeds size limit")
	// ErrBadReference reports a tag, digest or registry reference that does not parse.
	ErrBadReference = errors.New("malformed reference")
	// ErrUnreachable reports a registry that could not be contacted.
	ErrUnreachable = errors.New("registry unreachable")
	// ErrInvalid reports store or registry content that is not what it must be: a
	// descriptor with a malformed digest, a negative size or no media type, a
	// manifest that does not decode, a blob that is not a regular file.
	ErrInvalid = errors.New("invalid content")
)

// ValidateDescriptor checks what feval relies on in a descriptor read from
// untrusted content before it is used: a well-formed sha256 digest, a size that is
// not negative, and a media type.
func ValidateDescriptor(d ocispec.Descriptor) error {
	if err := d.Digest.Validate(); err != nil {
		return fmt.Errorf("descriptor digest %q: %v: %w", d.Digest, err, ErrInvalid)
	}
	if d.Digest.Algorithm() != digest.SHA256 {
		return fmt.Errorf("descriptor digest %s: only sha256 is accepted: %w", d.Digest, ErrInvalid)
	}
	if d.Size < 0 {
		return fmt.Errorf("descriptor %s: size %d: %w", d.Digest, d.Size, ErrInvalid)
	}
	if d.MediaType == "" {
		return fmt.Errorf("descriptor %s: no media type: %w", d.Digest, ErrInvalid)
	}
	return nil
}

// AmbiguousError reports a digest prefix that matches more than one manifest.
type AmbiguousError struct {
	Prefix  string
	Matches []digest.Digest
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("digest prefix %s is ambiguous: it matches %d manifests (%s, ...); give more digits",
		e.Prefix, len(e.Matches), e.Matches[0])
}

// Store is a content-addressed store of OCI content.
type Store interface {
	// Fetch returns a reader of the content named by desc that fails rather than
	// deliver bytes whose digest or length differs from desc.
	Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error)
	// Push stores content that must match desc exactly.
	Push(ctx context.Context, desc ocispec.Descriptor, r io.Reader) error
	// Exists reports whether the store holds desc.
	Exists(ctx context.Context, desc ocispec.Descriptor) (bool, error)
	// Resolve returns the manifest descriptor a tag or a full digest names.
	Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error)
	// Tag points a tag at a manifest already in the store.
	Tag(ctx context.Context, desc ocispec.Descriptor, tag string) error
	// Referrers lists the manifests whose subject is subject, optionally only those
	// of one artifact type, sorted by digest.
	Referrers(ctx context.Context, subject ocispec.Descriptor, artifactType string) ([]ocispec.Descriptor, error)
	// Close saves pending state and releases resources.
	Close() error
}

// IsManifest reports whether a media type names a manifest or an index.
func IsManifest(mediaType string) bool {
	switch mediaType {
	case ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageIndex,
		"application/vnd.docker.distribution.manifest.v2+json",
		"application/vnd.docker.distribution.manifest.list.v2+json":
		return true
	}
	return false
}

// ReadAll fetches desc fully, refusing content above limit bytes before reading it.
func ReadAll(ctx context.Context, s Store, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	if desc.Size > limit {
		return nil, fmt.Errorf("%s is %d bytes, over the %d byte limit: %w", desc.Digest, desc.Size, limit, ErrTooLarge)
	}
	rc, err := s.Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// ValidTag reports whether t is a valid OCI tag.
func ValidTag(t string) bool {
	if t == "" || len(t) > 128 {
		return false
	}
	for i, c := range t {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' ||
			i > 0 && (c == '.' || c == '-')
		if !ok {
			return false
		}
	}
	return true
}

// IsRemote reports whether a store address names a registry repository
// (host[:port]/path) rather than a local directory.
func IsRemote(addr string) bool {
	if strings.HasPrefix(addr, "/") || strings.HasPrefix(addr, ".") || strings.HasPrefix(addr, "~") {
		return false
	}
	host, _, ok := strings.Cut(addr, "/")
	if !ok {
		return false
	}
	return strings.Contains(host, ".") || strings.Contains(host, ":") || host == "localhost"
}
