package policy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// maxBatch bounds the calls of one POST /feval/v1/call_all.
const maxBatch = 8

// outbound serves a sandboxed policy's only route out (docs/POLICY.md §6):
// the scenario's meter, admitted only while an agent request is answered and
// at most Limits.CallsPerRequest times per request.
func (s *Sidecar) outbound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/models":
			s.sc.ServeHTTP(w, r)
		case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
			in, ok := s.admitCalls(w, 1)
			if !ok {
				return
			}
			defer in.wg.Done()
			if name := r.Header.Get(RouteHeader); name != "" && len(name) <= 64 {
				s.gmu.Lock()
				in.route = name
				s.gmu.Unlock()
			}
			s.sc.ServeHTTP(w, r)
		case r.URL.Path == "/feval/v1/call_all" && r.Method == http.MethodPost:
			s.callAll(w, r)
		default:
			writeAPIError(w, 404, "invalid_request_error", "unknown_url",
				fmt.Sprintf("unknown route %s %s: the policy's route out serves /v1/chat/completions, /v1/models and /feval/v1/call_all", r.Method, r.URL.Path))
		}
	})
}

// RouteHeader, on a policy's model call, names the route it takes for the
// request record (the SDK's route_name sets it).
const RouteHeader = "Feval-Route"

// admitCalls counts n calls against the request in flight, or answers the
// refusal. On success the caller must call in.wg.Done once.
func (s *Sidecar) admitCalls(w http.ResponseWriter, n int) (*inflight, bool) {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	in := s.active
	switch {
	case in == nil:
		writeAPIError(w, http.StatusConflict, "policy_error", "policy_idle", "no agent request is being answered: a policy calls models only while it answers one")
		return nil, false
	case in.calls+n > s.limits.CallsPerRequest:
		in.flood = true
		writeAPIError(w, http.StatusTooManyRequests, "policy_error", "policy_call_limit",
			fmt.Sprintf("a policy may make at most %d model calls per request", s.limits.CallsPerRequest))
		return nil, false
	}
	in.calls += n
	in.wg.Add(1)
	return in, true
}

func (s *Sidecar) callAll(w http.ResponseWriter, r *http.Request) {
	limit := s.sc.Meter().Config().MaxRequestBytes * maxBatch
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil || int64(len(b)) > limit {
		writeAPIError(w, 413, "invalid_request_error", "request_too_large", "the batch is unreadable or too large")
		return
	}
	var batch struct {
		Requests []json.RawMessage `json:"requests"`
	}
	if json.Unmarshal(b, &batch) != nil || len(batch.Requests) == 0 || len(batch.Requests) > maxBatch {
		writeAPIError(w, 400, "invalid_request_error", "invalid_batch", fmt.Sprintf(`the body must be {"requests":[...]} with 1 to %d chat requests`, maxBatch))
		return
	}
	bodies := make([][]byte, len(batch.Requests))
	for i, rq := range batch.Requests {
		var probe struct {
			Stream bool `json:"stream"`
		}
		if json.Unmarshal(rq, &probe) == nil && probe.Stream {
			writeAPIError(w, 400, "invalid_request_error", "invalid_batch", fmt.Sprintf("requests[%d]: a batch call is not streamed", i))
			return
		}
		bodies[i] = rq
	}
	in, ok := s.admitCalls(w, len(bodies))
	if !ok {
		return
	}
	defer in.wg.Done()
	type resp struct {
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	}
	out := struct {
		Responses []resp `json:"responses"`
	}{}
	for _, res := range s.sc.CallAll(r.Context(), bodies) {
		out.Responses = append(out.Responses, resp{Status: res.Status, Body: jsonOrString(res.Body)})
	}
	enc, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/json")
	w.Write(enc)
}

func jsonOrString(b []byte) json.RawMessage {
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}
