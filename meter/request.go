package meter

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/opencontainers/go-digest"
)

// chatRequest is what the meter reads of a chat completion request. Everything
// else (messages, tools, tool_choice, sampling parameters) is passed through
// unchanged.
type chatRequest struct {
	Model        string
	Stream       bool
	IncludeUsage bool
	// MaxTokens is the output bound the call reserves: max_completion_tokens,
	// else max_tokens, else the task's default (Defaulted).
	MaxTokens int64
	Defaulted bool
	// Canonical is the canonical form of the body; Digest its SHA-256.
	Canonical []byte
	Digest    digest.Digest
}

// requestError is a request the meter refuses before admission.
type requestError struct {
	status         int
	typ, code, msg string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(code, format string, a ...any) *requestError {
	return &requestError{status: 400, typ: "invalid_request_error", code: code, msg: fmt.Sprintf(format, a...)}
}

// parseChatRequest validates a request body: canonical JSON (see
// CanonicalRequest), an object with a non-empty string "model", a non-empty array
// "messages", a boolean "stream" if present, and integer token bounds within
// range. defaultMax is the task's default output bound.
func parseChatRequest(raw []byte, defaultMax int64) (*chatRequest, *requestError) {
	canon, err := CanonicalRequest(raw)
	if err != nil {
		return nil, badRequest("invalid_json", "the request body is not valid JSON: %v", err)
	}
	if len(canon) == 0 || canon[0] != '{' {
		return nil, badRequest("invalid_request", "the request body must be a JSON object")
	}
	// A map, not a struct: encoding/json matches struct fields case-insensitively.
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(canon, &obj); err != nil {
		return nil, badRequest("invalid_request", "the request body must be a JSON object: %v", err)
	}
	field := func(k string) *json.RawMessage {
		if v, ok := obj[k]; ok {
			return &v
		}
		return nil
	}
	f := struct{ Model, Messages, Stream, StreamOptions, MaxTokens, MaxCompletion, N *json.RawMessage }{
		field("model"), field("messages"), field("stream"), field("stream_options"),
		field("max_tokens"), field("max_completion_tokens"), field("n")}
	r := &chatRequest{Canonical: canon, Digest: digest.FromBytes(canon)}
	if f.Model == nil || json.Unmarshal(*f.Model, &r.Model) != nil || r.Model == "" {
		return nil, badRequest("missing_model", "\"model\" must be a non-empty string naming an allowlisted model (GET /v1/models lists them)")
	}
	var msgs []json.RawMessage
	if f.Messages == nil || json.Unmarshal(*f.Messages, &msgs) != nil || len(msgs) == 0 {
		return nil, badRequest("invalid_messages", "\"messages\" must be a non-empty array of chat messages")
	}
	if f.Stream != nil && !isNull(*f.Stream) && json.Unmarshal(*f.Stream, &r.Stream) != nil {
		return nil, badRequest("invalid_stream", "\"stream\" must be true or false")
	}
	if f.StreamOptions != nil && !isNull(*f.StreamOptions) {
		var so struct {
			IncludeUsage *bool `json:"include_usage"`
		}
		if json.Unmarshal(*f.StreamOptions, &so) != nil {
			return nil, badRequest("invalid_stream_options", "\"stream_options\" must be an object with a boolean \"include_usage\"")
		}
		r.IncludeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	}
	if f.N != nil && !isNull(*f.N) && string(*f.N) != "1" {
		return nil, badRequest("unsupported_n", "\"n\" must be 1: the meter prices one choice per call")
	}
	bound := func(name string, raw *json.RawMessage) (int64, bool, *requestError) {
		if raw == nil || isNull(*raw) {
			return 0, false, nil
		}
		var n int64
		if err := json.Unmarshal(*raw, &n); err != nil || n < 1 || n > MaxTokensLimit {
			return 0, false, badRequest("invalid_"+name, "%q must be an integer from 1 to %d", name, MaxTokensLimit)
		}
		return n, true, nil
	}
	mc, okc, rerr := bound("max_completion_tokens", f.MaxCompletion)
	if rerr != nil {
		return nil, rerr
	}
	mt, okt, rerr := bound("max_tokens", f.MaxTokens)
	if rerr != nil {
		return nil, rerr
	}
	switch {
	case okc:
		r.MaxTokens = mc
	case okt:
		r.MaxTokens = mt
	default:
		r.MaxTokens, r.Defaulted = defaultMax, true
	}
	return r, nil
}

func isNull(b []byte) bool { return bytes.Equal(b, []byte("null")) }

// forwardBody is the body sent upstream: the client's bytes unchanged unless the
// meter must set something (docs/METER.md, "Forwarding"): "model" when the
// upstream knows the model by another name, "max_tokens" when the request named
// no bound (the reserved default), and stream_options.include_usage for a
// streamed request (the meter needs the usage to settle).
func forwardBody(raw []byte, r *chatRequest, upstreamModel string) ([]byte, error) {
	if upstreamModel == r.Model && !r.Defaulted && (!r.Stream || r.IncludeUsage) {
		return raw, nil
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if upstreamModel != r.Model {
		b, _ := json.Marshal(upstreamModel)
		m["model"] = b
	}
	if r.Defaulted {
		m["max_tokens"] = json.RawMessage(fmt.Sprint(r.MaxTokens))
	}
	if r.Stream && !r.IncludeUsage {
		var so map[string]json.RawMessage
		if v, ok := m["stream_options"]; ok && !isNull(v) {
			if err := json.Unmarshal(v, &so); err != nil {
				return nil, err
			}
		}
		if so == nil {
			so = map[string]json.RawMessage{}
		}
		so["include_usage"] = json.RawMessage("true")
		b, err := json.Marshal(so)
		if err != nil {
			return nil, err
		}
		m["stream_options"] = b
	}
	return json.Marshal(m)
}
