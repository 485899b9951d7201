package policy_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
)

const routedPolicy = `{
  "schema": "feval.policy.v1",
  "routes": [
    {"name": "tools", "match": {"has_tools": true}, "mode": "sequence",
     "steps": [{"model": "gpt-oss-120b"}, {"model": "deepseek-v3.1", "instruction": "Check it."}]},
    {"name": "errors", "match": {"pattern": "error"}, "mode": "parallel",
     "steps": [{"model": "kimi-k2-instruct"}, {"model": "glm-4.5"}, {"model": "gpt-oss-120b"}],
     "combine": "judge", "judge": {"model": "qwen3-235b-a22b-instruct-2507"}},
    {"name": "late", "match": {"min_turn": 3}, "mode": "single", "steps": [{"model": "llama-4-maverick-17b-128e-instruct"}]},
    {"name": "default", "mode": "single", "steps": [{"model": "qwen3-coder-480b-a35b-instruct"}]}
  ]
}`

// TestJSONRoutes: each request takes the route its features select, and its
// model calls are the meter's receipts, in step order.
func TestJSONRoutes(t *testing.T) {
	e := newEnv(t, upstream.Options{}, meter.Options{})
	s := e.start(t, loadPack(t, writePack(t, map[string]string{"policy.json": routedPolicy})), policy.Options{})
	cases := []struct {
		name   string
		body   map[string]any
		route  string
		models []string
	}{
		{"plain", map[string]any{"messages": msgs("user", "hello")}, "default", []string{"qwen3-coder-480b-a35b-instruct"}},
		{"tools", map[string]any{"messages": msgs("user", "list files"), "tools": shellTool}, "tools", []string{"gpt-oss-120b", "deepseek-v3.1"}},
		{"error", map[string]any{"messages": msgs("user", "I get an Error: boom")}, "errors",
			[]string{"kimi-k2-instruct", "glm-4.5", "gpt-oss-120b", "qwen3-235b-a22b-instruct-2507"}},
		{"turn 4", map[string]any{"messages": msgs("user", "hello")}, "late", []string{"llama-4-maverick-17b-128e-instruct"}},
	}
	for i, c := range cases {
		code, body := post(t, s, c.body)
		if code != 200 {
			t.Fatalf("%s: %d %s", c.name, code, body)
		}
		rec := s.Requests()[i]
		if rec.Turn != i+1 || rec.Route != c.route {
			t.Errorf("%s: record %+v, want route %s", c.name, rec, c.route)
		}
		rs := receiptsOf(e, rec.Seqs)
		if got := modelsOf(rs); !reflect.DeepEqual(got, c.models) {
			t.Errorf("%s: models %v, want %v", c.name, got, c.models)
		}
		var resp struct {
			ID      string `json:"id"`
			Choices []struct {
				Message map[string]any `json:"message"`
			} `json:"choices"`
			Usage struct {
				Prompt int64 `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(body, &resp); err != nil || len(resp.Choices) != 1 || resp.Choices[0].Message["role"] != "assistant" {
			t.Fatalf("%s: answer %s", c.name, body)
		}
		var in int64
		for _, rc := range rs {
			in += rc.InputTokens
		}
		if resp.Usage.Prompt != in || !strings.HasSuffix(resp.ID, "-"+string(rune('0'+i+1))) {
			t.Errorf("%s: usage %d want %d, id %s", c.name, resp.Usage.Prompt, in, resp.ID)
		}
	}
	if len(s.Failures()) != 0 {
		t.Fatalf("failures %+v", s.Failures())
	}
}
