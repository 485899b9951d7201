package optimizer_test

import (
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/feval/feval/gate"
	"github.com/feval/feval/protocol/optimizer"
)

// perProcess is SGD whose learning rate depends on every per-process source
// the gate lets through: the iteration order of a set of strings (the
// string hash seed), and addresses, in a bound method's and a lambda's text,
// in a generator object's, and in the order of a set of tensors (which hash
// by identity).
const perProcess = `"""SGD scaled by hash order and addresses."""

import torch
from torch.optim import Optimizer

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")


def digits(text):
    return sum(i * ord(c) for i, c in enumerate(text)) % 100003


class PerProcess(Optimizer):
    """p <- p - lr * scale * grad."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))
        order = "".join(w[:2] for w in set(WORDS))
        addresses = repr(self.step) + repr(lambda: 0) + repr(torch.Generator())
        shapes = "".join(str(p.numel()) for p in set(self.param_groups[0]["params"]))
        self.scale = SCALE

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"] * self.scale)
        return None
`

// perProcessScale is the probe's scale, from all its per-process sources.
const perProcessScale = "1.0 + (digits(order) + digits(addresses) + digits(shapes)) / 1000000.0"

// TestTrainingIsAFunctionOfItsInputs: what differs from one process to the
// next is either refused by the gate (ids, hashes, addresses as numbers,
// uninitialized memory, clocks, the OS's entropy) or fixed by the trainer (the string hash seed,
// address-space randomization, one thread), so a submission reading every
// source the gate accepts trains bit for bit the same in a quiet process and
// in two processes running at once, on both cores, next to CPU load.
func TestTrainingIsAFunctionOfItsInputs(t *testing.T) {
	refused := map[string]string{
		"id":            "s = id(self)",
		"hash":          `s = hash("alpha")`,
		"data_ptr":      "s = self.param_groups[0][\"params\"][0].data_ptr()",
		"os entropy":    "s = torch.Generator().seed()",
		"clock import":  "import time",
		"thread count":  "s = torch.get_num_threads()",
		"global seed":   "s = torch.initial_seed()",
		"object":        "s = repr(object())",
		"storage":       "s = self.param_groups[0][\"params\"][0].untyped_storage()",
		"dunder lookup": "s = self.__class__",
		// Uninitialized memory differs between processes even without
		// address randomization (glibc's allocator keys are random).
		"uninitialized":        "s = torch.empty(4096, dtype=torch.int64)",
		"uninitialized method": "s = self.param_groups[0][\"params\"][0].new_empty(4096)",
		"grown tensor":         "s = torch.zeros(1).resize_(4096)",
	}
	for name, line := range refused {
		src := strings.Replace(perProcess, "        self.scale = SCALE", "        "+line+"\n        self.scale = 1.0", 1)
		if vs, err := gate.OptimizerSource("optimizer.py", []byte(src), gate.OptimizerLimits{}); err != nil || len(vs) == 0 {
			t.Errorf("%s: the gate accepts %q (%v)", name, line, err)
		}
	}
	probe := strings.Replace(perProcess, "SCALE", perProcessScale, 1)
	if vs, err := gate.OptimizerSource("optimizer.py", []byte(probe), gate.OptimizerLimits{}); err != nil || len(vs) != 0 {
		t.Fatalf("the gate refuses the probe, so this test would check nothing: %v %v", err, vs)
	}
	// In plain interpreters the probe's sources do differ per process.
	plain := `import torch
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")
print("".join(w[:2] for w in set(WORDS)), repr(lambda: 0), repr(torch.Generator()))`
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		out, err := exec.Command(optimizer.DefaultPython, "-I", "-c", plain).Output()
		if err != nil {
			t.Fatal(err)
		}
		seen[string(out)] = true
	}
	if len(seen) < 2 {
		t.Fatalf("three plain interpreters agree on hash order and addresses (%v): the probe checks nothing", seen)
	}

	tr := newTrainer(t)
	quiet := tr.train(probe, 1)
	if quiet.Status != optimizer.RunCompleted {
		t.Fatalf("quiet run: %s %q", quiet.Status, quiet.Detail)
	}
	if plainSGD := tr.train(strings.Replace(perProcess, "SCALE", "1.0", 1), 1); bytes.Equal(plainSGD.Checkpoint, quiet.Checkpoint) {
		t.Fatal("the probe trains like plain SGD: its scale checks nothing")
	}

	// Two runs at once next to a spinning goroutine per CPU.
	stop := spin()
	sub := tr.write(probe)
	var runs [2]optimizer.Training
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i] = tr.run(sub, 1)
		}()
	}
	wg.Wait()
	stop()
	for i, r := range runs {
		if r.Status != optimizer.RunCompleted {
			t.Fatalf("run %d under load: %s %q", i, r.Status, r.Detail)
		}
		if !bytes.Equal(r.Checkpoint, quiet.Checkpoint) {
			t.Errorf("run %d under load trained differently from the quiet run", i)
		}
	}
}
