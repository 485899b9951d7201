package meter

import (
	"sort"
	"sync"

	"github.com/opencontainers/go-digest"
)

// Receipt outcomes.
const (
	OutcomeOK = "ok"
	// OutcomeRefusedCap: the call's reservation did not fit in the remaining budget.
	OutcomeRefusedCap = "refused_cap"
	// OutcomeRefusedModel: the model is not on the allowlist.
	OutcomeRefusedModel = "refused_model"
	// OutcomeUpstreamError: the upstream failed (402, 429, 5xx, 401/403, reset,
	// timeout, a cut stream, an unreadable answer) after the retries allowed.
	// It makes the scenario infra_error.
	OutcomeUpstreamError = "upstream_error"
	// OutcomeUpstreamRejected: the upstream refused the request itself (another
	// 4xx); the request's fault, not the infrastructure's.
	OutcomeUpstreamRejected = "upstream_rejected"
	// OutcomeBadRequest: the meter refused a malformed request (bad JSON,
	// oversized body, wrong content type, unknown route or method).
	OutcomeBadRequest = "bad_request"
	// OutcomeReplayDivergence: in replay mode, the trace has no answer for the
	// request.
	OutcomeReplayDivergence = "replay_divergence"
)

// Scenario statuses in a Summary.
const (
	StatusOK         = "ok"
	StatusInfraError = "infra_error"
	StatusDiverged   = "diverged"
)

// Receipt is the meter's account of one call. Receipts hold nothing that varies
// between a run and its replay: no time, no latency (see Timing), no host.
type Receipt struct {
	Scenario string `json:"scenario"`
	// Seq numbers the scenario's calls from 1 in admission order.
	Seq   int64  `json:"seq"`
	Model string `json:"model"`
	// RequestDigest is the SHA-256 of the canonical request (of the raw body when
	// it is not JSON); Occurrence counts earlier forwarded calls of the scenario
	// with the same digest (0 for the first).
	RequestDigest digest.Digest `json:"request_digest"`
	Occurrence    int64         `json:"occurrence"`
	// ResponseDigest is the SHA-256 of the body the client received (a streamed
	// answer: the concatenation of the events sent).
	ResponseDigest   digest.Digest `json:"response_digest"`
	Stream           bool          `json:"stream"`
	InputTokens      int64         `json:"input_tokens"`
	OutputTokens     int64         `json:"output_tokens"`
	ReservedMicroUSD int64         `json:"reserved_micro_usd"`
	CostMicroUSD     int64         `json:"cost_micro_usd"`
	// OverReservation: the upstream reported usage priced above the reservation;
	// the cost charged is the reservation.
	OverReservation bool   `json:"over_reservation,omitempty"`
	UpstreamStatus  int    `json:"upstream_status"`
	ResponseID      string `json:"response_id"`
	Attempts        int    `json:"attempts"`
	Outcome         string `json:"outcome"`
	// Error is the error code the client received ("" for ok).
	Error string `json:"error,omitempty"`
	// HTTPStatus is the status the client received.
	HTTPStatus int `json:"http_status"`
}

// TraceEntry is one call's request and the upstream's answer, enough to answer
// the same request again in replay mode.
type TraceEntry struct {
	Scenario      string        `json:"scenario"`
	Seq           int64         `json:"seq"`
	RequestDigest digest.Digest `json:"request_digest"`
	Occurrence    int64         `json:"occurrence"`
	// Request is the body the client sent, verbatim (RequestBase64 when it is
	// not UTF-8).
	Request       string `json:"request"`
	RequestBase64 string `json:"request_base64,omitempty"`
	// Forwarded tells whether the call reached the upstream (or, in replay, the
	// trace); only forwarded entries answer replayed requests.
	Forwarded bool      `json:"forwarded"`
	Upstream  *Exchange `json:"upstream,omitempty"`
}

// Exchange is the upstream's final answer to a forwarded call.
type Exchange struct {
	Attempts int `json:"attempts"`
	// Status is the HTTP status of the last attempt (0: no response).
	Status int `json:"status"`
	// Body is a non-streamed response body (BodyBase64 when not UTF-8).
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"body_base64,omitempty"`
	// Chunks are a streamed answer's server-sent events, each with its trailing
	// blank line, in the order received: the chunk boundaries are kept.
	Chunks []string `json:"chunks,omitempty"`
	// Failure names why the last attempt failed ("" if it did not): see
	// docs/METER.md, "Failures".
	Failure string `json:"failure,omitempty"`
	// Assembled is a streamed answer reassembled from its chunks' deltas.
	Assembled *Assembled `json:"assembled,omitempty"`
}

// Assembled is the message a streamed answer adds up to: its content, tool
// calls and finish reason, joined from the chunks' deltas in order.
type Assembled struct {
	Content      string          `json:"content"`
	ToolCalls    []AssembledCall `json:"tool_calls,omitempty"`
	FinishReason string          `json:"finish_reason,omitempty"`
}

// AssembledCall is one tool call of a streamed answer.
type AssembledCall struct {
	Index     int    `json:"index"`
	ID        string `json:"id"`
	Type      string `json:"type"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Timing is a call's wall-clock account, kept apart from receipts and traces.
type Timing struct {
	Scenario      string `json:"scenario"`
	Seq           int64  `json:"seq"`
	LatencyMicros int64  `json:"latency_micros"`
}

// Divergence is a replayed request the trace has no answer for.
type Divergence struct {
	Scenario      string        `json:"scenario"`
	Seq           int64         `json:"seq"`
	RequestDigest digest.Digest `json:"request_digest"`
	Occurrence    int64         `json:"occurrence"`
}

// Recorder collects what a meter observes. It is safe for concurrent use;
// accessors return copies sorted by (scenario, seq).
type Recorder struct {
	mu          sync.Mutex
	receipts    []Receipt
	trace       []TraceEntry
	timings     []Timing
	divergences []Divergence
	byScenario  map[string][]int // indexes into receipts, in recording order
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{} }

func (r *Recorder) add(rc Receipt, te TraceEntry, t Timing, div *Divergence) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byScenario == nil {
		r.byScenario = map[string][]int{}
	}
	r.byScenario[rc.Scenario] = append(r.byScenario[rc.Scenario], len(r.receipts))
	r.receipts = append(r.receipts, rc)
	r.trace = append(r.trace, te)
	r.timings = append(r.timings, t)
	if div != nil {
		r.divergences = append(r.divergences, *div)
	}
}

