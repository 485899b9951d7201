package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/feval/feval/meter"
)

// agentRequest is a parsed chat completion request from the agent.
type agentRequest struct {
	raw          []byte
	fields       map[string]json.RawMessage
	messages     []json.RawMessage
	msgs         []msgInfo
	stream       bool
	includeUsage bool
	hasTools     bool
}

// msgInfo is what routing reads of a message.
type msgInfo struct {
	role    string
	content json.RawMessage // nil when absent
}

// text is the message's text (ContentText of its content).
func (m msgInfo) text() string { return ContentText(m.content) }

// badRequest is an error in the agent's own request (not a policy failure).
type badRequest struct{ code, msg string }

func (e *badRequest) Error() string { return e.msg }

// parseAgentRequest checks the agent's body: a JSON object with a non-empty
// messages array of objects with a string role; stream a boolean if present.
func parseAgentRequest(b []byte) (*agentRequest, error) {
	r := &agentRequest{raw: b}
	if !json.Valid(b) {
		return nil, &badRequest{"invalid_json", "the request body is not a JSON object"}
	}
	if r.fields = objectFields(b); r.fields == nil {
		return nil, &badRequest{"invalid_json", "the request body is not a JSON object"}
	}
	// The body is valid JSON from here: the scanners split it.
	ms := r.fields["messages"]
	if i := skipSpace(ms, 0); i >= len(ms) || ms[i] != '[' {
		return nil, &badRequest{"invalid_messages", "messages must be a non-empty array"}
	}
	r.messages = arrayElements(ms)
	if len(r.messages) == 0 {
		return nil, &badRequest{"invalid_messages", "messages must be a non-empty array"}
	}
	r.msgs = make([]msgInfo, len(r.messages))
	for i, m := range r.messages {
		var role string
		raw := objectField(m, "role")
		if raw == nil || raw[0] != '"' || json.Unmarshal(raw, &role) != nil {
			return nil, &badRequest{"invalid_messages", fmt.Sprintf("messages[%d] must be an object with a string role", i)}
		}
		r.msgs[i] = msgInfo{role: role, content: objectField(m, "content")}
	}
	if v, ok := r.fields["stream"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &r.stream); err != nil {
			return nil, &badRequest{"invalid_stream", "stream must be true or false"}
		}
	}
	if v, ok := r.fields["stream_options"]; ok {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if json.Unmarshal(v, &so) != nil {
			return nil, &badRequest{"invalid_stream_options", "stream_options must be an object"}
		}
		r.includeUsage = so.IncludeUsage
	}
	if v, ok := r.fields["tools"]; ok {
		if i := skipSpace(v, 0); i < len(v) && v[i] == '[' && len(arrayElements(v)) > 0 {
			r.hasTools = true
		}
	}
	return r, nil
}

// ContentText is a chat message content's text: the string, or the text
// parts of an array joined by newlines ("" for anything else).
func ContentText(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(c, &parts) == nil {
		var out []string
		for _, p := range parts {
			if p.Type == "text" {
				out = append(out, p.Text)
			}
		}
		return strings.Join(out, "\n")
	}
	return ""
}

// answer is a final assistant message.
type answer struct {
	Message      json.RawMessage // {"role":"assistant",...}, validated
	FinishReason string
}

// exchange is one agent request being answered.
type exchange struct {
	s       *Sidecar
	turn    int
	req     *agentRequest
	w       http.ResponseWriter
	route   string
	final   *answer
	errCode int    // a model error passed to the agent
	errBody []byte // its body
	sse     bool   // an event stream was started to the agent
}

func (x *exchange) startSSE() {
	if x.sse {
		return
	}
	x.sse = true
	h := x.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	x.w.WriteHeader(http.StatusOK)
}

// relay writes one server-sent event (its lines and the blank line) to the
// agent.
func (x *exchange) relay(ev []byte) {
	x.startSSE()
	x.w.Write(ev)
	if f, ok := x.w.(http.Flusher); ok {
		f.Flush()
	}
}

