package policy_test

import (
	"os"
	"strings"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
)

// TestDocExamples: the policy.json and policy.py examples of POLICY.md pass
// the gate and answer requests through the sidecar.
func TestDocExamples(t *testing.T) {
	needSandbox(t)
	doc, err := os.ReadFile("../docs/POLICY.md")
	if err != nil {
		t.Fatal(err)
	}
	block := func(lang, contains string) string {
		for _, part := range strings.Split(string(doc), "```"+lang+"\n")[1:] {
			code, _, _ := strings.Cut(part, "```")
			if strings.Contains(code, contains) {
				return code
			}
		}
		t.Fatalf("POLICY.md has no %s block with %q", lang, contains)
		return ""
	}
	for _, files := range []map[string]string{
		{"policy.json": block("json", `"schema": "feval.policy.v1"`)},
		{"policy.py": block("python", "def route(request, call)")},
	} {
		e := newEnv(t, upstream.Options{}, meter.Options{})
		s := e.start(t, loadPack(t, writePack(t, files)), policy.Options{})
		for _, body := range []map[string]any{
			{"messages": msgs("system", "S", "user", "fix it")},
			{"messages": msgs("user", "Error: it broke"), "tools": shellTool},
			{"messages": msgs("user", "again"), "tools": shellTool, "stream": true},
		} {
			if code, out := post(t, s, body); code != 200 {
				t.Fatalf("%v: %d %s", files, code, out)
			}
		}
		if len(s.Failures()) > 0 || len(e.m.Recorder().Receipts()) < 3 {
			t.Fatalf("failures %+v, %d calls", s.Failures(), len(e.m.Recorder().Receipts()))
		}
	}
}
