package cas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"syscall"
	"time"

	"oras.land/oras-go/v2/registry/remote/errcode"
)

// DefaultIdleTimeout is how long a registry connection may make no progress (no
// byte read or written) before the operation using it fails.
const DefaultIdleTimeout = 30 * time.Second

// ErrRegistry reports a registry that answered with a failure feval cannot work
// around: a server error after retries, a refused request, a dropped connection or
// a stalled transfer. Like ErrUnreachable it means the service could not be used.
var ErrRegistry = errors.New("registry request failed")

// idleConn is a net.Conn on which every Read and Write must make progress within
// idle: each call pushes the deadline forward, so a peer that stops sending (or
// stops reading what is sent) fails the call instead of blocking it forever.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

// Write also pushes the read deadline forward: the HTTP transport keeps a Read
// pending on every pooled connection, started when the connection fell idle, and
// a request written now must get the whole idle period for its answer.
func (c *idleConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// idleDialer returns a DialContext whose connections time out after idle
// without progress.
func idleDialer(idle time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &idleConn{Conn: c, idle: idle}, nil
	}
}

// transient reports whether err is a failure that another attempt may not meet:
// a dropped or stalled connection, a short body, a server error or a rate limit.
// Verification failures (a wrong digest or size) are never transient: they are
// reported, not papered over.
//
// A timeout is transient: retry stops on its own when the operation's context
// (which carries the overall deadline) is done.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) ||
		errors.Is(err, ErrDigestMismatch) || errors.Is(err, ErrSizeMismatch) || errors.Is(err, ErrBadReference) ||
		errors.Is(err, ErrTooLarge) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) {
		return false
	}
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) {
		return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, ErrRegistry) || errors.Is(err, ErrUnreachable) || errors.Is(err, context.DeadlineExceeded)
}

// Retry policy for idempotent registry steps (a whole blob upload, a manifest
// fetch, a tag listing): up to retryAttempts tries with exponential backoff from
// retryBase, capped at retryMax, with jitter so that concurrent clients spread out.
const (
	retryAttempts = 6
	retryBase     = 200 * time.Millisecond
	retryMax      = 4 * time.Second
)

// retry runs op until it succeeds, fails with a non-transient error, runs out of
// attempts, or ctx ends.
func retry(ctx context.Context, op func() error) error {
	var err error
	wait := retryBase
	for attempt := 1; ; attempt++ {
		err = op()
		if !transient(err) || attempt == retryAttempts || ctx.Err() != nil {
			return err
		}
		d := wait/2 + rand.N(wait/2+1)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(d):
		}
		wait = min(2*wait, retryMax)
	}
}

// netReader marks errors from a network body so that they are reported as
// registry failures (exit 7), not as damaged content.
type netReader struct {
	rc   io.ReadCloser
	wrap func(error) error
}

func (n *netReader) Read(p []byte) (int, error) {
	k, err := n.rc.Read(p)
	if err != nil && err != io.EOF {
		err = n.wrap(err)
	}
	return k, err
}

func (n *netReader) Close() error { return n.rc.Close() }

// describeNetErr renders a network failure in a few words.
func describeNetErr(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "timed out: no progress within the idle timeout, or the deadline passed; retry later or allow more time"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed before the response ended"
	}
	return err.Error()
}

// errWithMsg keeps err for errors.Is while presenting msg.
type errWithMsg struct {
	msg string
	err error
}

func (e *errWithMsg) Error() string { return e.msg }
func (e *errWithMsg) Unwrap() error { return e.err }

func registryErr(format string, err error, a ...any) error {
	return &errWithMsg{msg: fmt.Sprintf(format, a...), err: errors.Join(ErrRegistry, err)}
}
