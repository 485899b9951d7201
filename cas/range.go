package cas

import (
	"bytes"
	"context"
	"fmt"
	"io"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// BlobReaderAt is a blob opened for reads by byte range.
type BlobReaderAt interface {
	io.ReaderAt
	io.Closer
	// Size is the blob's length, equal to its descriptor's size.
	Size() int64
}

// OpenAt opens a blob for reads by byte range. Unlike Fetch it does NOT
// verify the bytes against desc's digest, which would mean reading all of
// them: a caller reads ranges and checks each against a hash it already
// trusts (a rollouts rows index, docs/PROTOCOL.md §6). From a local layout
// the blob file is read in place (it must have desc's size); from any other
// store the whole blob is fetched and verified, refusing blobs above limit.
func OpenAt(ctx context.Context, s Store, desc ocispec.Descriptor, limit int64) (BlobReaderAt, error) {
	if l, ok := s.(*Layout); ok {
		return l.openAt(desc)
	}
	b, err := ReadAll(ctx, s, desc, limit)
	if err != nil {
		return nil, err
	}
	return memBlob{bytes.NewReader(b)}, nil
}

type memBlob struct{ *bytes.Reader }

func (memBlob) Close() error { return nil }

type fileBlob struct {
	io.ReaderAt
	io.Closer
	size int64
}

func (f fileBlob) Size() int64 { return f.size }

func (l *Layout) openAt(desc ocispec.Descriptor) (BlobReaderAt, error) {
	if err := checkDigest(desc); err != nil {
		return nil, err
	}
	f, err := openRegular(l.blobPath(desc.Digest))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.Size() != desc.Size {
		f.Close()
		return nil, fmt.Errorf("blob %s is %d bytes, its descriptor says %d: %w", desc.Digest, fi.Size(), desc.Size, ErrSizeMismatch)
	}
	return fileBlob{ReaderAt: f, Closer: f, size: fi.Size()}, nil
}
