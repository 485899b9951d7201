package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/feval/feval/meter"
)

// Sample is one agent request of a try session.
type Sample struct {
	Name string `json:"name"`
	// Body is the agent's request body.
	Body json.RawMessage `json:"body"`
}

// SampleRequests returns the sample session of 'feval policy try': a plain
// question, a task with tools, a tool result, and a streamed question, in
// that order (turns 1 to 4).
func SampleRequests() []Sample {
	tools := `[{"type":"function","function":{"name":"shell","description":"Run a shell command in the workspace.","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}}}]`
	sys := `{"role":"system","content":"You are a coding agent working in a repository."}`
	task := `{"role":"user","content":"The test test_parse_empty in tests/test_parser.py fails with an IndexError. Fix it."}`
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"pytest -x tests/test_parser.py\"}"}}]}`
	result := `{"role":"tool","tool_call_id":"call_1","content":"FAILED tests/test_parser.py::test_parse_empty - IndexError: list index out of range"}`
	return []Sample{
		{Name: "question", Body: json.RawMessage(`{"model":"feval-policy","messages":[` + sys + `,{"role":"user","content":"What does a parser's tokenizer do?"}]}`)},
		{Name: "tool-turn", Body: json.RawMessage(`{"model":"feval-policy","messages":[` + sys + `,` + task + `],"tools":` + tools + `}`)},
		{Name: "tool-result", Body: json.RawMessage(`{"model":"feval-policy","messages":[` + sys + `,` + task + `,` + call + `,` + result + `],"tools":` + tools + `}`)},
		{Name: "streamed", Body: json.RawMessage(`{"model":"feval-policy","messages":[` + sys + `,{"role":"user","content":"Explain the error: IndexError: list index out of range?"}],"stream":true,"stream_options":{"include_usage":true}}`)},
	}
}

// TryCall is one model call a try request made.
type TryCall struct {
	Seq          int64  `json:"seq"`
	Model        string `json:"model"`
	Outcome      string `json:"outcome"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	CostMicroUSD int64  `json:"cost_micro_usd"`
}

// TryRequest is how the policy answered one sample request.
type TryRequest struct {
	Name         string    `json:"name"`
	Turn         int       `json:"turn"`
	Route        string    `json:"route"`
	HTTPStatus   int       `json:"http_status"`
	Failure      *Failure  `json:"failure,omitempty"`
	Calls        []TryCall `json:"model_calls"`
	CostMicroUSD int64     `json:"cost_micro_usd"`
	// Answer is the start of what the agent received.
	Answer string `json:"answer"`
}

// TryResult is a try session.
type TryResult struct {
	Form         Form         `json:"form"`
	Requests     []TryRequest `json:"requests"`
	CostMicroUSD int64        `json:"cost_micro_usd"`
	CapMicroUSD  int64        `json:"cap_micro_usd"`
}

// Try runs pack's policy on samples in one session, on a meter built from
// cfg and mopts (its upstream: the fixture upstream or an operator's), and
// reports each request's route, calls, tokens and cost. opts.Scenario is
// set by Try.
func Try(ctx context.Context, pack *Pack, cfg meter.Config, mopts meter.Options, opts Options, samples []Sample) (TryResult, error) {
	m, err := meter.New(cfg, mopts)
	if err != nil {
		return TryResult{}, err
	}
	defer m.Close()
	if opts.Scenario, err = m.Scenario("try"); err != nil {
		return TryResult{}, err
	}
	s, err := Start(ctx, pack, opts)
	if err != nil {
		return TryResult{}, err
	}
	defer s.Close()
	res := TryResult{Form: pack.Form, CapMicroUSD: cfg.CapMicroUSD}
	for _, sm := range samples {
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", bytes.NewReader(sm.Body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Result().Body)
		recs := s.Requests()
		if len(recs) == 0 {
			return res, fmt.Errorf("sample %s: the sidecar refused it: %s", sm.Name, clip(body, 200))
		}
		rec := recs[len(recs)-1]
		tr := TryRequest{Name: sm.Name, Turn: rec.Turn, Route: rec.Route, HTTPStatus: rec.HTTPStatus, Failure: rec.Failure,
			Calls: []TryCall{}, Answer: clip(body, 160)}
		want := map[int64]bool{}
		for _, q := range rec.Seqs {
			want[q] = true
		}
		for _, rc := range m.Recorder().Receipts() {
			if want[rc.Seq] {
				tr.Calls = append(tr.Calls, TryCall{Seq: rc.Seq, Model: rc.Model, Outcome: rc.Outcome,
					InputTokens: rc.InputTokens, OutputTokens: rc.OutputTokens, CostMicroUSD: rc.CostMicroUSD})
				tr.CostMicroUSD += rc.CostMicroUSD
			}
		}
		res.CostMicroUSD += tr.CostMicroUSD
		res.Requests = append(res.Requests, tr)
	}
	return res, nil
}
