package scenarios_test

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/replay"
	"github.com/feval/feval/scoring"
)

// policyPack is a reference pack of fixtures/policies.
func policyPack(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "fixtures", "policies", name, "pack")
}

// TestPackForms runs packs of the three forms through the policy sidecar
// (policy.json, policy.py with session state, a raw server) and an
// adversarial pack that spends until the meter's cap refuses: the three score,
// the adversarial one changes nothing and never passes the cap in any scenario, and
// the policy.py verdict replays identical.
func TestPackForms(t *testing.T) {
	w := newWorld(t, scenariotask.Config{Scenarios: []string{"01-parse-range", "13-date-month"}})
	for _, name := range []string{"strong", "py-session", "server", "adv-overspend"} {
		v, out := w.evaluate(w.submit(policyPack(name)))
		t.Logf("%s: %s score %s cost %d", name, v.Status, v.Score, v.CostMicroUSD)
		if v.Status != protocol.VerdictPassed {
			t.Fatalf("%s: %s (%s)", name, v.Status, v.Detail)
		}
		s := scoring.MustParseRatio(v.Score)
		switch name {
		case "adv-overspend":
			// The sidecar stops the flood of calls and answers the agent with a
			// policy error: the harness stops after one turn and the untouched
			// workspaces score what they score (1 of 4 tests of 01-parse-range
			// pass before any fix).
			if v.Score != "1/4" {
				t.Errorf("%s scored %s, want 1/4", name, v.Score)
			}
			for _, sc := range v.Scenarios {
				if sc.Turns != 1 || sc.Stop != "model_error" || sc.CostMicroUSD <= 0 || sc.CostMicroUSD > 300_000 {
					t.Errorf("%s %s: %d turns (%s), cost %d micro-USD; want one refused turn within the cap", name, sc.Name, sc.Turns, sc.Stop, sc.CostMicroUSD)
				}
			}
		default:
			if s.Sign() <= 0 {
				t.Errorf("%s scored %s", name, v.Score)
			}
		}
		if name == "py-session" {
			res, err := replay.RunWith(w.ctx, w.validator, out.Artifact.OCI(), w.trusted(), w.options())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != replay.Identical {
				t.Fatalf("py-session replay %s: %+v", res.Outcome, res.Diffs)
			}
		}
	}
}
