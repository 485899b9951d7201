package scenarios_test

import (
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/scenarios"
)

// TestToolCommandsCannotReachTheHarness: the agent's shell commands run in
// sandboxes of their own (PROTOCOL.md §6c, "Harness contract"), so a command
// that stops every process it can see and kills its parent, one that leaves
// processes behind holding its output, a flood and a hang each come back to
// the model as a tool result, and the harness goes on: the scenario is
// scored (the solution written between them passes every test), never
// infra_error, and the hang ends at the harness's own bound. Through the
// production path: a committed, revealed and evaluated pack.
func TestToolCommandsCannotReachTheHarness(t *testing.T) {
	w := newWorld(t, scenariotask.Config{Scenarios: []string{"09-temperature"}, HarnessWallMillis: 12_000})
	solution := `{"content":"def c_to_f(c):\n    return c * 9 / 5 + 32\ndef f_to_c(f):\n    return (f - 32) * 5 / 9\n","path":"convert.py"}`
	w.up.AddScript("09-temperature", upstream.Script{Steps: []upstream.Step{
		// stop everything in reach, then the parent: before, the harness
		{Tool: "shell", Arguments: `{"command":"kill -STOP -1; pkill -STOP -f 'harnes[s]'; kill -KILL $PPID"}`},
		// processes that outlive the command, holding its output
		{Tool: "shell", Arguments: `{"command":"setsid sleep 600 & sleep 600 & echo held"}`},
		// more output than anything keeps
		{Tool: "shell", Arguments: `{"command":"yes | head -c 100000000 | wc -c; echo flooded"}`},
		{Tool: "write_file", Arguments: solution},
		// a command that never ends: the harness's bound still holds
		{Tool: "shell", Arguments: `{"command":"sleep 600"}`},
		{Tool: "finish", Arguments: `{"summary":"done"}`}}})
	start := time.Now()
	v, _ := w.evaluate(w.submit(pack(t, "kimi-k2-instruct")))
	took := time.Since(start)
	if v.Status != protocol.VerdictPassed || len(v.Scenarios) != 1 {
		t.Fatalf("verdict %s (%s) with %d scenarios, want passed", v.Status, v.Detail, len(v.Scenarios))
	}
	s := v.Scenarios[0]
	if s.Status != scenarios.ScenarioScored || s.Passed != s.Total || s.Total == 0 || s.Stop != "time" {
		t.Fatalf("scenario %s: %d/%d, stop %q (%s); want every test passed and the harness stopped by its own time bound", s.Status, s.Passed, s.Total, s.Stop, s.Detail)
	}
	// 12 s of harness time, the hang's own bound within it, and the rest.
	if took > 90*time.Second {
		t.Errorf("the evaluation took %v: the hang held the harness beyond its bound", took)
	}

	// What the model was told about each command, from the recorded trace
	// (the hang ends with the harness's time, so no request follows it).
	desc, err := w.validator.Resolve(w.ctx, v.Digests.Trace.String())
	if err != nil {
		t.Fatal(err)
	}
	_, entries, err := meter.LoadTrace(w.ctx, w.validator, desc)
	if err != nil || len(entries) == 0 {
		t.Fatalf("trace: %d entries, %v", len(entries), err)
	}
	last := entries[len(entries)-1].Request
	for _, want := range []string{
		"error: the tool call ended without a result", // its parent killed: the harness untouched
		`exit 0\nheld`, // returned at once, the sleepers left behind
		`flooded`,      // the flood cut, the command finished
		"wrote ",       // the solution
	} {
		if !strings.Contains(last, want) {
			t.Errorf("the model was not told %q; its last request: %.2000s", want, last)
		}
	}
}
