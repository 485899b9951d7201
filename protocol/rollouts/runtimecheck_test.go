package rollouts_test

import (
	"testing"

	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/fixtures/tinymodel"
	"github.com/feval/feval/model"
	"github.com/feval/feval/protocol/rollouts"
)

// TestCheckRuntime: the reference runtime held to its own check passes on
// every conformance prompt with identical completions; a runtime whose
// weights are perturbed by 3 % fails, each failure with its record.
func TestCheckRuntime(t *testing.T) {
	files, ref, items, err := fx.RuntimeConformance(6)
	if err != nil {
		t.Fatal(err)
	}
	check := func(gen model.Generator) rollouts.RuntimeCheck {
		t.Helper()
		done := 0
		rc, err := rollouts.CheckRuntime(gen, ref, items, fx.ReferenceSampling, fx.ConformanceRound, fx.ConformanceMiner, func(n int) { done = n })
		if err != nil || done != len(items) {
			t.Fatalf("CheckRuntime: %v after %d of %d items", err, done, len(items))
		}
		return rc
	}
	if rc := check(ref); rc.Rows != 6 || rc.Passed != 6 || rc.Identical != 6 || len(rc.Failures) != 0 {
		t.Fatalf("the reference runtime against itself: %+v", rc)
	}
	perturbed, err := model.Load(files.Config, files.Tokenizer, tinymodel.Perturb(files.Weights), model.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	rc := check(perturbed)
	if rc.Rows != 6 || rc.Passed+len(rc.Failures) != 6 || len(rc.Failures) < 3 {
		t.Fatalf("a perturbed runtime: %+v", rc)
	}
	for _, f := range rc.Failures {
		if f.Provenance.Outcome == model.CheckOK || f.TaskID == "" {
			t.Errorf("failure %+v", f)
		}
	}
}
