package optimizer_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/replay"
)

// burner is an SGD optimizer that, at its 200th step, runs BURN inside
// step(): CPU the budget does not have.
const burner = `"""SGD that spends far more than the budget inside one step."""

import torch
from torch.optim import Optimizer


class Burner(Optimizer):
    """p <- p - lr * grad, with one expensive step."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                state["n"] = state.get("n", 0) + 1
                if state["n"] == 200 and p.dim() == 1:
BURN
                p.add_(p.grad, alpha=-group["lr"])
        return None
`

// TestBudgetHoldsInsideAStep: an optimizer whose step burns CPU far past the
// budget gets no more than the budget. Burning in Python code, the step is
// interrupted within milliseconds and not counted: the run completes, stopped
// by the budget, with the steps before it and a CPU time within the margin;
// replay --retrain re-runs those steps bit for bit. Burning in one native call
// that no signal interrupts, the backstop ends the run 1 to 2 s past the
// budget: over_budget, rejected, and replay --retrain runs it again to the
// same outcome.
func TestBudgetHoldsInsideAStep(t *testing.T) {
	w := newWorld(t, nil)
	budget := int64(2000) // the reference task's
	for _, c := range []struct {
		name, burn string
		check      func(t *testing.T, v optimizer.Verdict)
	}{
		{"python", "                    x = 0\n                    for i in range(400000000):\n                        x = x + i\n", func(t *testing.T, v optimizer.Verdict) {
			r := v.Runs[0]
			if r.Status != optimizer.RunCompleted || r.Stop != optimizer.StopBudget || r.Steps != 199 {
				t.Fatalf("run 0: %s %q, stop %q after %d steps; want completed, stopped by the budget after 199 steps", r.Status, r.Detail, r.Stop, r.Steps)
			}
			if r.CPUMillis < budget || r.CPUMillis > budget+optimizer.BackstopMillis/2 {
				t.Errorf("run 0 used %d CPU ms; the budget is %d, the margin for a step in Python code %d", r.CPUMillis, budget, optimizer.BackstopMillis/2)
			}
		}},
		{"native", "                    a = torch.ones(6000, 6000)\n                    b = torch.mm(a, a)\n                    p.add_(b[0, 0] * 0)\n", func(t *testing.T, v optimizer.Verdict) {
			r := v.Runs[0]
			if v.Status != protocol.VerdictRejected || v.Reason != optimizer.RunOverBudget || r.Checkpoint != "" {
				t.Fatalf("%s %s %q, checkpoint %q: want rejected over_budget", v.Status, v.Reason, v.Detail, r.Checkpoint)
			}
			if r.CPUMillis < budget+1000 || r.CPUMillis > budget+optimizer.BackstopMillis+optimizer.StartupAllowanceMillis {
				t.Errorf("run 0 used %d CPU ms: want between the backstop and the sandbox's limit", r.CPUMillis)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sub")
			os.MkdirAll(dir, 0o755)
			if err := os.WriteFile(filepath.Join(dir, "optimizer.py"), []byte(strings.Replace(burner, "BURN\n", c.burn, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			v, art := w.evaluate(w.submit(dir), evaluate.Options{})
			if v.Status == protocol.VerdictRejected && v.Reason == "gate_failed" {
				t.Fatalf("the gate refused the burner: %+v", v.Violations)
			}
			c.check(t, v)
			res, err := replay.RunWith(w.ctx, w.validator, art, w.trusted(), evaluate.Options{Retrain: true})
			if err != nil {
				t.Fatal(err)
			}
			want := "bitwise equal" // the budget-stopped run, retrained
			if v.Status != protocol.VerdictPassed {
				want = "over_budget (re-run: the same outcome)" // run again under the budget
			}
			if res.Outcome != replay.Identical || len(res.Checks) == 0 || !strings.Contains(res.Checks[0].Recomputed, want) {
				t.Fatalf("retrain: %s %+v %+v", res.Outcome, res.Diffs, res.Checks)
			}
		})
	}
}
