package optimizer_test

import (
	"testing"

	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
)

// TestHonestValidatorsAgree: two validators evaluate the tuned reference, the
// second next to a spinning goroutine per CPU. Its runs reach the horizon
// within the budget, so nothing measured enters their results: both sign the
// same steps, checkpoints and losses, and the same outcome; only the CPU
// time each run used may differ (docs/OPTIMIZER.md §3, "Step
// reconciliation").
func TestHonestValidatorsAgree(t *testing.T) {
	w := newWorld(t, nil)
	reveal := w.submit(stripExpect(t, fixtures("ref-tuned")))
	quiet, _ := w.evaluate(reveal, evaluate.Options{})

	stop := spin()
	w.key = newSigner(t) // a second validator
	loaded, _ := w.evaluate(reveal, evaluate.Options{})
	stop()

	if quiet.Status != protocol.VerdictPassed || quiet.Outcome != optimizer.OutcomeConfirmed {
		t.Fatalf("quiet: %s %s %q", quiet.Status, quiet.Outcome, quiet.Detail)
	}
	if loaded.Status != quiet.Status || loaded.Outcome != quiet.Outcome || loaded.CandidateBarMicroNats != quiet.CandidateBarMicroNats || len(loaded.Runs) != len(quiet.Runs) {
		t.Fatalf("under load: %s %s, candidate bar %d, %d runs; quiet: %s %s, %d, %d runs", loaded.Status, loaded.Outcome,
			loaded.CandidateBarMicroNats, len(loaded.Runs), quiet.Status, quiet.Outcome, quiet.CandidateBarMicroNats, len(quiet.Runs))
	}
	for i, q := range quiet.Runs {
		l := loaded.Runs[i]
		if q.Stop != optimizer.StopHorizon || l.Steps != q.Steps || l.Stop != q.Stop || l.CheckpointContent != q.CheckpointContent || loss(l) != loss(q) {
			t.Errorf("run %d: quiet %d steps (%s) %s loss %d; under load %d steps (%s) %s loss %d", i,
				q.Steps, q.Stop, q.CheckpointContent, loss(q), l.Steps, l.Stop, l.CheckpointContent, loss(l))
		}
	}
}
