package policy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/feval/feval/gate"
)

func ans(t *testing.T, content string, calls ...string) *answer {
	t.Helper()
	m := map[string]any{"role": "assistant", "content": content}
	var tc []any
	for i, c := range calls {
		name, args, _ := strings.Cut(c, ":")
		tc = append(tc, map[string]any{"id": "id" + string(rune('a'+i)) + content, "type": "function",
			"function": map[string]any{"name": name, "arguments": args}})
	}
	if tc != nil {
		m["tool_calls"] = tc
	}
	b, _ := json.Marshal(m)
	a, err := checkMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func content(a *answer) string {
	var m struct {
		Content string `json:"content"`
	}
	json.Unmarshal(a.Message, &m)
	return m.Content
}

// TestCombine: each combiner picks or builds the documented answer, ties to
// the earliest step.
func TestCombine(t *testing.T) {
	x, y, z := ans(t, "x"), ans(t, " y "), ans(t, "y")
	call1, call2 := ans(t, "", `shell:{"cmd":"ls"}`), ans(t, "", `shell:{"cmd":"ls"}`)
	cases := []struct {
		name, how string
		good      []*answer
		want      string
	}{
		{"first", gate.CombineFirst, []*answer{x, y}, "x"},
		{"first_success", gate.CombineFirstSuccess, []*answer{y, x}, " y "},
		{"majority by trimmed content", gate.CombineMajority, []*answer{x, y, z}, " y "},
		{"majority tie to the earliest", gate.CombineMajority, []*answer{x, y}, "x"},
		{"majority of tool calls, ids ignored", gate.CombineMajority, []*answer{x, call1, call2}, ""},
		{"concat", gate.CombineConcat, []*answer{x, call1, z}, "x\n\ny"},
		{"shortest", gate.CombineShortest, []*answer{y, x, z}, "x"},
		{"longest", gate.CombineLongest, []*answer{x, y, z}, " y "},
	}
	for _, c := range cases {
		got := combine(c.how, c.good)
		if content(got) != c.want {
			t.Errorf("%s: %q, want %q", c.name, content(got), c.want)
		}
	}
	if got := combine(gate.CombineConcat, []*answer{x, call1}); got.FinishReason != "tool_calls" || !strings.Contains(string(got.Message), `"tool_calls"`) {
		t.Errorf("concat keeps the first tool calls: %s", got.Message)
	}
}

// TestCheckMessage: what counts as an assistant message (POLICY.md §1.1).
func TestCheckMessage(t *testing.T) {
	for _, c := range []struct {
		msg string
		ok  bool
	}{
		{`{"role":"assistant","content":"hi"}`, true},
		{`{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}`, true},
		{`{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}`, true},
		{`{"role":"user","content":"hi"}`, false},
		{`{"role":"assistant","content":42}`, false},
		{`{"role":"assistant","content":null}`, false},
		{`{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"","arguments":"{}"}}]}`, false},
		{`{"role":"assistant","content":"x","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}`, false},
		{`{"role":"assistant","content":"x","tool_calls":[{"id":"a","type":"web","function":{"name":"f","arguments":"{}"}}]}`, false},
		{`{"role":"assistant","content":"x","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":{}}}]}`, false},
		{`[]`, false},
		{`{"ROLE":"assistant","content":"x"}`, false},
		{`{"role":"assistant","Content":"x"}`, false},
		{`{"role":"assistant","content":"x","tool_calls":{}}`, false},
		{`{"role":"assistant","content":null,"tool_calls":[{"ID":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}`, false},
		{`"text"`, false},
	} {
		if _, err := checkMessage([]byte(c.msg)); (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v", c.msg, err, c.ok)
		}
	}
}

// FuzzAgentRequest: the agent's request parser never panics, and a request
// it accepts has messages with roles.
func FuzzAgentRequest(f *testing.F) {
	for _, s := range []string{`{"messages":[{"role":"user","content":"x"}]}`, `{"messages":[],"stream":true}`, `{"messages":[{"role":"a","role":"user","content":"x\\"y"}, {"ro\u006ce":"tool","content":null}]}`,
		` { "messages" : [ { "content" : [1, {"a":"]"}], "role" : "system" } ] } `, `{"messages":[{"Role":"user"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{}],"stream_options":{"include_usage":true}}`, `null`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseAgentRequest(b)
		if err != nil {
			return
		}
		if len(r.messages) == 0 || len(r.msgs) != len(r.messages) {
			t.Fatalf("accepted %q without messages", b)
		}
		// The scanners agree with encoding/json.
		var want []json.RawMessage
		if err := json.Unmarshal(r.fields["messages"], &want); err != nil || len(want) != len(r.messages) {
			t.Fatalf("%q: split into %d messages, encoding/json %d (%v)", b, len(r.messages), len(want), err)
		}
		for i := range want {
			if !bytes.Equal(compactJSON(want[i]), compactJSON(r.messages[i])) {
				t.Fatalf("%q: message %d is %s, want %s", b, i, r.messages[i], want[i])
			}
			var fields map[string]json.RawMessage
			var role string
			if json.Unmarshal(want[i], &fields) != nil || json.Unmarshal(fields["role"], &role) != nil || role != r.msgs[i].role {
				t.Fatalf("%q: message %d role %q", b, i, r.msgs[i].role)
			}
			if !bytes.Equal(compactJSON(fields["content"]), compactJSON(r.msgs[i].content)) {
				t.Fatalf("%q: message %d content %s, want %s", b, i, r.msgs[i].content, fields["content"])
			}
		}
	})
}

// FuzzPolicyAnswer: a sandboxed policy's answer, plain or streamed, is
// checked without panicking; an accepted message re-checks the same.
func FuzzPolicyAnswer(f *testing.F) {
	for _, s := range []string{`{"choices":[{"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}]}`,
		`{"choices":[{"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]}}]}`,
		`{"choices":[]}`, `{}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if a, err := completionMessage(b); err == nil {
			if _, err := checkMessage(a.Message); err != nil {
				t.Fatalf("re-check of %s: %v", a.Message, err)
			}
		}
		var asm assembler
		if asm.add(b) == nil {
			checkMessage(asm.message())
		}
	})
}

func compactJSON(b []byte) []byte {
	if b == nil {
		return nil
	}
	var out bytes.Buffer
	json.Compact(&out, b)
	return out.Bytes()
}

// TestPatterns: every pattern the gate accepts has its expression here, and
// each matches what POLICY.md says it does.
func TestPatterns(t *testing.T) {
	if len(gate.Patterns) != len(PatternExpressions) {
		t.Fatalf("gate has %d patterns, the sidecar %d", len(gate.Patterns), len(PatternExpressions))
	}
	cases := map[string][2]string{
		"code":         {"see\n```go\nx := 1\n```", "inline `code` only"},
		"diff":         {"--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@", "a -- b"},
		"error":        {"Traceback (most recent call last):", "all green"},
		"failing_test": {"FAILED tests/test_x.py::test_y", "42 passed"},
		"path":         {"look at src/parser.py please", "no file here."},
		"question":     {"does it work? ", "it works."},
	}
	for _, p := range gate.Patterns {
		if _, ok := PatternExpressions[p]; !ok {
			t.Errorf("pattern %s has no expression", p)
		}
		c, ok := cases[p]
		if !ok {
			t.Errorf("pattern %s has no test case", p)
			continue
		}
		if !patterns()[p].MatchString(c[0]) || patterns()[p].MatchString(c[1]) {
			t.Errorf("pattern %s: %q should match, %q should not", p, c[0], c[1])
		}
	}
}