// passError hands the agent a model error (a meter refusal or upstream
// failure) unchanged.
func (x *exchange) passError(status int, body []byte) { x.errCode, x.errBody = status, body }

func (s *Sidecar) serveAgent(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		w.Write(modelsList)
		return
	case r.URL.Path != "/v1/chat/completions":
		writeAPIError(w, 404, "invalid_request_error", "unknown_url", fmt.Sprintf("unknown route %s %s: the policy sidecar serves POST /v1/chat/completions and GET /v1/models", r.Method, r.URL.Path))
		return
	case r.Method != http.MethodPost:
		writeAPIError(w, 405, "invalid_request_error", "method_not_allowed", "use POST")
		return
	}
	limit := s.sc.Meter().Config().MaxRequestBytes
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		writeAPIError(w, 400, "invalid_request_error", "unreadable_body", "reading the request body: "+err.Error())
		return
	}
	if int64(len(b)) > limit {
		writeAPIError(w, 413, "invalid_request_error", "request_too_large", fmt.Sprintf("the request body exceeds the task's limit of %d bytes; shorten the conversation", limit))
		return
	}
	req, err := parseAgentRequest(b)
	if err != nil {
		var br *badRequest
		errors.As(err, &br)
		writeAPIError(w, 400, "invalid_request_error", br.code, br.msg)
		return
	}
	s.answer(r.Context(), w, req)
}

// answer runs the policy on one request, serialised with every other, and
// records it.
func (s *Sidecar) answer(ctx context.Context, w http.ResponseWriter, req *agentRequest) {
	s.serial.Lock()
	defer s.serial.Unlock()
	s.turn++
	x := &exchange{s: s, turn: s.turn, req: req, w: w}
	in := &inflight{}
	s.gmu.Lock()
	s.active = in
	s.gmu.Unlock()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(s.limits.RequestMillis)*time.Millisecond)
	err := s.eng.answer(ctx, x)
	cancel()
	s.gmu.Lock()
	s.active = nil
	flood := in.flood
	s.gmu.Unlock()
	in.wg.Wait() // calls admitted for this request finish before it is recorded
	if x.route == "" {
		x.route = in.route
	}

	rec := Request{Turn: x.turn, Route: x.route, Seqs: []int64{}}
	var in0, out0 int64
	rs, n := s.sc.Meter().Recorder().ScenarioReceipts(s.sc.ID(), s.recorded)
	s.recorded = n
	for _, rc := range rs {
		rec.Seqs = append(rec.Seqs, rc.Seq)
		in0 += rc.InputTokens
		out0 += rc.OutputTokens
	}
	var f *Failure
	switch {
	case flood:
		f = &Failure{Kind: FailFlood, Message: fmt.Sprintf("the policy made more than %d model calls for one request", s.limits.CallsPerRequest)}
	case err != nil && errors.As(err, &f):
	case err != nil:
		f = &Failure{Kind: FailCrashed, Message: err.Error()}
	}
	switch {
	case f != nil:
		f.Turn = x.turn
		rec.Failure = f
		rec.HTTPStatus = x.writeFailure(f)
	case x.final != nil:
		rec.HTTPStatus = x.writeFinal(in0, out0)
	case x.errBody != nil:
		rec.HTTPStatus = x.errCode
		if x.sse {
			x.relay([]byte("data: " + string(x.errBody) + "\n\n"))
			rec.HTTPStatus = http.StatusOK
		} else {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(x.errCode)
			w.Write(x.errBody)
		}
	default: // the answer was relayed as a stream
		rec.HTTPStatus = http.StatusOK
	}
	s.record(rec)
}