func less(s1 string, q1 int64, s2 string, q2 int64) bool {
	if s1 != s2 {
		return s1 < s2
	}
	return q1 < q2
}

// Receipts returns the receipts sorted by scenario, then sequence number.
func (r *Recorder) Receipts() []Receipt {
	r.mu.Lock()
	out := append([]Receipt(nil), r.receipts...)
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return less(out[i].Scenario, out[i].Seq, out[j].Scenario, out[j].Seq) })
	return out
}

// ScenarioReceipts returns the receipts of one scenario from its from-th
// recorded one on (0-based, in recording order), sorted by sequence number,
// and how many receipts the scenario has recorded in all. A caller that
// serialises a scenario's calls (the policy sidecar) reads each request's
// receipts with it in time proportional to their number.
func (r *Recorder) ScenarioReceipts(scenario string, from int) ([]Receipt, int) {
	r.mu.Lock()
	idx := r.byScenario[scenario]
	var out []Receipt
	if from < len(idx) {
		out = make([]Receipt, 0, len(idx)-from)
		for _, i := range idx[max(from, 0):] {
			out = append(out, r.receipts[i])
		}
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, len(idx)
}

// Trace returns the trace entries sorted by scenario, then sequence number.
func (r *Recorder) Trace() []TraceEntry {
	r.mu.Lock()
	out := append([]TraceEntry(nil), r.trace...)
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return less(out[i].Scenario, out[i].Seq, out[j].Scenario, out[j].Seq) })
	return out
}

// Timings returns the latencies sorted by scenario, then sequence number.
func (r *Recorder) Timings() []Timing {
	r.mu.Lock()
	out := append([]Timing(nil), r.timings...)
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return less(out[i].Scenario, out[i].Seq, out[j].Scenario, out[j].Seq) })
	return out
}

// Divergences returns the replay divergences sorted by scenario, then sequence.
func (r *Recorder) Divergences() []Divergence {
	r.mu.Lock()
	out := append([]Divergence(nil), r.divergences...)
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return less(out[i].Scenario, out[i].Seq, out[j].Scenario, out[j].Seq) })
	return out
}

// Summary is one scenario's totals, derived from its receipts.
type Summary struct {
	Scenario string `json:"scenario"`
	// Status is infra_error when any call ended upstream_error, diverged when a
	// replayed request was missing from the trace, else ok.
	Status       string         `json:"status"`
	Calls        int64          `json:"calls"`
	CostMicroUSD int64          `json:"cost_micro_usd"`
	Outcomes     map[string]int `json:"outcomes"`
	Models       []ModelCost    `json:"models"`
}

// ModelCost is what one model cost in one scenario.
type ModelCost struct {
	Model        string `json:"model"`
	Calls        int64  `json:"calls"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	CostMicroUSD int64  `json:"cost_micro_usd"`
}

// Summarize derives per-scenario totals from receipts (any order), sorted by
// scenario; models within a scenario are sorted by name.
func Summarize(receipts []Receipt) []Summary {
	by := map[string]*Summary{}
	models := map[string]map[string]*ModelCost{}
	for _, rc := range receipts {
		s := by[rc.Scenario]
		if s == nil {
			s = &Summary{Scenario: rc.Scenario, Status: StatusOK, Outcomes: map[string]int{}}
			by[rc.Scenario] = s
			models[rc.Scenario] = map[string]*ModelCost{}
		}
		s.Calls++
		s.CostMicroUSD += rc.CostMicroUSD
		s.Outcomes[rc.Outcome]++
		switch rc.Outcome {
		case OutcomeUpstreamError:
			if s.Status != StatusDiverged {
				s.Status = StatusInfraError
			}
		case OutcomeReplayDivergence:
			s.Status = StatusDiverged
		}
		if rc.Outcome == OutcomeOK || rc.CostMicroUSD > 0 {
			mc := models[rc.Scenario][rc.Model]
			if mc == nil {
				mc = &ModelCost{Model: rc.Model}
				models[rc.Scenario][rc.Model] = mc
			}
			mc.Calls++
			mc.InputTokens += rc.InputTokens
			mc.OutputTokens += rc.OutputTokens
			mc.CostMicroUSD += rc.CostMicroUSD
		}
	}
	out := make([]Summary, 0, len(by))
	for id, s := range by {
		s.Models = []ModelCost{}
		for _, mc := range models[id] {
			s.Models = append(s.Models, *mc)
		}
		sort.Slice(s.Models, func(i, j int) bool { return s.Models[i].Model < s.Models[j].Model })
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scenario < out[j].Scenario })
	return out
}
