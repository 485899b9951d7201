package optimizer_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/replay"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// crashAt5 is SGD that raises in its fifth step.
var crashAt5 = strings.Replace(`"""SGD that fails in its fifth step."""

import torch
from torch.optim import Optimizer


class CrashAt5(Optimizer):
    """p <- p - lr * grad, until step 5."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))
        self.calls = 0

    @torch.no_grad()
    def step(self, closure=None):
        self.calls += 1
        if self.calls == 5:
            raise ZeroDivisionError("step 5")
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
        return None
`, "\t", "    ", -1)

// TestReplayChecksFailedRuns: a failed run is never taken on trust. Without
// --retrain a replay of a verdict with one is unchecked, never identical;
// with --retrain the run is run again: a real crash crashes again at the
// same step (identical), and a crash a validator claims for an optimizer
// that does not crash differs at the run's status.
func TestReplayChecksFailedRuns(t *testing.T) {
	w := newWorld(t, nil)
	replayed := func(t *testing.T, v ocispec.Descriptor, retrain bool) replay.Result {
		t.Helper()
		res, err := replay.RunWith(w.ctx, w.validator, v, w.trusted(), evaluate.Options{Retrain: retrain})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	t.Run("real-crash", func(t *testing.T) {
		w.t = t
		dir := filepath.Join(t.TempDir(), "sub")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "optimizer.py"), []byte(crashAt5), 0o644); err != nil {
			t.Fatal(err)
		}
		v, art := w.evaluate(w.submit(dir), evaluate.Options{})
		if v.Status != protocol.VerdictRejected || v.Reason != optimizer.RunCrashed || v.Runs[0].Steps != 4 {
			t.Fatalf("%s %s %q after %d steps, want rejected crashed after 4", v.Status, v.Reason, v.Detail, v.Runs[0].Steps)
		}
		res := replayed(t, art, false)
		if res.Outcome != replay.Unchecked || len(res.Unchecked) != 1 || res.Unchecked[0].Path != "runs[0].status" {
			t.Fatalf("replay without --retrain: %s, unchecked %+v, diffs %+v", res.Outcome, res.Unchecked, res.Diffs)
		}
		res = replayed(t, art, true)
		if res.Outcome != replay.Identical || len(res.Checks) != 1 || !strings.Contains(res.Checks[0].Recomputed, "crashed after 4 steps (the optimizer raised ZeroDivisionError) (re-run: the same outcome)") {
			t.Fatalf("replay --retrain: %s, checks %+v, diffs %+v", res.Outcome, res.Checks, res.Diffs)
		}
	})
	t.Run("claimed-crash", func(t *testing.T) {
		w.t = t
		honest, art := w.evaluate(w.submit(stripExpect(t, fixtures("ref-sgd-momentum"))), evaluate.Options{})
		if honest.Status != protocol.VerdictPassed {
			t.Fatalf("baseline: %s %s", honest.Status, honest.Detail)
		}
		// The verdict a validator could sign instead: run 0 crashed.
		forged := honest
		forged.Runs = []optimizer.Run{{Index: 0, Seed: honest.Runs[0].Seed, Status: optimizer.RunCrashed,
			Detail: "the optimizer raised TypeError", Steps: 17, CPUMillis: honest.Runs[0].CPUMillis}}
		forged.Status, forged.Reason, forged.Detail = protocol.VerdictRejected, optimizer.RunCrashed, "run 0: the optimizer raised TypeError"
		forged.Outcome, forged.CandidateBarMicroNats = "", 0
		loaded, err := bundle.Load(w.ctx, w.validator, art)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := bundle.WriteSigned(w.ctx, w.validator, w.key, bundle.Artifact{Kind: protocol.KindVerdict, Record: forged,
			Subject: loaded.Manifest.Subject})
		if err != nil {
			t.Fatal(err)
		}
		res := replayed(t, desc, false)
		if res.Outcome != replay.Unchecked {
			t.Fatalf("replay of the claimed crash without --retrain: %s (%+v), want unchecked", res.Outcome, res.Diffs)
		}
		res = replayed(t, desc, true)
		if res.Outcome != replay.Differs || len(res.Diffs) == 0 || res.Diffs[0].Path != "runs[0].status" ||
			!strings.HasPrefix(res.Diffs[0].Recomputed, "completed after 18 steps") {
			t.Fatalf("replay --retrain of the claimed crash: %s %+v, want differs at runs[0].status", res.Outcome, res.Diffs)
		}
	})
}
