package meter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// ErrNotLoopback reports a TCP listen address that is not a loopback address.
var ErrNotLoopback = errors.New("the meter listens only on a Unix socket or a loopback address")

// Listen opens the meter's listener: "unix:PATH" (or an absolute PATH) is a Unix
// socket, created with mode 0600 after removing a stale socket file; anything
// else is a TCP host:port whose host must be a loopback address (127.0.0.0/8,
// ::1 or localhost).
func Listen(addr string) (net.Listener, error) {
	path, isUnix := strings.CutPrefix(addr, "unix:")
	if isUnix || strings.HasPrefix(addr, "/") {
		if !isUnix {
			path = addr
		}
		return ListenUnix(path, 0o600)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w (want unix:PATH or 127.0.0.1:PORT)", addr, err)
	}
	if host != "localhost" {
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("listen address %q: %w", addr, ErrNotLoopback)
		}
	}
	return net.Listen("tcp", addr)
}

// Serve serves h on ln until ctx ends, then shuts down gracefully (calls in
// flight finish, bounded by 10 s).
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: log.New(io.Discard, "", 0)} // a library never prints
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		<-done
		return err
	}
}

// ListenUnix listens on a Unix socket at path with the given mode, after
// removing a stale socket file there. A socket granted to a sandbox whose
// program runs as another user (uid 65534 when feval runs as root) needs a mode
// that lets that user connect (0o666); put it in a directory only the
// evaluation can reach.
func ListenUnix(path string, mode os.FileMode) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
