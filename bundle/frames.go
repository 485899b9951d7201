package bundle

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// TreeFrameSize is the uncompressed size of one zstd frame of a tree layer
// (docs/FORMAT.md, "Tree layer encoding 2"): the tar stream is cut into pieces
// of exactly this many bytes, the last piece holding the rest, and each piece
// is compressed on its own, as one frame, by NewZstdWriter. The frames are
// independent, so they are compressed concurrently, and the layer is their
// concatenation in stream order: a standard zstd stream whose bytes do not
// depend on how many goroutines made it. A stream of at most one frame is
// byte for byte what encoding 1 (one streaming frame) wrote.
const TreeFrameSize = 4 << 20

// maxFrameWorkers bounds the goroutines compressing frames, and with them the
// memory a pack holds: an encoder each (about 20 MiB with its 8 MiB window)
// and (workers+2) frames of input and of output; about 200 MiB at 4. More
// would not help: at about 250 MB/s per encoder, four outrun the one goroutine
// that reads, tars and hashes the tree (about 1 GB/s).
const maxFrameWorkers = 4

// frameWorkers is how many frames are compressed at once: GOMAXPROCS, at most
// maxFrameWorkers.
func frameWorkers() int { return min(max(1, runtime.GOMAXPROCS(0)), maxFrameWorkers) }

// frameJob is one frame on its way from the producer to the writer.
type frameJob struct {
	in   []byte
	out  []byte
	err  error
	done chan struct{} // closed once out (or err) is set
}

// frameWriter is the producer's side of a framed compression: Write cuts the
// stream into frames of size bytes and hands each to the encoders. The
// producer calls Write and then closeWrite once; the consumer calls drainTo
// once. At most workers+2 frames are in flight; if drainTo fails it stops the
// producer, whose next Write fails, and waits for it and the encoders.
type frameWriter struct {
	size  int
	free  chan *frameJob // frames not in flight
	work  chan *frameJob // to the encoders
	order chan *frameJob // to drainTo, in stream order
	stop  chan struct{}
	done  chan error // the producer's error, once
	cur   *frameJob
	wg    sync.WaitGroup // the encoders
}

// newFrameWriter starts workers encoders, each with its own encoder from
// NewZstdWriter.
func newFrameWriter(size, workers int) (*frameWriter, error) {
	n := workers + 2
	f := &frameWriter{size: size, free: make(chan *frameJob, n), work: make(chan *frameJob, n),
		order: make(chan *frameJob, n), stop: make(chan struct{}), done: make(chan error, 1)}
	encs := make([]*zstd.Encoder, workers)
	for i := range encs {
		e, err := NewZstdWriter(nil)
		if err != nil {
			return nil, err
		}
		encs[i] = e
	}
	for range n {
		f.free <- &frameJob{in: make([]byte, 0, size)}
	}
	for _, e := range encs {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for j := range f.work {
				j.out, j.err = encodeFrame(e, j.in, j.out[:0])
				close(j.done)
			}
		}()
	}
	return f, nil
}

// encodeFrame compresses in as one frame with the streaming encoder e,
// appending to out. Reset makes e a fresh encoder: the frame does not depend
// on what e encoded before.
func encodeFrame(e *zstd.Encoder, in, out []byte) ([]byte, error) {
	b := bytes.NewBuffer(out)
	e.Reset(b)
	if _, err := e.Write(in); err != nil {
		return nil, err
	}
	if err := e.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

var errFramesStopped = errors.New("frame writer stopped")

func (f *frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if f.cur == nil {
			select {
			case <-f.stop:
				return n, errFramesStopped
			default:
			}
			select {
			case f.cur = <-f.free:
			case <-f.stop:
				return n, errFramesStopped
			}
		}
		k := copy(f.cur.in[len(f.cur.in):f.size], p)
		f.cur.in = f.cur.in[:len(f.cur.in)+k]
		p, n = p[k:], n+k
		if len(f.cur.in) == f.size {
			f.dispatch()
		}
	}
	return n, nil
}

// dispatch hands the current frame to the encoders and to the writer; the
// channels hold every frame in flight, so it never blocks.
func (f *frameWriter) dispatch() {
	f.cur.done = make(chan struct{})
	f.work <- f.cur
	f.order <- f.cur
	f.cur = nil
}

// closeWrite ends the stream: the last, partial frame is dispatched unless
// err says the stream is broken.
func (f *frameWriter) closeWrite(err error) {
	if err == nil && f.cur != nil && len(f.cur.in) > 0 {
		f.dispatch()
	}
	f.cur = nil
	close(f.work)
	close(f.order)
	f.done <- err
}

// drainTo writes the compressed frames to w in stream order and returns the
// first error of the producer, an encoder or w. When it returns, no goroutine
// of f is running.
func (f *frameWriter) drainTo(w io.Writer) error {
	var err error
	for j := range f.order {
		<-j.done
		if err == nil {
			err = j.err
			if err == nil {
				_, err = w.Write(j.out)
			}
			if err != nil {
				close(f.stop)
			}
		}
		j.in = j.in[:0]
		f.free <- j
	}
	perr := <-f.done
	f.wg.Wait()
	if err != nil {
		return err
	}
	return perr
}
