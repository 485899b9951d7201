// Package faultproxy is a test fixture: an HTTP proxy placed in front of a real
// registry that injects the faults a failing network or registry produces. It
// stands in for a bad network, which cannot be summoned on demand; the registry
// behind it and the client in front of it are the production parts.
//
// Faults, each chosen per request with a configured probability:
//
//   - Status500: the request is not forwarded; the client gets 500 with an OCI
//     error body.
//   - Reset: the connection is closed with a TCP reset before any answer.
//   - Stall: the request is forwarded, then the answer stops after its headers
//     and half its body until the client gives up (or Config.StallFor passes).
//   - Short: the answer declares its full length but the connection closes
//     after half the body.
//   - Flip: one bit of a successful answer's body is flipped.
package faultproxy

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Fault is one kind of injected failure.
type Fault string

// The faults.
const (
	Status500 Fault = "500"
	Reset     Fault = "reset"
	Stall     Fault = "stall"
	Short     Fault = "short"
	Flip      Fault = "flip"
)

// Config selects the faults.
type Config struct {
	// Faults are chosen uniformly among when a request draws a fault.
	Faults []Fault
	// Percent is the chance, 0-100, that a request draws a fault.
	Percent int
	// Seed makes the sequence of draws repeatable.
	Seed uint64
	// Match, if set, limits faults to the requests it accepts.
	Match func(*http.Request) bool
	// StallFor bounds a stall; zero means 10 minutes (the client must end it).
	StallFor time.Duration
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	Addr   string // host:port to give clients instead of the registry's
	target string
	cfg    Config
	srv    *http.Server
	ln     net.Listener
	tr     *http.Transport

	mu     sync.Mutex
	rng    *rand.Rand
	counts map[Fault]int
	total  int
}

// Start runs a proxy on 127.0.0.1 in front of the registry at target
// (host:port). The caller must Close it.
func Start(target string, cfg Config) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, cfg: cfg, ln: ln,
		tr:  &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16},
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x6661756c74)), counts: map[Fault]int{}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// Close stops the proxy and cuts every connection through it.
func (p *Proxy) Close() {
	p.srv.Close()
	p.tr.CloseIdleConnections()
}

// Counts returns how many requests passed and how many of each fault fired.
func (p *Proxy) Counts() (total int, faults map[Fault]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[Fault]int{}
	for k, v := range p.counts {
		out[k] = v
	}
	return p.total, out
}

// SetPercent changes the fault rate of later requests.
func (p *Proxy) SetPercent(n int) {
	p.mu.Lock()
	p.cfg.Percent = n
	p.mu.Unlock()
}

func (p *Proxy) draw(r *http.Request) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total++
	if len(p.cfg.Faults) == 0 || (p.cfg.Match != nil && !p.cfg.Match(r)) || p.rng.IntN(100) >= p.cfg.Percent {
		return ""
	}
	f := p.cfg.Faults[p.rng.IntN(len(p.cfg.Faults))]
	p.counts[f]++
	return f
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fault := p.draw(r)
	switch fault {
	case Status500:
		io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"errors":[{"code":"UNKNOWN","message":"injected failure"}]}`)
		return
	case Reset:
		reset(w)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+p.target+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host // the registry builds upload URLs from it: they lead back here
	out.ContentLength = r.ContentLength
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		reset(w)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		reset(w)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		w.Header().Set("Location", strings.Replace(loc, p.target, r.Host, 1))
	}
	ok := resp.StatusCode/100 == 2 && len(body) > 0 && r.Method == http.MethodGet
	switch {
	case fault == Flip && ok:
		body = bytes.Clone(body)
		body[len(body)/2] ^= 0x10
	case (fault == Stall || fault == Short) && ok:
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(resp.StatusCode)
		w.Write(body[:len(body)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		if fault == Stall {
			d := p.cfg.StallFor
			if d == 0 {
				d = 10 * time.Minute
			}
			select {
			case <-r.Context().Done():
			case <-time.After(d):
			}
		}
		// Returning short of the declared length makes the server close the
		// connection: the client sees a body that ends early.
		return
	case fault == Stall:
		// Nothing to truncate: hold the answer back entirely.
		d := p.cfg.StallFor
		if d == 0 {
			d = 10 * time.Minute
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(d):
		}
	}
	if r.Method != http.MethodHead {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(body)
}

// reset closes the client connection with a TCP reset.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faultproxy: connection cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}
