package meter_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
)

// TestOpenAINodeClient drives the meter with the official openai npm package
// (pinned in testdata/openai-client/package-lock.json; installed with npm ci,
// see 'make node-deps') and checks what the client saw against the receipts.
func TestOpenAINodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: run 'make node-deps'")
	}
	dir := filepath.Join("testdata", "openai-client")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	up := upstream.New(upstream.Options{})
	up.AddScript("node-tool", upstream.Script{Steps: []upstream.Step{
		{Tool: "write_file", Arguments: `{"content":"print('ok')\n","path":"fix.py"}`, Difficulty: 100}}})
	url, stop, err := upstream.Start(up)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	m, base := newMeter(t, testConfig(t, url), meter.Options{})
	cmd := exec.Command(node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "METER_BASE_URL="+base, "METER_SCENARIO=node")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client: %v\n%s", err, out)
	}
	type usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	}
	var got struct {
		Plain struct {
			ID      string `json:"id"`
			Usage   usage  `json:"usage"`
			Content string `json:"content"`
		} `json:"plain"`
		Stream struct {
			ID      string `json:"id"`
			Usage   *usage `json:"usage"`
			Content string `json:"content"`
			Chunks  int    `json:"chunks"`
		} `json:"stream"`
		Tool struct {
			ID        string `json:"id"`
			Usage     usage  `json:"usage"`
			Finish    string `json:"finish"`
			ToolCalls []struct {
				Type     string `json:"type"`
				Function struct {
					Name, Arguments string
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"tool"`
		ToolStream struct {
			ID    string `json:"id"`
			Usage *usage `json:"usage"`
			Calls []struct {
				Name, Arguments string
			} `json:"calls"`
		} `json:"toolStream"`
		Refused struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
			Type   string `json:"type"`
		} `json:"refused"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	rs := m.Recorder().Receipts()
	if len(rs) != 5 {
		t.Fatalf("%d receipts: %+v", len(rs), rs)
	}
	check := func(r meter.Receipt, model, id string, u usage, stream bool) {
		t.Helper()
		if r.Scenario != "node" || r.Model != model || r.Outcome != meter.OutcomeOK || r.ResponseID != id || r.Stream != stream ||
			r.InputTokens != u.PromptTokens || r.OutputTokens != u.CompletionTokens || r.CostMicroUSD == 0 {
			t.Fatalf("receipt %+v does not match what the client saw (id %s, usage %+v)", r, id, u)
		}
	}
	check(rs[0], "kimi-k2-instruct", got.Plain.ID, got.Plain.Usage, false)
	if got.Plain.Content == "" {
		t.Fatal("plain call: no content")
	}
	if got.Stream.Usage == nil || got.Stream.Content == "" || got.Stream.Chunks < 3 {
		t.Fatalf("stream: %+v", got.Stream)
	}
	check(rs[1], "glm-4.5", got.Stream.ID, *got.Stream.Usage, true)
	check(rs[2], "deepseek-v3.1", got.Tool.ID, got.Tool.Usage, false)
	if got.Tool.Finish != "tool_calls" || len(got.Tool.ToolCalls) != 1 || got.Tool.ToolCalls[0].Function.Name != "write_file" ||
		got.Tool.ToolCalls[0].Function.Arguments != `{"content":"print('ok')\n","path":"fix.py"}` {
		t.Fatalf("tool call: %+v", got.Tool)
	}
	if got.ToolStream.Usage == nil || len(got.ToolStream.Calls) != 1 || got.ToolStream.Calls[0].Name != "write_file" ||
		got.ToolStream.Calls[0].Arguments != `{"content":"print('ok')\n","path":"fix.py"}` {
		t.Fatalf("streamed tool call: %+v", got.ToolStream)
	}
	check(rs[3], "qwen3-coder-480b-a35b-instruct", got.ToolStream.ID, *got.ToolStream.Usage, true)
	if got.Refused.Status != 404 || got.Refused.Code != "model_not_found" || rs[4].Outcome != meter.OutcomeRefusedModel {
		t.Fatalf("refusal: client saw %+v, receipt %+v", got.Refused, rs[4])
	}
}