// writeFailure gives the agent a policy failure as an OpenAI error.
func (x *exchange) writeFailure(f *Failure) int {
	msg := fmt.Sprintf("the fusion policy failed on request %d (%s): %s", f.Turn, f.Kind, f.Message)
	if x.sse {
		x.relay([]byte("data: " + string(apiErrorBody("policy_error", "policy_"+f.Kind, msg)) + "\n\n"))
		return http.StatusOK
	}
	status := http.StatusBadGateway
	if f.Kind == FailTimeout {
		status = http.StatusGatewayTimeout
	}
	x.w.Header().Set("X-Should-Retry", "false")
	writeAPIError(x.w, status, "policy_error", "policy_"+f.Kind, msg)
	return status
}

// writeFinal renders the final answer as a completion or as a stream, with
// the usage of every call made for the request.
func (x *exchange) writeFinal(in, out int64) int {
	id := "chatcmpl-policy-" + x.s.sc.ID() + "-" + strconv.Itoa(x.turn)
	usage := usageJSON{CompletionTokens: out, PromptTokens: in, TotalTokens: in + out}
	if !x.req.stream {
		body, _ := json.Marshal(completionJSON{ID: id, Object: "chat.completion", Model: AgentModel, Usage: usage,
			Choices: []choiceJSON{{FinishReason: x.final.FinishReason, Message: x.final.Message}}})
		x.w.Header().Set("Content-Type", "application/json")
		x.w.Write(body)
		return http.StatusOK
	}
	var msg map[string]json.RawMessage
	json.Unmarshal(x.final.Message, &msg)
	chunk := func(delta any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 0, "model": AgentModel,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		x.relay([]byte("data: " + string(b) + "\n\n"))
	}
	if !x.sse {
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		if c := msg["content"]; len(c) > 0 && string(c) != "null" && string(c) != `""` {
			chunk(map[string]any{"content": c}, nil)
		}
	}
	if tc := msg["tool_calls"]; len(tc) > 0 && string(tc) != "null" {
		var calls []map[string]json.RawMessage
		json.Unmarshal(tc, &calls)
		for i, c := range calls {
			c["index"] = json.RawMessage(strconv.Itoa(i))
		}
		chunk(map[string]any{"tool_calls": calls}, nil)
	}
	chunk(map[string]any{}, x.final.FinishReason)
	if x.req.includeUsage {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 0, "model": AgentModel,
			"choices": []any{}, "usage": usage})
		x.relay([]byte("data: " + string(b) + "\n\n"))
	}
	x.relay([]byte("data: [DONE]\n\n"))
	return http.StatusOK
}

// completionJSON and the types below write a chat completion with its keys
// in sorted order (fields declared alphabetically).
type completionJSON struct {
	Choices []choiceJSON `json:"choices"`
	Created int64        `json:"created"`
	ID      string       `json:"id"`
	Model   string       `json:"model"`
	Object  string       `json:"object"`
	Usage   usageJSON    `json:"usage"`
}

type choiceJSON struct {
	FinishReason string          `json:"finish_reason"`
	Index        int             `json:"index"`
	Message      json.RawMessage `json:"message"`
}

type usageJSON struct {
	CompletionTokens int64 `json:"completion_tokens"`
	PromptTokens     int64 `json:"prompt_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

type messageJSON struct {
	Content   *string        `json:"content"`
	Role      string         `json:"role"`
	ToolCalls []toolCallJSON `json:"tool_calls,omitempty"`
}

type toolCallJSON struct {
	Function functionJSON `json:"function"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
}

type functionJSON struct {
	Arguments string `json:"arguments"`
	Name      string `json:"name"`
}

func apiErrorBody(typ, code, msg string) []byte {
	b, _ := json.Marshal(meter.APIError{Error: meter.APIErrorBody{Message: msg, Type: typ, Code: code}})
	return b
}

func writeAPIError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(apiErrorBody(typ, code, msg))
}

