package policy_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
)

// scriptedTasks are small scripted tasks of the fixture upstream: five tool
// steps of rising difficulty, then a final answer.
func scriptedTasks() map[string]upstream.Script {
	out := map[string]upstream.Script{}
	for i, base := range []int{350, 450, 550} {
		var st []upstream.Step
		for j := 0; j < 5; j++ {
			tool, args := "shell", fmt.Sprintf(`{"cmd":"step %d of task %d"}`, j, i)
			if j%2 == 1 {
				tool, args = "write_file", fmt.Sprintf(`{"path":"f%d.py","content":"fix %d"}`, j, i)
			}
			st = append(st, upstream.Step{Tool: tool, Arguments: args, Difficulty: base + 80*j})
		}
		st = append(st, upstream.Step{Content: "All tests pass.", Difficulty: base})
		out[fmt.Sprintf("task-%d", i)] = upstream.Script{Steps: st}
	}
	return out
}

var agentTools = []any{
	map[string]any{"type": "function", "function": map[string]any{"name": "shell", "parameters": map[string]any{"type": "object"}}},
	map[string]any{"type": "function", "function": map[string]any{"name": "write_file", "parameters": map[string]any{"type": "object"}}},
}

// runSession is a minimal agent loop: it sends the task, executes each tool
// call against the script (a call with the script's arguments succeeds) and
// counts the steps solved.
func runSession(t *testing.T, s *policy.Sidecar, task string, sc upstream.Script) int {
	t.Helper()
	ms := []map[string]any{
		{"role": "system", "content": "You are a coding agent. Use the tools."},
		{"role": "user", "content": "[fixture-task:" + task + "] Make the tests pass."},
	}
	solved := 0
	for turn, st := range sc.Steps {
		code, body := post(t, s, map[string]any{"model": "feval-policy", "messages": ms, "tools": agentTools})
		if code != 200 {
			t.Fatalf("%s turn %d: %d %s", task, turn, code, body)
		}
		var c struct {
			Choices []struct {
				Message map[string]any `json:"message"`
			} `json:"choices"`
		}
		json.Unmarshal(body, &c)
		msg := c.Choices[0].Message
		ms = append(ms, msg)
		calls, _ := msg["tool_calls"].([]any)
		if st.Tool == "" {
			if msg["content"] == st.Content {
				solved++
			}
			break
		}
		result := "error: the call failed"
		if len(calls) > 0 {
			call := calls[0].(map[string]any)
			fn := call["function"].(map[string]any)
			if fn["name"] == st.Tool && fn["arguments"] == st.Arguments {
				solved++
				result = "ok"
			}
			ms = append(ms, map[string]any{"role": "tool", "tool_call_id": call["id"], "content": result})
		} else {
			ms = append(ms, map[string]any{"role": "user", "content": result})
		}
	}
	return solved
}

// TestReferencePacksQualityAndCost: on the same scripted tasks, the
// reference packs' routing choices give different quality and cost, as the
// fixture models' strengths and the frozen prices imply: the cheap pack is
// the cheapest and weakest, the strong pack solves more at a higher cost,
// and reviewing a cheap draft with deepseek-v3.1 (strong and cheap) solves
// more than the cheap pack for less than the strong one.
func TestReferencePacksQualityAndCost(t *testing.T) {
	needSandbox(t)
	tasks := scriptedTasks()
	type score struct{ solved, cost int64 }
	scores := map[string]score{}
	for _, name := range []string{"cheap", "strong", "draft-review", "parallel-judge", "majority-fallback", "py-session", "py-stream", "server"} {
		e := newEnv(t, upstream.Options{Scripts: tasks}, meter.Options{})
		pack := fixturePack(t, filepath.Join(packsDir, name, "pack"))
		var sc score
		for _, task := range []string{"task-0", "task-1", "task-2"} {
			sce, err := e.m.Scenario(task)
			if err != nil {
				t.Fatal(err)
			}
			s, err := policy.Start(t.Context(), pack, policy.Options{Scenario: sce})
			if err != nil {
				t.Fatal(err)
			}
			sc.solved += int64(runSession(t, s, task, tasks[task]))
			if f := s.Failures(); len(f) > 0 {
				t.Errorf("%s: failures %+v", name, f)
			}
			s.Close()
		}
		for _, sum := range meter.Summarize(e.m.Recorder().Receipts()) {
			sc.cost += sum.CostMicroUSD
		}
		scores[name] = sc
		t.Logf("%-18s solved %2d of 18 steps, %6d micro-USD", name, sc.solved, sc.cost)
	}
	cheap, strong, review := scores["cheap"], scores["strong"], scores["draft-review"]
	if !(cheap.solved < strong.solved && cheap.cost < strong.cost) {
		t.Errorf("cheap %+v should solve less and cost less than strong %+v", cheap, strong)
	}
	if !(review.solved > cheap.solved && review.cost < strong.cost) {
		t.Errorf("draft-review %+v should solve more than cheap %+v and cost less than strong %+v", review, cheap, strong)
	}
	for name, sc := range scores {
		if name != "cheap" && sc.cost <= cheap.cost {
			t.Errorf("%s costs %d, not more than the cheapest pack's %d", name, sc.cost, cheap.cost)
		}
	}
}
