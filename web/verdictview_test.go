package web

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/feval/feval/meter"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/opencontainers/go-digest"
)

func summaryOf(t *testing.T, v any) (map[string]string, []Field) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	fs := Summarize("verdict", b)
	m := map[string]string{}
	for _, f := range fs {
		m[f.Name] = f.Value
	}
	return m, fs
}

// TestSummarizeScenarios: the score of the maximum, each scenario's tests,
// turns, stop and cost per model, and the linked trace, receipts and run
// record, read from a record as the protocol writes it.
func TestSummarizeScenarios(t *testing.T) {
	d := digest.FromString
	v := scenarios.Verdict{VerdictHead: protocol.VerdictHead{Protocol: "scenarios", Status: "passed"},
		Score: "5/3", MaxScore: 2, CostMicroUSD: 4200,
		Scenarios: []scenarios.ScenarioResult{
			{Name: "09-temperature", Status: "scored", Passed: 1, Total: 3, Turns: 4, Stop: "done", CostMicroUSD: 3000,
				Models: []meter.ModelCost{{Model: "kimi-k2-instruct", Calls: 1, CostMicroUSD: 1000}, {Model: "deepseek-v3.1", Calls: 3, CostMicroUSD: 2000}}},
			{Name: "13-date-month", Status: "scored", Passed: 2, Total: 2, Turns: 2, Stop: "done", CostMicroUSD: 1200},
		},
		Digests: scenarios.Digests{Trace: d("trace"), Receipts: d("receipts"), Run: d("run")}}
	m, _ := summaryOf(t, v)
	for k, want := range map[string]string{
		"score":                   "5/3 of 2",
		"cost":                    "$0.004200 for every model call of every scenario",
		"scenario 09-temperature": "1/3 passed (scored), 4 turns, stop done, $0.003000: kimi-k2-instruct 1 calls $0.001000, deepseek-v3.1 3 calls $0.002000",
		"scenario 13-date-month":  "2/2 passed (scored), 2 turns, stop done, $0.001200",
		"trace":                   d("trace").String(),
		"receipts":                d("receipts").String(),
		"run record":              d("run").String(),
	} {
		if m[k] != want {
			t.Errorf("%s: %q, want %q", k, m[k], want)
		}
	}
	p, _, err := recordEvidence(mustJSON(t, v))
	if err != nil || p.Scenarios == nil || len(p.Scenarios.Scenarios) != 2 || p.Scenarios.Run != d("run") {
		t.Fatalf("evidence: %+v, %v", p.Scenarios, err)
	}
	ch := p.Scenarios.costChart()
	if ch == nil || len(ch.Scenarios) != 1 || ch.TotalMicroUSD[0] != 3000 {
		t.Errorf("cost chart %+v, want the one scenario with model costs, 3000", ch)
	}
	// A digest that is not one is not linked.
	v.Digests.Trace = "javascript:alert(1)"
	if p, _, _ := recordEvidence(mustJSON(t, v)); p.Scenarios.Trace != "" {
		t.Errorf("trace %q: a malformed digest is kept", p.Scenarios.Trace)
	}
}

// TestSummarizeOptimizer: the outcome, the bar, each run's steps, CPU,
// held-out loss and whether it clears, the checkpoints, and an unverified
// beacon as a warning next to the status.
func TestSummarizeOptimizer(t *testing.T) {
	loss := int64(394000)
	v := optimizer.Verdict{VerdictHead: protocol.VerdictHead{Protocol: "optimizer", Status: "passed"},
		BarMicroNats: 395000, FloorMicroNats: 500, HorizonSteps: 300, Outcome: "confirmed", CandidateBarMicroNats: 394100,
		Beacon: &rollouts.Beacon{Source: "calibration", Value: "1"},
		Runs: []optimizer.Run{{Index: 0, Status: "completed", Steps: 300, Stop: "horizon", CPUMillis: 1234,
			Checkpoint: digest.FromString("c0"), HeldOutLossMicroNats: &loss, Cleared: true}}}
	m, fs := summaryOf(t, v)
	for k, want := range map[string]string{
		"outcome":          "confirmed",
		"bar":              "395000 micro-nats (an improvement of at least 500 clears it; horizon 300 steps)",
		"beacon":           "calibration (unverified)",
		"run 0":            "completed, 300 steps (horizon), 1234 ms CPU, held-out loss 394000 micro-nats, clears the bar",
		"run 0 checkpoint": digest.FromString("c0").String(),
		"candidate bar":    "394100 micro-nats",
	} {
		if m[k] != want {
			t.Errorf("%s: %q, want %q", k, m[k], want)
		}
	}
	if fs[0].Name != "status" || fs[1].Name != "warning" || !strings.HasPrefix(fs[1].Value, "unverified beacon") {
		t.Errorf("the warning is not next to the status: %+v", fs[:2])
	}
	v.Status, v.Beacon.Verified = "infra_error", true
	if _, fs := summaryOf(t, v); fs[1].Name != "warning" || !strings.HasPrefix(fs[1].Value, "infra_error:") {
		t.Errorf("infra_error: %+v", fs[:2])
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
