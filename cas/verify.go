package cas

import (
	"fmt"
	"hash"
	"io"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// verifyReader passes through exactly desc.Size bytes and fails at the end of the
// stream if the bytes do not hash to desc.Digest or if more bytes follow.
type verifyReader struct {
	rc   io.ReadCloser
	lim  io.Reader
	desc ocispec.Descriptor
	h    hash.Hash
	n    int64
	err  error
}

// NewVerifyReader wraps rc so that reading it verifies desc's size and digest. The
// final Read returns ErrSizeMismatch or ErrDigestMismatch instead of io.EOF when the
// content does not match; a caller that reads to EOF without error has the named
// content and nothing else.
func NewVerifyReader(rc io.ReadCloser, desc ocispec.Descriptor) (io.ReadCloser, error) {
	if err := desc.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadReference, err)
	}
	if desc.Digest.Algorithm() != digest.SHA256 {
		return nil, fmt.Errorf("%s: only sha256 digests are accepted: %w", desc.Digest, ErrBadReference)
	}
	return &verifyReader{rc: rc, lim: io.LimitReader(rc, desc.Size), desc: desc, h: desc.Digest.Algorithm().Hash()}, nil
}

func (v *verifyReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.lim.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if err == io.EOF {
		err = v.finish()
	} else if err != nil {
		v.err = err
	}
	return n, err
}

func (v *verifyReader) finish() error {
	switch {
	case v.n != v.desc.Size:
		v.err = fmt.Errorf("%s: read %d of %d bytes: %w", v.desc.Digest, v.n, v.desc.Size, ErrSizeMismatch)
	case trailing(v.rc):
		v.err = fmt.Errorf("%s: more than %d bytes: %w", v.desc.Digest, v.desc.Size, ErrSizeMismatch)
	case digest.NewDigestFromBytes(v.desc.Digest.Algorithm(), v.h.Sum(nil)) != v.desc.Digest:
		v.err = fmt.Errorf("%s: content hashes to %s: %w", v.desc.Digest,
			digest.NewDigestFromBytes(v.desc.Digest.Algorithm(), v.h.Sum(nil)), ErrDigestMismatch)
	default:
		v.err = io.EOF
	}
	return v.err
}

func trailing(r io.Reader) bool {
	var b [1]byte
	n, _ := io.ReadFull(r, b[:])
	return n > 0
}

func (v *verifyReader) Close() error { return v.rc.Close() }

// verifying is implemented by readers that already verify a descriptor as they
// are read, so a store receiving one need not hash the bytes a second time.
type verifying interface{ verifies() ocispec.Descriptor }

func (v *verifyReader) verifies() ocispec.Descriptor { return v.desc }

// verified wraps r in a verifying reader for desc unless r already verifies
// exactly desc.
func verified(r io.Reader, desc ocispec.Descriptor) (io.Reader, error) {
	if v, ok := r.(verifying); ok {
		if got := v.verifies(); got.Digest == desc.Digest && got.Size == desc.Size {
			return r, nil
		}
	}
	return NewVerifyReader(io.NopCloser(r), desc)
}
