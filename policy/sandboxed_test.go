package policy_test

import (
	"encoding/json"
	"reflect"
	"runtime"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
)

func needSandbox(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox needs Linux")
	}
}

// TestPythonGateFixture: the gate's policy.py fixture runs in the sandbox:
// draft then refine, both calls metered on the scenario.
func TestPythonGateFixture(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, upstream.Options{}, meter.Options{})
	s := e.start(t, fixturePack(t, "../fixtures/scenarios/ok-policy-py"), policy.Options{})
	code, body := post(t, s, map[string]any{"messages": msgs("user", "fix the parser")})
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	json.Unmarshal(body, &resp)
	rec := s.Requests()[0]
	rs := receiptsOf(e, rec.Seqs)
	if got := modelsOf(rs); !reflect.DeepEqual(got, []string{"qwen3-235b-a22b-instruct-2507", "qwen3-coder-480b-a35b-instruct"}) {
		t.Fatalf("models %v (record %+v, failures %+v)", got, rec, s.Failures())
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" {
		t.Fatalf("answer %s", body)
	}
}
