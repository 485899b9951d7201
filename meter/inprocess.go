package meter

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
)

// Result is what an HTTP client would have received for an in-process call:
// the status, the headers and the whole body (a streamed answer's events).
type Result struct {
	Status int
	Header http.Header
	Body   []byte
}

// Call makes one chat completion call in process, attributed to the scenario;
// it is CallAll with one body.
func (s *Scenario) Call(ctx context.Context, body []byte) Result {
	return s.CallAll(ctx, [][]byte{body})[0]
}

// CallAll makes several chat completion calls that run in parallel but are
// admitted in the order given: their sequence numbers, reservations and
// occurrences follow the slice, whatever order the upstream answers in, so a
// replay of the same calls yields the same receipts. Results are in the same
// order. A policy that fans a request out to several models uses it. Calls
// run to their end even if ctx is cancelled (see Scenario.Handler).
func (s *Scenario) CallAll(ctx context.Context, bodies [][]byte) []Result {
	out := make([]Result, len(bodies))
	writers := make([]*bufferWriter, len(bodies))
	var admitted []int
	calls := make([]*call, len(bodies))
	for i, b := range bodies {
		w := &bufferWriter{header: http.Header{}}
		writers[i] = w
		c := s.newCall()
		c.raw = b
		rerr := s.parse(c)
		c.identify()
		if rerr != nil {
			s.refuse(w, c, OutcomeBadRequest, rerr)
			continue
		}
		if outcome, refusal := s.admit(c); refusal != nil {
			s.finishRefusal(w, c, outcome, refusal)
			continue
		}
		calls[i] = c
		admitted = append(admitted, i)
	}
	var wg sync.WaitGroup
	for _, i := range admitted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.forward(writers[i], ctx, calls[i])
		}()
	}
	wg.Wait()
	for i, w := range writers {
		out[i] = Result{Status: w.status(), Header: w.header, Body: w.buf.Bytes()}
	}
	return out
}

// bufferWriter is an http.ResponseWriter that keeps the response in memory.
type bufferWriter struct {
	header http.Header
	code   int
	buf    bytes.Buffer
}

func (w *bufferWriter) Header() http.Header { return w.header }
func (w *bufferWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *bufferWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.buf.Write(p)
}
func (w *bufferWriter) Flush() {}
func (w *bufferWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Transport returns an http.RoundTripper that serves requests with h in
// process, streaming the response body as the handler writes it: an OpenAI
// client in Go (the policy sidecar) can use the meter with no socket.
func Transport(h http.Handler) http.RoundTripper { return inProcess{h} }

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer pw.Close()
		defer w.WriteHeader(http.StatusOK) // a handler that wrote nothing
		t.h.ServeHTTP(w, req)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{Status: http.StatusText(w.code), StatusCode: w.code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: req}, nil
}

// pipeWriter is the handler's side of an in-process round trip.
type pipeWriter struct {
	header http.Header
	sent   http.Header
	pw     *io.PipeWriter
	once   sync.Once
	code   int
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }
func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.code = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}
func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}
func (w *pipeWriter) Flush() {}
