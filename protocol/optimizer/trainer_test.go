package optimizer_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/protocol/optimizer"
)

// trainerSteps is how many steps the trainer-layer tests train: enough for
// a hook to fire and a difference to show, few enough to be quick.
const trainerSteps = 30

// trainer runs the reference task's trainer directly, past the gate: what
// the harness must stop even when a submission gets through the gate.
type trainer struct {
	t    *testing.T
	spec optimizer.Spec
	task string
}

func newTrainer(t *testing.T) *trainer {
	t.Helper()
	dir, spec := referenceTask(t)
	return &trainer{t: t, spec: spec, task: dir}
}

// train trains the optimizer source src for trainerSteps steps with seed.
func (tr *trainer) train(src string, seed int64) optimizer.Training {
	tr.t.Helper()
	return tr.run(tr.write(src), seed)
}

// write puts the optimizer source src in a submission directory of its own.
func (tr *trainer) write(src string) string {
	tr.t.Helper()
	sub := filepath.Join(tr.t.TempDir(), "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "optimizer.py"), []byte(src), 0o644); err != nil {
		tr.t.Fatal(err)
	}
	return sub
}

// run trains the submission in sub for trainerSteps steps with seed. It may
// run on any goroutine: a failure to run at all is reported with Errorf and
// an empty Training.
func (tr *trainer) run(sub string, seed int64) optimizer.Training {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := optimizer.Machine{}.Train(ctx, tr.spec, tr.task, sub, seed, trainerSteps)
	if err != nil {
		tr.t.Errorf("training: %v", err)
	}
	return out
}

func fixtureSource(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures(name), "optimizer.py"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stateProbe is the SGD-with-momentum fixture that, when it is built, fails
// with FileExistsError if a file NAME an earlier run wrote is still there,
// and with PermissionError if it cannot write one itself (so the test cannot
// pass because nothing was writable).
func stateProbe(t *testing.T, name string) string {
	t.Helper()
	const built = "        super().__init__(params, dict(lr=lr, momentum=momentum))\n"
	probe := built + strings.ReplaceAll(`        places = ("/tmp/NAME", os.path.expanduser("~/NAME"), "NAME", "/out/NAME")
        for place in places:
            if os.path.exists(place):
                raise FileExistsError(place)
        wrote = 0
        for place in places:
            try:
                with open(place, "w") as f:
                    f.write("left by an earlier run")
                wrote += 1
            except OSError:
                pass
        if wrote == 0:
            raise PermissionError("nothing was writable")
`, "NAME", name)
	src := fixtureSource(t, "ref-sgd-momentum")
	out := strings.Replace(strings.Replace(src, built, probe, 1), "import torch\n", "import os\n\nimport torch\n", 1)
	if !strings.Contains(src, built) || !strings.Contains(out, "import os") {
		t.Fatal("the SGD fixture's constructor or imports moved")
	}
	return out
}

// TestTrainerStopsWhatTheGateCannotSee runs, through the real trainer and
// sandbox but past the gate, each evasion class that GATES.md assigns to the
// training harness or the sandbox. Each is SGD with momentum unless its
// evasion works, so each must train the baseline's checkpoint bit for bit,
// or fail its run with the reason the harness gives.
func TestTrainerStopsWhatTheGateCannotSee(t *testing.T) {
	tr := newTrainer(t)
	base := tr.train(fixtureSource(t, "ref-sgd-momentum"), 1)
	if base.Status != optimizer.RunCompleted || base.Steps != trainerSteps {
		t.Fatalf("baseline: %s %q after %d steps", base.Status, base.Detail, base.Steps)
	}
	same := func(t *testing.T, got optimizer.Training) {
		t.Helper()
		if got.Status != optimizer.RunCompleted || got.Steps != trainerSteps {
			t.Fatalf("%s %q after %d steps, want completed\n%s", got.Status, got.Detail, got.Steps, got.Sandbox.Stderr)
		}
		if !bytes.Equal(got.Checkpoint, base.Checkpoint) {
			t.Error("the checkpoint differs from the baseline's: the evasion changed training")
		}
	}
	// The autograd graph: there is none behind the optimizer's tensors.
	t.Run("leak-autograd-graph", func(t *testing.T) {
		same(t, tr.train(fixtureSource(t, "leak-autograd-graph"), 1))
	})
	// A hook on a gradient accumulator, then the tensor put back outside the
	// graph: the hook belongs to a tensor the trainer's backward never
	// touches, so it never runs (it would zero the parameters).
	t.Run("evade-54-graph-hook", func(t *testing.T) {
		same(t, tr.train(fixtureSource(t, "evade-54-graph-hook"), 1))
	})
	// The same hook on the tensor itself, left in place: the structural
	// check finds it before the first step.
	t.Run("leak-hooks", func(t *testing.T) {
		got := tr.train(fixtureSource(t, "leak-hooks"), 1)
		if got.Status != optimizer.RunForbiddenHook || got.Steps != 0 || !strings.Contains(got.Detail, "autograd graph") {
			t.Fatalf("%s %q after %d steps, want forbidden_hook before the first step", got.Status, got.Detail, got.Steps)
		}
	})
	// A hook registered after the first step, when the check before it has
	// passed: the check after the step finds it, and the step does not count.
	t.Run("late-hook", func(t *testing.T) {
		src := strings.Replace(fixtureSource(t, "ref-sgd-momentum"), "        return None",
			"        for group in self.param_groups:\n            for p in group[\"params\"]:\n                p.requires_grad_(True)\n                p.register_hook(lambda g: g)\n        return None", 1)
		got := tr.train(src, 1)
		if got.Status != optimizer.RunForbiddenHook || got.Steps != 0 {
			t.Fatalf("%s %q after %d steps, want forbidden_hook with no step counted", got.Status, got.Detail, got.Steps)
		}
	})
	// State across runs: every run is a fresh sandbox, so what one run
	// writes (in /tmp, HOME, its working and output directories) is gone for
	// the next, and nothing reaches the host.
	t.Run("state-across-runs", func(t *testing.T) {
		name := fmt.Sprintf("feval-probe-%d-%d", os.Getpid(), time.Now().UnixNano())
		src := stateProbe(t, name)
		same(t, tr.train(src, 1))
		same(t, tr.train(src, 1))
		if _, err := os.Stat(filepath.Join(os.TempDir(), name)); err == nil {
			t.Error("a run's /tmp file reached the host's")
		}
	})
}
