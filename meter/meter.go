package meter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/opencontainers/go-digest"
)

// ScenarioHeader names the scenario of a request sent to Meter.Handler. A
// scenario's own handler (Scenario.Handler) ignores it: a sandbox bound to one
// scenario's socket cannot charge another.
const ScenarioHeader = "Feval-Scenario"

// MaxScenarios bounds the scenarios one meter serves.
const MaxScenarios = 4096

// DefaultScenario is the scenario of requests that name none.
const DefaultScenario = "default"

var scenarioRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`) })

// ValidScenario reports whether id can name a scenario: 1-128 ASCII letters,
// digits, '.', '_' or '-', starting with a letter or digit.
func ValidScenario(id string) bool { return scenarioRE().MatchString(id) }

// Options are the run-time choices of a meter that the task does not fix.
type Options struct {
	// Recorder receives receipts, trace and timings (a new one if nil).
	Recorder *Recorder
	// Upstream, if set, replaces every model's upstream base URL (an operator's
	// gateway, or the fixture upstream in tests and the demo).
	Upstream string
	// Transport, if set, replaces the HTTP transport to the upstreams.
	Transport http.RoundTripper
	// Credentials returns the bearer token for a model's upstream ("" for
	// none). Tokens are never recorded.
	Credentials func(model string) string
	// Replay, if non-nil, puts the meter in replay mode: forwarded requests are
	// answered from these trace entries and no upstream is contacted.
	Replay []TraceEntry
	// Now is the clock for timings (time.Now if nil).
	Now func() time.Time
}

type modelInfo struct {
	Model
	url string // chat completions endpoint
}

// Meter is a metering proxy for one evaluation. It is safe for concurrent use.
type Meter struct {
	cfg    Config
	opts   Options
	rec    *Recorder
	models map[string]*modelInfo
	client *http.Client
	replay map[replayKey]*Exchange

	mu        sync.Mutex
	scenarios map[string]*Scenario
	modelList []byte
}

type replayKey struct {
	scenario string
	digest   digest.Digest
	occ      int64
}

// New returns a meter for a validated configuration.
func New(cfg Config, opts Options) (*Meter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Meter{cfg: cfg, opts: opts, rec: opts.Recorder, models: map[string]*modelInfo{}, scenarios: map[string]*Scenario{}}
	if m.rec == nil {
		m.rec = NewRecorder()
	}
	if m.opts.Now == nil {
		m.opts.Now = time.Now
	}
	type entry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{Object: "list", Data: []entry{}}
	for _, md := range cfg.Models {
		base := md.Upstream
		if opts.Upstream != "" {
			base = opts.Upstream
		}
		if base == "" && opts.Replay == nil {
			return nil, fmt.Errorf("%w: model %s has no upstream (set one in the task or give an upstream override)", ErrConfig, md.Name)
		}
		mi := &modelInfo{Model: md, url: strings.TrimSuffix(base, "/") + "/chat/completions"}
		if mi.UpstreamModel == "" {
			mi.UpstreamModel = md.Name
		}
		m.models[md.Name] = mi
		list.Data = append(list.Data, entry{ID: md.Name, Object: "model", OwnedBy: "feval-meter"})
	}
	m.modelList, _ = json.Marshal(list)
	rt := opts.Transport
	if rt == nil {
		rt = newTransport(cfg.Timeouts)
	}
	m.client = &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if opts.Replay != nil {
		m.replay = map[replayKey]*Exchange{}
		for i := range opts.Replay {
			te := &opts.Replay[i]
			if te.Forwarded && te.Upstream != nil {
				m.replay[replayKey{te.Scenario, te.RequestDigest, te.Occurrence}] = te.Upstream
			}
		}
	}
	return m, nil
}

// Config returns the meter's configuration.
func (m *Meter) Config() Config { return m.cfg }

// Recorder returns the recorder the meter writes to.
func (m *Meter) Recorder() *Recorder { return m.rec }

// Replaying reports whether the meter answers from a trace.
func (m *Meter) Replaying() bool { return m.replay != nil }

// Close releases idle upstream connections.
func (m *Meter) Close() { m.client.CloseIdleConnections() }

// Scenario returns the scenario named id, creating it with a full budget on
// first use. id must satisfy ValidScenario.
func (m *Meter) Scenario(id string) (*Scenario, error) {
	if !ValidScenario(id) {
		return nil, fmt.Errorf("scenario %q: want 1-128 letters, digits, '.', '_' or '-'", id)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.scenarios[id]
	if s == nil {
		if len(m.scenarios) >= MaxScenarios {
			return nil, fmt.Errorf("scenario %q: the meter already serves %d scenarios", id, MaxScenarios)
		}
		s = &Scenario{id: id, m: m, b: budget{cap: m.cfg.CapMicroUSD}, occ: map[digest.Digest]int64{}, pace: newPacer(m.cfg.Rate)}
		m.scenarios[id] = s
	}
	return s, nil
}

// Handler serves the meter's API, attributing each request to the scenario
// named by its Feval-Scenario header (DefaultScenario if absent).
func (m *Meter) Handler() http.Handler { return &handler{m: m} }

// Scenario is one scenario's view of the meter: its budget and call sequence.
type Scenario struct {
	id  string
	m   *Meter
	b   budget
	mu  sync.Mutex // admission order: seq, occurrences, reservations
	seq int64
	occ map[digest.Digest]int64
	// pace holds the scenario's upstream calls to the task's rate.
	pace *pacer
}

// ID returns the scenario's name.
func (s *Scenario) ID() string { return s.id }

// Meter returns the meter the scenario belongs to (its recorder holds the
// scenario's receipts).
func (s *Scenario) Meter() *Meter { return s.m }

// Spent returns the micro-USD settled so far and the amount reserved by calls
// in flight.
func (s *Scenario) Spent() (spent, reserved int64) { return s.b.state() }

// Handler serves the meter's API with every call attributed to this scenario.
// An admitted call runs to its end and is recorded even if the client goes
// away first.
func (s *Scenario) Handler() http.Handler { return &handler{m: s.m, fixed: s} }

type handler struct {
	m     *Meter
	fixed *Scenario
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" && r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		w.Write(h.m.modelList)
		return
	}
	s := h.fixed
	if s == nil {
		id := r.Header.Get(ScenarioHeader)
		if id == "" {
			id = DefaultScenario
		}
		var err error
		if s, err = h.m.Scenario(id); err != nil {
			writeError(w, &requestError{status: 400, typ: "invalid_request_error", code: "invalid_scenario",
				msg: fmt.Sprintf("header %s: %v", ScenarioHeader, err)})
			return
		}
	}
	s.serve(w, r)
}

// ServeHTTP serves one request attributed to the scenario.
func (s *Scenario) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(&handler{m: s.m, fixed: s}).ServeHTTP(w, r)
}

// call is one request's passage through the meter.
type call struct {
	start   time.Time
	raw     []byte
	req     *chatRequest
	model   *modelInfo
	receipt Receipt
	entry   TraceEntry
	div     *Divergence
}

func (s *Scenario) serve(w http.ResponseWriter, r *http.Request) {
	c := s.newCall()
	if rerr := s.read(c, r); rerr != nil {
		s.refuse(w, c, OutcomeBadRequest, rerr)
		return
	}
	if outcome, refusal := s.admit(c); refusal != nil {
		s.finishRefusal(w, c, outcome, refusal)
		return
	}
	s.forward(w, r.Context(), c)
}

func (s *Scenario) newCall() *call {
	c := &call{start: s.m.opts.Now()}
	c.receipt.Scenario, c.entry.Scenario = s.id, s.id
	return c
}

// admit numbers a parsed call and checks the allowlist and the budget, in one
// critical section so that sequence numbers, reservations and occurrences
// follow one order. It returns the refusal, if any.
func (s *Scenario) admit(c *call) (string, *requestError) {
	m := s.m
	c.receipt.Model, c.receipt.Stream = c.req.Model, c.req.Stream
	c.model = m.models[c.req.Model]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	c.receipt.Seq, c.entry.Seq = s.seq, s.seq
	if c.model == nil {
		return OutcomeRefusedModel, &requestError{status: 404, typ: "invalid_request_error", code: "model_not_found",
			msg: fmt.Sprintf("model %q is not on the task's allowlist (GET /v1/models lists the %d allowed models)", c.req.Model, len(m.cfg.Models))}
	}
	in := ReserveInputTokens(c.req.Canonical)
	c.receipt.ReservedMicroUSD = Cost(in, c.req.MaxTokens, c.model.InputMicroUSDPerMTok, c.model.OutputMicroUSDPerMTok)
	if err := s.b.reserve(c.receipt.ReservedMicroUSD); err != nil {
		spent, reserved := s.b.state()
		e := &requestError{status: 402, typ: "insufficient_quota", code: "cap_exceeded",
			msg: fmt.Sprintf("scenario %s: this call may cost up to %d micro-USD (%d input tokens by the meter's count + %d max tokens of %s) but only %d of the %d micro-USD cap remain; lower max_tokens or shorten the request",
				s.id, c.receipt.ReservedMicroUSD, in, c.req.MaxTokens, c.req.Model, m.cfg.CapMicroUSD-spent-reserved, m.cfg.CapMicroUSD)}
		c.receipt.ReservedMicroUSD = 0
		return OutcomeRefusedCap, e
	}
	c.receipt.Occurrence = s.occ[c.req.Digest]
	c.entry.Occurrence = c.receipt.Occurrence
	s.occ[c.req.Digest]++
	return "", nil
}

// read checks the method, route, content type and size, and parses the body.
func (s *Scenario) read(c *call, r *http.Request) *requestError {
	defer c.identify()
	if r.URL.Path != "/v1/chat/completions" {
		return &requestError{status: 404, typ: "invalid_request_error", code: "unknown_url",
			msg: fmt.Sprintf("unknown route %s %s: the meter serves POST /v1/chat/completions and GET /v1/models", r.Method, r.URL.Path)}
	}
	if r.Method != http.MethodPost {
		return &requestError{status: 405, typ: "invalid_request_error", code: "method_not_allowed",
			msg: fmt.Sprintf("%s /v1/chat/completions: use POST", r.Method)}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &requestError{status: 415, typ: "invalid_request_error", code: "unsupported_media_type",
			msg: fmt.Sprintf("content type %q: send the body as application/json", r.Header.Get("Content-Type"))}
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, s.m.cfg.MaxRequestBytes+1))
	c.raw = b
	if err != nil && int64(len(b)) <= s.m.cfg.MaxRequestBytes {
		return badRequest("unreadable_body", "reading the request body: %v", err)
	}
	return s.parse(c)
}

// parse checks the size of c.raw and parses it.
func (s *Scenario) parse(c *call) *requestError {
	if limit := s.m.cfg.MaxRequestBytes; int64(len(c.raw)) > limit {
		return &requestError{status: 413, typ: "invalid_request_error", code: "request_too_large",
			msg: fmt.Sprintf("the request body exceeds the task's limit of %d bytes; shorten the conversation", limit)}
	}
	req, rerr := parseChatRequest(c.raw, s.m.cfg.DefaultMaxTokens)
	if rerr != nil {
		return rerr
	}
	c.req = req
	return nil
}

// identify sets the request digest and the request body of the receipt and
// trace entry.
func (c *call) identify() {
	if c.req != nil {
		c.receipt.RequestDigest = c.req.Digest
	} else {
		c.receipt.RequestDigest = RequestDigest(c.raw)
	}
	c.entry.RequestDigest = c.receipt.RequestDigest
	setRequest(&c.entry, c.raw)
}

func setRequest(te *TraceEntry, b []byte) {
	if utf8.Valid(b) {
		te.Request = string(b)
	} else {
		te.RequestBase64 = base64.StdEncoding.EncodeToString(b)
	}
}

// refuse answers a request refused before admission: it still gets a sequence
// number and a receipt.
func (s *Scenario) refuse(w http.ResponseWriter, c *call, outcome string, e *requestError) {
	s.mu.Lock()
	s.seq++
	c.receipt.Seq, c.entry.Seq = s.seq, s.seq
	s.mu.Unlock()
	s.finishRefusal(w, c, outcome, e)
}

func (s *Scenario) finishRefusal(w http.ResponseWriter, c *call, outcome string, e *requestError) {
	body := errorBody(e)
	c.receipt.Outcome, c.receipt.Error, c.receipt.HTTPStatus = outcome, e.code, e.status
	c.receipt.ResponseDigest = digest.FromBytes(body)
	s.record(c)
	writeErrorBody(w, e.status, body)
}

func (s *Scenario) record(c *call) {
	t := Timing{Scenario: s.id, Seq: c.receipt.Seq, LatencyMicros: s.m.opts.Now().Sub(c.start).Microseconds()}
	s.m.rec.add(c.receipt, c.entry, t, c.div)
}

// forward sends an admitted call upstream (or to the trace), settles its
// reservation, records it and answers the client. The upstream call runs to its
// end even if the client goes away (ctx's cancellation is dropped): what is
// recorded must not depend on when a caller gives up, and an abandoned call of a
// policy's parallel fan-out is not an infrastructure failure.
func (s *Scenario) forward(w http.ResponseWriter, ctx context.Context, c *call) {
	m := s.m
	ctx = context.WithoutCancel(ctx)
	c.entry.Forwarded = true
	var ex *Exchange
	sent := digest.SHA256.Digester()
	started := false
	flusher, _ := w.(http.Flusher)
	emit := func(ev string) {
		if !c.req.IncludeUsage && usageOnly(ev) {
			return
		}
		if !started {
			started = true
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
		}
		sent.Hash().Write([]byte(ev))
		io.WriteString(w, ev) // a client gone mid-stream does not stop the recording
		if flusher != nil {
			flusher.Flush()
		}
	}
	if m.replay != nil {
		ex = m.replay[replayKey{s.id, c.req.Digest, c.receipt.Occurrence}]
		if ex == nil {
			s.b.settle(c.receipt.ReservedMicroUSD, 0)
			c.div = &Divergence{Scenario: s.id, Seq: c.receipt.Seq, RequestDigest: c.req.Digest, Occurrence: c.receipt.Occurrence}
			c.receipt.ReservedMicroUSD = 0
			e := &requestError{status: 409, typ: "replay_divergence", code: "replay_divergence",
				msg: fmt.Sprintf("replay: the trace has no answer for request %s (occurrence %d, call %d of scenario %s)",
					c.req.Digest, c.receipt.Occurrence, c.receipt.Seq, s.id)}
			c.entry.Forwarded = false
			s.finishRefusal(w, c, OutcomeReplayDivergence, e)
			return
		}
		if c.req.Stream && ex.Failure != FailureStatus && ex.Status == http.StatusOK {
			for _, ev := range ex.Chunks {
				emit(ev)
			}
		}
	} else {
		body, err := forwardBody(c.raw, c.req, c.model.UpstreamModel)
		if err != nil { // parseChatRequest accepted it, so this does not happen
			body = c.raw
		}
		done := s.pace.start()
		ex = m.forward(ctx, c.model, body, c.req.Stream, emit)
		done()
		if c.req.Stream && len(ex.Chunks) > 0 {
			ex.Assembled = assemble(ex.Chunks)
		}
	}
	c.entry.Upstream = ex
	c.receipt.Attempts, c.receipt.UpstreamStatus = ex.Attempts, ex.Status

	var a answer
	if c.req.Stream {
		a = readStreamAnswer(ex.Chunks)
	} else if ex.Failure == "" {
		a = readAnswer(ex.bodyBytes())
	}
	c.receipt.ResponseID = a.ID
	failure := ex.Failure
	if failure == "" && !a.Usage.valid() {
		failure = FailureBadAnswer
	}
	var e *requestError
	switch {
	case failure == "":
		c.receipt.Outcome = OutcomeOK
		c.receipt.InputTokens, c.receipt.OutputTokens = *a.Usage.PromptTokens, *a.Usage.CompletionTokens
		cost := Cost(c.receipt.InputTokens, c.receipt.OutputTokens, c.model.InputMicroUSDPerMTok, c.model.OutputMicroUSDPerMTok)
		c.receipt.OverReservation = cost > c.receipt.ReservedMicroUSD
		c.receipt.CostMicroUSD = s.b.settle(c.receipt.ReservedMicroUSD, cost)
	case failure == FailureStatus && !infraStatus(ex.Status):
		c.receipt.Outcome = OutcomeUpstreamRejected
		s.b.settle(c.receipt.ReservedMicroUSD, 0)
		e = &requestError{status: ex.Status, typ: "invalid_request_error", code: "upstream_rejected",
			msg: fmt.Sprintf("the upstream of %s refused the request with HTTP %d: %s", c.req.Model, ex.Status, upstreamMessage(ex.bodyBytes()))}
	default:
		c.receipt.Outcome = OutcomeUpstreamError
		// Nothing answered, or an HTTP error: nothing to charge. An answer that
		// started but gave no usage may have been billed: charge the reservation.
		charge := int64(0)
		if ex.Status == http.StatusOK {
			charge = c.receipt.ReservedMicroUSD
		}
		c.receipt.CostMicroUSD = s.b.settle(c.receipt.ReservedMicroUSD, charge)
		what := failure
		if failure == FailureStatus {
			what = fmt.Sprintf("HTTP %d", ex.Status)
		}
		e = &requestError{status: 502, typ: "upstream_error", code: "upstream_unavailable",
			msg: fmt.Sprintf("the upstream of %s failed after %d attempts (%s); the scenario is infra_error", c.req.Model, ex.Attempts, what)}
	}
	switch {
	case e == nil && !c.req.Stream:
		body := ex.bodyBytes()
		c.receipt.HTTPStatus = http.StatusOK
		c.receipt.ResponseDigest = digest.FromBytes(body)
		s.record(c)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	case e == nil:
		c.receipt.HTTPStatus = http.StatusOK
		c.receipt.ResponseDigest = sent.Digest()
		s.record(c)
	case started: // the stream already began: end it with an error event
		body := errorBody(e)
		ev := "data: " + string(body) + "\n\n"
		sent.Hash().Write([]byte(ev))
		c.receipt.Error, c.receipt.HTTPStatus = e.code, http.StatusOK
		c.receipt.ResponseDigest = sent.Digest()
		s.record(c)
		io.WriteString(w, ev)
	default:
		body := errorBody(e)
		c.receipt.Error, c.receipt.HTTPStatus = e.code, e.status
		c.receipt.ResponseDigest = digest.FromBytes(body)
		s.record(c)
		writeErrorBody(w, e.status, body)
	}
}

// upstreamMessage is a short, printable excerpt of an upstream error body.
func upstreamMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := string(b)
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	msg = strings.ToValidUTF8(msg, "?")
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return strings.Join(strings.Fields(msg), " ")
}

// APIError is the OpenAI error shape.
type APIError struct {
	Error APIErrorBody `json:"error"`
}

// APIErrorBody is the inner object of an OpenAI error.
type APIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

func errorBody(e *requestError) []byte {
	b, _ := json.Marshal(APIError{Error: APIErrorBody{Message: e.msg, Type: e.typ, Code: e.code}})
	return b
}

func writeError(w http.ResponseWriter, e *requestError) { writeErrorBody(w, e.status, errorBody(e)) }

func writeErrorBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// ErrReplayDiverged reports a replay in which some request had no answer in the
// trace.
var ErrReplayDiverged = errors.New("replay diverged from the trace")