// checkMessage validates an assistant message: role "assistant", content a
// string or null, tool_calls (if any) an array of function calls with string
// id, name and arguments; at least content or one tool call. It returns the
// message re-encoded (keys sorted) and its finish reason.
func checkMessage(b []byte) (*answer, error) {
	var f map[string]json.RawMessage
	if json.Valid(b) {
		f = objectFields(b) // keys match exactly, unlike encoding/json's
	}
	if f == nil {
		return nil, errors.New("the message is not a JSON object")
	}
	var role string
	if r := f["role"]; r == nil || r[0] != '"' || json.Unmarshal(r, &role) != nil || role != "assistant" {
		return nil, errors.New(`the message's role is not "assistant"`)
	}
	out := messageJSON{Role: "assistant"}
	if c := f["content"]; c != nil && (c[0] != '"' && string(c) != "null" || json.Unmarshal(c, &out.Content) != nil) {
		return nil, errors.New("the message's content is neither a string nor null")
	}
	finish := "stop"
	if tc := f["tool_calls"]; tc != nil && string(tc) != "null" {
		if tc[0] != '[' {
			return nil, errors.New("tool_calls is not an array of tool calls")
		}
		for i, c := range arrayElements(tc) {
			call, err := checkToolCall(c)
			if err != nil {
				return nil, fmt.Errorf("tool_calls[%d] needs a string id, type \"function\" and function.name and function.arguments strings (%v)", i, err)
			}
			out.ToolCalls = append(out.ToolCalls, call)
		}
		if len(out.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	if out.Content == nil && len(out.ToolCalls) == 0 {
		return nil, errors.New("the message has neither content nor tool calls")
	}
	enc, _ := json.Marshal(out)
	return &answer{Message: enc, FinishReason: finish}, nil
}

// checkToolCall reads one tool call of valid JSON, keys matched exactly.
func checkToolCall(b []byte) (toolCallJSON, error) {
	var tc toolCallJSON
	str := func(raw json.RawMessage, what string, dst *string) error {
		if raw == nil || raw[0] != '"' || json.Unmarshal(raw, dst) != nil {
			return fmt.Errorf("%s is not a string", what)
		}
		return nil
	}
	f := objectFields(b)
	if f == nil {
		return tc, errors.New("not an object")
	}
	if err := str(f["id"], "id", &tc.ID); err != nil {
		return tc, err
	}
	tc.Type = "function"
	if t := f["type"]; t != nil && string(t) != `"function"` {
		return tc, errors.New(`type is not "function"`)
	}
	fn := objectFields(f["function"])
	if fn == nil {
		return tc, errors.New("function is not an object")
	}
	if err := str(fn["name"], "function.name", &tc.Function.Name); err != nil {
		return tc, err
	}
	if tc.Function.Name == "" {
		return tc, errors.New("function.name is empty")
	}
	if err := str(fn["arguments"], "function.arguments", &tc.Function.Arguments); err != nil {
		return tc, err
	}
	return tc, nil
}

// completionMessage extracts choices[0].message and finish_reason from a
// chat completion body and validates the message.
func completionMessage(body []byte) (*answer, error) {
	if !json.Valid(body) {
		return nil, errors.New("the answer is not a chat completion: not JSON")
	}
	f := objectFields(body)
	if f == nil {
		return nil, errors.New("the answer is not a chat completion: not a JSON object")
	}
	ch := f["choices"]
	if ch == nil || ch[0] != '[' {
		return nil, errors.New("the answer has no choices array")
	}
	choices := arrayElements(ch)
	if len(choices) == 0 {
		return nil, errors.New("the answer has no choices")
	}
	c := objectFields(choices[0])
	if c == nil {
		return nil, errors.New("the answer's first choice is not an object")
	}
	a, err := checkMessage(c["message"])
	if err != nil {
		return nil, err
	}
	var fr string
	if raw := c["finish_reason"]; raw != nil && raw[0] == '"' && json.Unmarshal(raw, &fr) == nil && fr != "" && fr != "tool_calls" {
		a.FinishReason = fr
	}
	return a, nil
}

// clip shortens text for a message.
func clip(b []byte, n int) string {
	s := strings.ToValidUTF8(string(bytes.TrimSpace(b)), "?")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
