package cas

import (
	"hash"
	"io"
	"os"
	"sync"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// directChunk is how many bytes a direct blob write hands the disk at once,
// and directAlign the alignment of its buffer, offsets and lengths.
const (
	directChunk = 8 << 20
	directAlign = 4096
)

// StageBlobDirect is StageBlob for large blobs: the bytes fill writes are
// hashed in a buffer of its own and written from that same buffer with direct
// I/O where the filesystem allows it (O_DIRECT on Linux), so they are neither
// copied into nor dirty in the page cache; elsewhere, or where the filesystem
// refuses direct I/O, they are written normally. The digest is always that of
// the bytes written. The writer given to fill implements io.ReaderFrom, which
// reads straight into that buffer (io.Copy uses it). The blob is durable when
// StageBlobDirect returns, as with StageBlob.
func (l *Layout) StageBlobDirect(mediaType string, fill func(w io.Writer) error) (*Staged, error) {
	tmp, fail, err := l.stageTemp()
	if err != nil {
		return nil, err
	}
	h := digest.SHA256.Digester()
	dw := newDirectWriter(tmp, h.Hash())
	defer dw.release()
	if err := fill(dw); err != nil {
		return fail(err)
	}
	if err := dw.close(); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	return &Staged{Desc: ocispec.Descriptor{MediaType: mediaType, Digest: h.Digest(), Size: dw.size}, l: l, tmp: tmp}, nil
}

// directWriter fills an aligned buffer, hashes each full buffer and writes it
// to f, with direct I/O while f accepts it.
type directWriter struct {
	f      *os.File
	h      hash.Hash
	direct bool
	buf    []byte // directChunk bytes, aligned to directAlign
	n      int    // bytes of buf filled
	size   int64  // bytes hashed and written
}

// directBufs keeps aligned buffers for reuse: a model of many small files
// would otherwise allocate and clear directChunk bytes per file.
var directBufs sync.Pool

func newDirectWriter(f *os.File, h hash.Hash) *directWriter {
	buf, ok := directBufs.Get().(*[]byte)
	if !ok {
		raw := make([]byte, directChunk+directAlign)
		off := 0
		if r := int(alignOf(raw)); r != 0 {
			off = directAlign - r
		}
		b := raw[off : off+directChunk]
		buf = &b
	}
	return &directWriter{f: f, h: h, direct: setDirect(f, true), buf: *buf}
}

// release gives the buffer back; w is not used after.
func (w *directWriter) release() {
	b := w.buf
	w.buf = nil
	directBufs.Put(&b)
}

func (w *directWriter) Write(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		k := copy(w.buf[w.n:], p)
		w.n += k
		p, total = p[k:], total+k
		if w.n == len(w.buf) {
			if err := w.flush(); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// ReadFrom reads r into the buffer until io.EOF, writing each full buffer.
func (w *directWriter) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for {
		k, err := r.Read(w.buf[w.n:])
		w.n += k
		total += int64(k)
		if w.n == len(w.buf) {
			if ferr := w.flush(); ferr != nil {
				return total, ferr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// flush hashes and writes the filled part of the buffer at the blob's end.
// Only the last flush (from close) may be of a length that is not a multiple
// of directAlign: its aligned part goes directly and the rest through the page
// cache.
func (w *directWriter) flush() error {
	b := w.buf[:w.n]
	w.h.Write(b)
	k := 0
	if w.direct {
		k = len(b) &^ (directAlign - 1)
		if k > 0 {
			if _, err := w.f.WriteAt(b[:k], w.size); err != nil {
				if !isInvalid(err) {
					return err
				}
				// The filesystem took the flag but refuses the write: write
				// this range again, and the rest, through the page cache.
				k = 0
			}
		}
		if k < len(b) {
			w.direct = false
			setDirect(w.f, false)
		}
	}
	if k < len(b) {
		if _, err := w.f.WriteAt(b[k:], w.size+int64(k)); err != nil {
			return err
		}
	}
	w.size += int64(w.n)
	w.n = 0
	return nil
}

func (w *directWriter) close() error {
	if w.n == 0 {
		return nil
	}
	return w.flush()
}
