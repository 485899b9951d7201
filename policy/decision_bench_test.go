package policy

import (
	"encoding/json"
	"testing"

	"github.com/feval/feval/gate"
)

// BenchmarkDecision is a policy.json decision alone: parsing the agent's
// request, matching five routes, applying the session and the step's
// rewrites and writing the model's request body.
func BenchmarkDecision(b *testing.B) {
	pol := []byte(`{"schema": "feval.policy.v1", "session": {"keep_messages": 64, "keep_task": true}, "routes": [
	  {"name": "errors", "match": {"pattern": "error", "has_tools": true}, "mode": "single", "steps": [{"model": "kimi-k2-instruct"}]},
	  {"name": "late", "match": {"min_messages": 5000}, "mode": "single", "steps": [{"model": "glm-4.5"}]},
	  {"name": "tools", "match": {"last_role": "tool"}, "mode": "single", "steps": [{"model": "glm-4.5"}]},
	  {"name": "plain", "match": {"has_tools": false}, "mode": "single", "steps": [{"model": "glm-4.5"}]},
	  {"name": "default", "mode": "single", "steps": [{"model": "deepseek-v3.1", "rewrite": {"system_prefix": "Be brief."}}]}]}`)
	p, vs := gate.ParsePolicy(pol, []string{"kimi-k2-instruct", "glm-4.5", "deepseek-v3.1"})
	if len(vs) > 0 {
		b.Fatal(vs)
	}
	ms := []map[string]any{{"role": "system", "content": "You are a coding agent working in a repository."}}
	for i := 0; i < 5; i++ {
		ms = append(ms, map[string]any{"role": "user", "content": "Run the tests and fix what fails in parser.py, then report."},
			map[string]any{"role": "assistant", "content": "I ran the tests; two fail in tests/test_parser.py."})
	}
	ms = append(ms, map[string]any{"role": "user", "content": "Now fix the failing test."})
	raw, _ := json.Marshal(map[string]any{"model": "feval-policy", "messages": ms,
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "shell"}}}})
	e := &jsonEngine{p: p}
	b.ReportAllocs()
	b.ResetTimer()
	defer CPUTimer(b)()
	for i := 0; i < b.N; i++ {
		req, err := parseAgentRequest(raw)
		if err != nil {
			b.Fatal(err)
		}
		r, msgs := e.decide(2, req)
		if r.Name != "default" {
			b.Fatal(r.Name)
		}
		e.stepBody(req, &r.Steps[0], r.Steps[0].Model, msgs, nil, false)
	}
}
