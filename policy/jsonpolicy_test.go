package policy_test

import (
	"encoding/json"
	"fmt"
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

// traceRequests returns the request bodies the meter saw for seqs.
func traceRequests(t *testing.T, e *env, seqs []int64) []map[string]any {
	t.Helper()
	want := map[int64]bool{}
	for _, s := range seqs {
		want[s] = true
	}
	var out []map[string]any
	for _, te := range e.m.Recorder().Trace() {
		if want[te.Seq] {
			var m map[string]any
			if err := json.Unmarshal([]byte(te.Request), &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
	}
	return out
}

func roles(ms any) string {
	var out []string
	for _, m := range ms.([]any) {
		out = append(out, m.(map[string]any)["role"].(string))
	}
	return strings.Join(out, ",")
}

// TestJSONRewritesAndSession: a step's request carries its rewrites (system
// prefix, dropped tools, truncated history, max_tokens, an exact decimal
// temperature), the session keeps the task and its last messages, and a
// sticky route stays.
func TestJSONRewritesAndSession(t *testing.T) {
	e := newEnv(t, upstream.Options{}, meter.Options{})
	pol := `{"schema": "feval.policy.v1",
	  "session": {"sticky_route": true, "keep_messages": 3, "keep_task": true},
	  "routes": [
	    {"name": "first", "match": {"last_role": "user", "has_role": "system"}, "mode": "single",
	     "steps": [{"model": "glm-4.5", "max_tokens": 77, "temperature_milli": 250,
	                "rewrite": {"system_prefix": "Be brief.", "drop_tools": true, "truncate_history": 2}}]},
	    {"name": "other", "mode": "single", "steps": [{"model": "gpt-oss-120b"}]}]}`
	s := e.start(t, loadPack(t, writePack(t, map[string]string{"policy.json": pol})), policy.Options{})
	ms := msgs("system", "You are an agent.", "user", "TASK: fix it", "assistant", "a1", "user", "u2", "assistant", "a2", "user", "u3")
	code, body := post(t, s, map[string]any{"messages": ms[:2], "tools": shellTool, "max_completion_tokens": 9, "temperature": 1})
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	code, body = post(t, s, map[string]any{"messages": ms, "tools": shellTool})
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	recs := s.Requests()
	if recs[0].Route != "first" || recs[1].Route != "first" {
		t.Fatalf("routes %q %q: the first route is sticky", recs[0].Route, recs[1].Route)
	}
	reqs := traceRequests(t, e, append(recs[0].Seqs, recs[1].Seqs...))
	first, second := reqs[0], reqs[1]
	if first["model"] != "glm-4.5" || first["max_tokens"] != float64(77) || first["max_completion_tokens"] != nil ||
		first["temperature"] != 0.25 || first["tools"] != nil {
		t.Errorf("first request %v", first)
	}
	sys := first["messages"].([]any)[0].(map[string]any)["content"]
	if sys != "Be brief.\n\nYou are an agent." {
		t.Errorf("system message %q", sys)
	}
	// keep_messages 3 keeps a2,u3 and u2 of the others, keep_task puts the task
	// back after the system message; truncate_history 2 then keeps the last 2.
	if got := roles(second["messages"]); got != "system,assistant,user" {
		t.Errorf("second request roles %s: %v", got, second["messages"])
	}
	raw := e.m.Recorder().Trace()[1].Request
	if !strings.Contains(raw, `"temperature":0.25`) {
		t.Errorf("temperature not written as an exact decimal: %s", raw)
	}
}

// TestJSONKeepTask: keep_task puts the first request's task back after the
// system messages when keep_messages cut it.
func TestJSONKeepTask(t *testing.T) {
	e := newEnv(t, upstream.Options{}, meter.Options{})
	pol := `{"schema": "feval.policy.v1", "session": {"keep_messages": 2, "keep_task": true},
	  "routes": [{"name": "only", "mode": "single", "steps": [{"model": "gpt-oss-120b"}]}]}`
	s := e.start(t, loadPack(t, writePack(t, map[string]string{"policy.json": pol})), policy.Options{})
	ms := msgs("system", "S", "user", "TASK", "assistant", "a1", "user", "u2", "assistant", "a2", "user", "u3")
	post(t, s, map[string]any{"messages": ms[:2]})
	post(t, s, map[string]any{"messages": ms})
	reqs := traceRequests(t, e, s.Requests()[1].Seqs)
	var texts []string
	for _, m := range reqs[0]["messages"].([]any) {
		texts = append(texts, m.(map[string]any)["content"].(string))
	}
	if got := strings.Join(texts, ","); got != "S,TASK,a2,u3" {
		t.Fatalf("messages %s", got)
	}
}

// TestJSONFallbacks: a step whose model the cap refuses, or whose upstream
// fails, falls back to the next model with the same input; the refused and
// failed calls stay in the receipts.
func TestJSONFallbacks(t *testing.T) {
	e := newEnv(t, upstream.Options{}, meter.Options{})
	cfg := e.m.Config()
	for i := range cfg.Models {
		if cfg.Models[i].Name == "kimi-k2-instruct" {
			cfg.Models[i].Upstream = "http://127.0.0.1:9/v1" // nothing listens
		}
	}
	m, err := meter.New(cfg, meter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e.m = m
	e.sc, _ = m.Scenario("scenario-02")
	pol := `{"schema": "feval.policy.v1", "routes": [
	  {"name": "big", "match": {"contains": "big"}, "mode": "single",
	   "steps": [{"model": "mistral-large-2411", "max_tokens": 65536, "fallbacks": ["gpt-oss-120b"]}]},
	  {"name": "down", "mode": "parallel", "combine": "first",
	   "steps": [{"model": "kimi-k2-instruct", "fallbacks": ["deepseek-v3.1"]}, {"model": "glm-4.5"}]}]}`
	s := e.start(t, loadPack(t, writePack(t, map[string]string{"policy.json": pol})), policy.Options{})
	if code, body := post(t, s, map[string]any{"messages": msgs("user", "a big job")}); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if code, body := post(t, s, map[string]any{"messages": msgs("user", "another job")}); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var got []string
	for _, r := range s.Requests() {
		for _, rc := range receiptsOf(e, r.Seqs) {
			got = append(got, rc.Model+":"+rc.Outcome)
		}
	}
	want := []string{"mistral-large-2411:refused_cap", "gpt-oss-120b:ok",
		"kimi-k2-instruct:upstream_error", "glm-4.5:ok", "deepseek-v3.1:ok"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
}

// TestJSONAllFail: when every model of a step fails, the agent gets the
// meter's last error unchanged, and it is not a policy failure.
func TestJSONAllFail(t *testing.T) {
	e := newEnv(t, upstream.Options{}, meter.Options{})
	pol := `{"schema": "feval.policy.v1", "routes": [{"name": "r", "mode": "single",
	  "steps": [{"model": "mistral-large-2411", "max_tokens": 65536, "fallbacks": ["mistral-large-2411"]}]}]}`
	s := e.start(t, loadPack(t, writePack(t, map[string]string{"policy.json": pol})), policy.Options{})
	code, body := post(t, s, map[string]any{"messages": msgs("user", "x")})
	if code != 402 || !strings.Contains(string(body), `"cap_exceeded"`) || len(s.Failures()) != 0 {
		t.Fatalf("%d %s %+v", code, body, s.Failures())
	}
}

// TestJSONStreaming: with "stream" set, the final step's model streams and
// its events reach the agent as the meter relays them; without it, the
// final answer is sent as events once complete, tool calls included.
func TestJSONStreaming(t *testing.T) {
	for _, relay := range []bool{true, false} {
		e := newEnv(t, upstream.Options{}, meter.Options{})
		pol := fmt.Sprintf(`{"schema": "feval.policy.v1", "stream": %v, "routes": [{"name": "r", "mode": "sequence",
		  "steps": [{"model": "gpt-oss-120b"}, {"model": "deepseek-v3.1"}]}]}`, relay)
		s := e.start(t, loadPack(t, writePack(t, map[string]string{"policy.json": pol})), policy.Options{})
		for _, tools := range []bool{false, true} {
			body := map[string]any{"messages": msgs("user", "go"), "stream": true, "stream_options": map[string]any{"include_usage": true}}
			if tools {
				body["tools"] = shellTool
			}
			code, out := post(t, s, body)
			rec := s.Requests()[len(s.Requests())-1]
			rs := receiptsOf(e, rec.Seqs)
			if code != 200 || len(rs) != 2 || rs[1].Stream != relay || rs[0].Stream {
				t.Fatalf("relay %v tools %v: %d, receipts %+v", relay, tools, code, rs)
			}
			text := string(out)
			if !strings.HasSuffix(text, "data: [DONE]\n\n") || !strings.Contains(text, `"usage"`) {
				t.Fatalf("relay %v: stream %s", relay, text)
			}
			if tools != strings.Contains(text, `"tool_calls"`) {
				t.Fatalf("relay %v tools %v: stream %s", relay, tools, text)
			}
			if !tools && answerText(out) == "" {
				t.Fatalf("relay %v: no content in %s", relay, text)
			}
		}
	}
}
