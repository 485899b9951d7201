package scenarios_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/scenarios"
)

// floodPolicy answers each request after sending as many model calls at once
// as a request may make (32), on as many threads.
const floodPolicy = `import threading

def route(request, call):
    answers = [None] * 32
    def one(i):
        answers[i] = call("kimi-k2-instruct", request["messages"], max_tokens=256, tools=request.get("tools"))
    threads = [threading.Thread(target=one, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers[0]
`

// TestFloodIsHeldToTheRate: a pack whose policy sends 32 model calls at once
// meets a provider that answers 429 past the task's rate.max_concurrent
// calls at once, each answer taking a second. The meter holds the flood to
// the rate, so the provider never answers 429, every call is made and the
// scenario is scored like a pack that does nothing, never infra_error
// (PROTOCOL.md §6c, "Who causes a failure"). A committed, revealed and
// evaluated pack.
func TestFloodIsHeldToTheRate(t *testing.T) {
	w := newWorld(t, scenariotask.Config{Scenarios: []string{"09-temperature"}, VerifierWallMillis: 20_000})
	w.up.AddScript("09-temperature", upstream.Script{Steps: []upstream.Step{{Tool: "finish", Arguments: `{"summary":"done"}`}}})
	nothing, _ := w.evaluate(w.submit(pack(t, "kimi-k2-instruct")))

	w.up.SetFaults(upstream.Faults{MaxConcurrent: meter.DefaultRate.MaxConcurrent})
	w.up.SetLatency(1000, 0)
	dir := filepath.Join(t.TempDir(), "flood")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "policy.py"), []byte(floodPolicy), 0o644)
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("# Flood\n\nAsk everyone at once.\n"), 0o644)
	v, _ := w.evaluate(w.submit(dir))

	if got := w.up.RateLimited(); got != 0 {
		t.Errorf("the provider answered %d calls 429: the flood reached it", got)
	}
	if v.Status != protocol.VerdictPassed || len(v.Scenarios) != 1 {
		t.Fatalf("verdict %s (%s %s), want passed", v.Status, v.Reason, v.Detail)
	}
	s := v.Scenarios[0]
	if s.Status != scenarios.ScenarioScored || s.Passed > nothing.Scenarios[0].Passed {
		t.Errorf("flood: %s, %d of %d passed (%s); doing nothing passes %d", s.Status, s.Passed, s.Total, s.Detail, nothing.Scenarios[0].Passed)
	}
	if len(s.Models) != 1 || s.Models[0].Calls != 32 {
		t.Errorf("flood: models %+v, want the 32 calls of its one request, all answered", s.Models)
	}
}
