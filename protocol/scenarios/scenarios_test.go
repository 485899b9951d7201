package scenarios_test

import (
	"testing"

	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/feval/feval/replay"
)

// TestGoodAndPoorPolicies evaluates two single-model packs on a few scenarios:
// the strong model scores more and costs differently, every scenario is
// scored against its declared tests, and the verdict replays identical with
// the meter answering from the trace.
func TestGoodAndPoorPolicies(t *testing.T) {
	w := newWorld(t, []string{"01-parse-range", "08-roman", "16-normpath", "20-env-settings"})
	strong, strongOut := w.evaluate(w.submit(pack(t, "kimi-k2-instruct")))
	weak, _ := w.evaluate(w.submit(pack(t, "llama-4-maverick-17b-128e-instruct")))
	for _, v := range []scenarios.Verdict{strong, weak} {
		if v.Status != protocol.VerdictPassed || len(v.Scenarios) != 4 || v.MaxScore != 4 {
			t.Fatalf("verdict %s %s with %d scenarios: %+v", v.Status, v.Detail, len(v.Scenarios), v.Scenarios)
		}
		for _, s := range v.Scenarios {
			t.Logf("%s: %d/%d %s turns=%d cost=%d", s.Name, s.Passed, s.Total, s.Stop, s.Turns, s.CostMicroUSD)
		}
	}
	t.Logf("strong %s cost %d; weak %s cost %d", strong.Score, strong.CostMicroUSD, weak.Score, weak.CostMicroUSD)
	if strong.Score == weak.Score || strong.CostMicroUSD == weak.CostMicroUSD {
		t.Fatalf("strong %s (%d micro-USD) and weak %s (%d micro-USD) do not differ", strong.Score, strong.CostMicroUSD, weak.Score, weak.CostMicroUSD)
	}
	calls := w.up.Calls()
	res, err := replay.RunWith(w.ctx, w.validator, strongOut.Artifact, nil, w.options())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != replay.Identical {
		t.Fatalf("replay %s: %+v", res.Outcome, res.Diffs)
	}
	if w.up.Calls() != calls {
		t.Fatalf("replay called the upstream %d times", w.up.Calls()-calls)
	}
}
