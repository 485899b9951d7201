package sandbox

import (
	"errors"
	"io"
	"os"
	"sync"
)

// chunks are drain's read buffers, reused: every run drains three streams.
var chunks = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

// capture keeps the first max bytes read from a stream and counts the rest.
type capture struct {
	max   int64
	buf   []byte
	total int64
}

// drain reads r to EOF. It never stops early, so a writer is never blocked or
// sent SIGPIPE because its output exceeded the bound.
func (c *capture) drain(r io.Reader) error {
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	chunk := *bp
	for {
		n, err := r.Read(chunk)
		_, _ = c.Write(chunk[:n])
		if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (c *capture) truncated() bool { return c.total > int64(len(c.buf)) }

// Write keeps what fits and counts everything; it never fails.
func (c *capture) Write(p []byte) (int, error) {
	if room := c.max - int64(len(c.buf)); room > 0 {
		c.buf = append(c.buf, p[:min(int64(len(p)), room)]...)
	}
	c.total += int64(len(p))
	return len(p), nil
}
