package optimizer_test

import (
	"github.com/feval/feval/sandbox"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/fixtures/optask"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/replay"
	"github.com/opencontainers/go-digest"
)

// TestReferenceSubmissions trains every reference submission from
// fixtures/optimizer and asserts its verdict: the tuned schedule clears the
// baseline twice and is confirmed with the worse run as the candidate bar; the
// baseline SGD and AdamW do not clear it; the slow one completes fewer steps
// than the horizon within the budget; the diverging one is rejected, its
// replay unchecked without --retrain and identical with it.
func TestReferenceSubmissions(t *testing.T) {
	w := newWorld(t, nil)
	horizon := 300
	cases := []struct {
		name    string
		check   func(t *testing.T, v optimizer.Verdict)
		replays bool
	}{
		{"ref-tuned", func(t *testing.T, v optimizer.Verdict) {
			if v.Status != protocol.VerdictPassed || v.Outcome != optimizer.OutcomeConfirmed || len(v.Runs) != 2 {
				t.Fatalf("tuned: %s %s %s, %d runs", v.Status, v.Reason, v.Outcome, len(v.Runs))
			}
			if v.Runs[0].Seed == v.Runs[1].Seed || v.Runs[0].CheckpointContent == v.Runs[1].CheckpointContent {
				t.Errorf("the confirm run repeated the first run's seed or checkpoint")
			}
			if want := max(loss(v.Runs[0]), loss(v.Runs[1])); v.CandidateBarMicroNats != want {
				t.Errorf("candidate bar %d, want the worse run %d", v.CandidateBarMicroNats, want)
			}
			for _, r := range v.Runs {
				if r.Steps != horizon || !r.Cleared || r.Checkpoint == "" {
					t.Errorf("run %d: %d steps, cleared %t, checkpoint %q", r.Index, r.Steps, r.Cleared, r.Checkpoint)
				}
			}
		}, true},
		{"ref-sgd-momentum", func(t *testing.T, v optimizer.Verdict) {
			if v.Status != protocol.VerdictPassed || v.Outcome != optimizer.OutcomeNotCleared || len(v.Runs) != 1 {
				t.Fatalf("sgd: %s %s %s, %d runs", v.Status, v.Reason, v.Outcome, len(v.Runs))
			}
			if l := loss(v.Runs[0]); l < 0 || optask.ReferenceBaseline-l >= v.FloorMicroNats {
				t.Errorf("the baseline optimizer's loss %d clears the baseline %d", l, optask.ReferenceBaseline)
			}
		}, true},
		{"ref-adamw", func(t *testing.T, v optimizer.Verdict) {
			if v.Status != protocol.VerdictPassed || v.Outcome != optimizer.OutcomeNotCleared || v.Runs[0].Steps != horizon {
				t.Fatalf("adamw: %s %s %s", v.Status, v.Reason, v.Outcome)
			}
		}, false},
		{"ref-slow", func(t *testing.T, v optimizer.Verdict) {
			if v.Status != protocol.VerdictPassed || v.Outcome != optimizer.OutcomeNotCleared {
				t.Fatalf("slow: %s %s %s", v.Status, v.Reason, v.Outcome)
			}
			if s := v.Runs[0].Steps; s <= 0 || s >= horizon {
				t.Errorf("slow: %d steps within the budget, want fewer than the horizon %d", s, horizon)
			}
		}, false},
		{"ref-diverge", func(t *testing.T, v optimizer.Verdict) {
			if v.Status != protocol.VerdictRejected || v.Reason != optimizer.RunDiverged || v.Runs[0].Checkpoint != "" {
				t.Fatalf("diverge: %s %s %+v", v.Status, v.Reason, v.Runs)
			}
			if !strings.Contains(v.Detail, "not finite") {
				t.Errorf("diverge: unclear detail %q", v.Detail)
			}
		}, true},
		{"evade-12-torch-load", func(t *testing.T, v optimizer.Verdict) {
			if v.Status != protocol.VerdictRejected || v.Reason != protocol.ReasonGateFailed || len(v.Runs) != 0 {
				t.Fatalf("gate evasion: %s %s, %d runs", v.Status, v.Reason, len(v.Runs))
			}
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w.t = t
			v, art := w.evaluate(w.submit(stripExpect(t, fixtures(c.name))), evaluate.Options{})
			c.check(t, v)
			if !c.replays {
				return
			}
			res, err := replay.Run(w.ctx, w.validator, art, w.trusted())
			if err != nil {
				t.Fatal(err)
			}
			if v.Status == protocol.VerdictRejected && len(v.Runs) > 0 {
				// A failed run is unchecked without --retrain, and its
				// outcome reproduced with it.
				if res.Outcome != replay.Unchecked {
					t.Fatalf("replay of a failed run: %s %+v, want unchecked", res.Outcome, res.Diffs)
				}
				if res, err = replay.RunWith(w.ctx, w.validator, art, w.trusted(), evaluate.Options{Retrain: true}); err != nil {
					t.Fatal(err)
				}
				if len(res.Checks) != 1 || res.Checks[0].Path != "runs[0].status" {
					t.Fatalf("replay --retrain of a failed run: %s, checks %+v", res.Outcome, res.Checks)
				}
			}
			if res.Outcome != replay.Identical {
				t.Fatalf("replay %s: %+v", res.Outcome, res.Diffs)
			}
		})
	}
}

// TestGateEvasionsNeverTrain evaluates every gate evasion fixture: each is
// rejected by the gate with no training run.
func TestGateEvasionsNeverTrain(t *testing.T) {
	w := newWorld(t, nil)
	dirs, err := filepath.Glob(fixtures("evade-*"))
	if err != nil || len(dirs) < 40 {
		t.Fatalf("%d evasion fixtures: %v", len(dirs), err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			w.t = t
			sub := filepath.Join(t.TempDir(), "sub")
			if err := os.CopyFS(sub, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(sub, "expect.json")); err != nil {
				t.Fatal(err)
			}
			v, _ := w.evaluate(w.submit(sub), evaluate.Options{})
			if v.Status != protocol.VerdictRejected || v.Reason != protocol.ReasonGateFailed || len(v.Runs) != 0 || len(v.Violations) == 0 {
				t.Fatalf("%s %s, %d runs, %d violations", v.Status, v.Reason, len(v.Runs), len(v.Violations))
			}
		})
	}
}

// stripExpect copies a fixture directory without its expect.json.
func stripExpect(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "optimizer.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "optimizer.py"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLeaks runs gate-passing submissions that try to reach more than the
// parameters and their gradients: a closure (none is passed) and the global
// random generator (initialisation and data order use the task's own
// generators). Each computes plain SGD with momentum unless its leak works,
// so each must produce the baseline's checkpoint bit for bit. The autograd
// graph and hooks, refused by the gate, are run past it in
// TestTrainerStopsWhatTheGateCannotSee.
func TestLeaks(t *testing.T) {
	w := newWorld(t, nil)
	base, _ := w.evaluate(w.submit(stripExpect(t, fixtures("ref-sgd-momentum"))), evaluate.Options{})
	if base.Status != protocol.VerdictPassed {
		t.Fatalf("baseline: %s %s", base.Status, base.Detail)
	}
	for _, name := range []string{"leak-closure", "leak-global-rng"} {
		t.Run(name, func(t *testing.T) {
			w.t = t
			v, _ := w.evaluate(w.submit(stripExpect(t, fixtures(name))), evaluate.Options{})
			if v.Status != protocol.VerdictPassed || len(v.Runs) == 0 {
				t.Fatalf("%s %s %s", v.Status, v.Reason, v.Detail)
			}
			if got, want := v.Runs[0].CheckpointContent, base.Runs[0].CheckpointContent; got != want {
				t.Errorf("checkpoint %s differs from the baseline's %s: the leak changed training", got, want)
			}
		})
	}
}

// TestBadCheckpoints replaces the trainer's checkpoint writer so that it
// writes what a compromised trainer could: a pickle, an oversized header, a
// tensor of the wrong shape, a NaN. Go refuses each before anything reads it,
// with a clear verdict.
func TestBadCheckpoints(t *testing.T) {
	cases := []struct {
		name, python, reason, detail string
	}{
		{"pickle", `torch.save(model.state_dict(), path)`, optimizer.RunBadCheckpoint, "pickle"},
		{"zip", `torch.save(model.state_dict(), path, _use_new_zipfile_serialization=True)`, optimizer.RunBadCheckpoint, "never pickle"},
		{"oversized-header", `open(path, "wb").write(struct.pack("<Q", 1 << 40) + b"{}")`, optimizer.RunBadCheckpoint, "exceeds"},
		{"wrong-shape", `sd = model.state_dict(); sd["out.bias"] = torch.zeros(255); safetensors_io.save(path, sd)`, optimizer.RunBadCheckpoint, "shape"},
		{"nan", `sd = model.state_dict(); sd["out.bias"][3] = float("nan"); safetensors_io.save(path, sd)`, optimizer.RunDiverged, "non-finite"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, editTrainer(t, `        safetensors_io.save(os.path.join(out_dir, "checkpoint.safetensors"), model.state_dict())`,
				"        import struct\n        path = os.path.join(out_dir, \"checkpoint.safetensors\")\n        "+c.python))
			v, _ := w.evaluate(w.submit(stripExpect(t, fixtures("ref-sgd-momentum"))), evaluate.Options{})
			if v.Status != protocol.VerdictRejected || v.Reason != c.reason || !strings.Contains(v.Detail, c.detail) {
				t.Fatalf("%s %s %q, want rejected %s mentioning %q", v.Status, v.Reason, v.Detail, c.reason, c.detail)
			}
			if v.Runs[0].Checkpoint != "" || v.Runs[0].HeldOutLossMicroNats != nil {
				t.Errorf("a refused checkpoint was stored or evaluated: %+v", v.Runs[0])
			}
		})
	}
}

// TestInfraError: a validator without the interpreter, or whose Python lacks
// a module the trainer imports before the submission (as when python3-torch
// is missing), gets infra_error, never a rejection of the submission.
func TestInfraError(t *testing.T) {
	t.Run("missing-module", func(t *testing.T) {
		w := newWorld(t, editTrainer(t, "import torch\n", "import torch\nimport feval_missing_module\n"))
		v, _ := w.evaluate(w.submit(stripExpect(t, fixtures("ref-sgd-momentum"))), evaluate.Options{})
		if v.Status != protocol.VerdictInfraError || !strings.Contains(v.Detail, "No module named 'feval_missing_module'") {
			t.Fatalf("%s %s %q, want infra_error naming the module", v.Status, v.Reason, v.Detail)
		}
	})
	// A machine whose trainer process keeps a per-process source open (here:
	// the trainer is told the string hash seed is not fixed) is the
	// validator's failure, found before the submission is imported.
	t.Run("unfixed", func(t *testing.T) {
		w := newWorld(t, editTrainer(t, "    if sys.flags.hash_randomization:", "    if True:"))
		v, _ := w.evaluate(w.submit(stripExpect(t, fixtures("ref-sgd-momentum"))), evaluate.Options{})
		if v.Status != protocol.VerdictInfraError || !strings.Contains(v.Detail, "not reproducible here (hash_seed)") {
			t.Fatalf("%s %s %q, want infra_error naming the hash seed", v.Status, v.Reason, v.Detail)
		}
	})
	w := newWorld(t, nil)
	v, _ := w.evaluate(w.submit(stripExpect(t, fixtures("ref-sgd-momentum"))),
		evaluate.Options{Optimizer: optimizer.Params{Machine: optimizer.Machine{Python: "/usr/bin/python3-missing"}}})
	if v.Status != protocol.VerdictInfraError || v.Reason != optimizer.RunInfra {
		t.Fatalf("%s %s %q, want infra_error", v.Status, v.Reason, v.Detail)
	}
	if strings.Contains(v.Detail, "/") {
		t.Errorf("a host path reached the verdict: %q", v.Detail)
	}
}

// TestReplayRetrain replays a confirmed verdict by recomputing the held-out
// losses (identical) and by retraining both runs for their recorded steps
// (bitwise equal checkpoints), and catches a retrain that trains differently.
func TestReplayRetrain(t *testing.T) {
	w := newWorld(t, nil)
	v, art := w.evaluate(w.submit(stripExpect(t, fixtures("ref-tuned"))), evaluate.Options{})
	if v.Outcome != optimizer.OutcomeConfirmed {
		t.Fatalf("tuned: %s %s %s", v.Status, v.Reason, v.Outcome)
	}
	res, err := replay.RunWith(w.ctx, w.validator, art, w.trusted(), evaluate.Options{Retrain: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != replay.Identical || len(res.Checks) != 2 || !strings.Contains(res.Checks[1].Recomputed, "bitwise equal") {
		t.Fatalf("retrain: %s %+v %+v", res.Outcome, res.Diffs, res.Checks)
	}
	// A validator that signs a better loss than its checkpoint gives is caught.
	forged := v
	forged.Runs = append([]optimizer.Run(nil), v.Runs...)
	better := loss(v.Runs[0]) - 1
	forged.Runs[0].HeldOutLossMicroNats = &better
	sub, err := w.validator.Resolve(w.ctx, v.Submission.String())
	if err != nil {
		t.Fatal(err)
	}
	fd, err := bundle.WriteSigned(w.ctx, w.validator, w.key, bundle.Artifact{Kind: protocol.KindVerdict, Record: forged, Subject: &sub})
	if err != nil {
		t.Fatal(err)
	}
	res, err = replay.Run(w.ctx, w.validator, fd, w.trusted())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != replay.Differs || len(res.Diffs) != 1 || res.Diffs[0].Path != "runs[0].held_out_loss_micro_nats" {
		t.Fatalf("forged loss: %s %+v", res.Outcome, res.Diffs)
	}
	// A validator that records another beacon than the one its seeds came
	// from (one that would have picked other seeds and windows) is caught:
	// replay derives the seeds from the recorded beacon.
	swapped := v
	other := *v.Beacon
	other.Value += "0"
	swapped.Beacon = &other
	fd, err = bundle.WriteSigned(w.ctx, w.validator, w.key, bundle.Artifact{Kind: protocol.KindVerdict, Record: swapped, Subject: &sub})
	if err != nil {
		t.Fatal(err)
	}
	res, err = replay.Run(w.ctx, w.validator, fd, w.trusted())
	if err != nil {
		t.Fatal(err)
	}
	seedDiff := false
	for _, d := range res.Diffs {
		seedDiff = seedDiff || d.Path == "runs[0].seed"
	}
	if res.Outcome != replay.Differs || !seedDiff {
		t.Fatalf("swapped beacon: %s %+v", res.Outcome, res.Diffs)
	}
	// A trainer that runs one step fewer than asked cannot reproduce the
	// checkpoint: the retrain names the first differing tensor.
	taskFS, err := protocol.LoadTaskFS(w.ctx, w.validator, w.task.Digest)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := optimizer.LoadTask(taskFS)
	if err != nil {
		t.Fatal(err)
	}
	taskDir, err := sandbox.Materialize(taskFS)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(taskDir)
	subDir := stripExpect(t, fixtures("ref-tuned"))
	if err := os.Chmod(subDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var m optimizer.Machine
	a, err := m.Train(w.ctx, spec, taskDir, subDir, v.Runs[0].Seed, v.Runs[0].Steps-1)
	if err != nil || a.Status != optimizer.RunCompleted {
		t.Fatalf("%v %s %s", err, a.Status, a.Detail)
	}
	if digest.FromBytes(a.Checkpoint) == v.Runs[0].CheckpointContent {
		t.Fatal("one step fewer gave the same checkpoint")
	}
	recorded, _, err := loadRecorded(w, v.Runs[0].Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	tensor, _, differs, err := optimizer.FirstDifference(recorded, a.Checkpoint)
	if err != nil || !differs || tensor == "" {
		t.Fatalf("first difference: %q %t %v", tensor, differs, err)
	}
}

// TestHeldOutTwoProcesses computes one checkpoint's held-out loss in two
// separate sandboxed processes: bit-for-bit the same integer.
func TestHeldOutTwoProcesses(t *testing.T) {
	w := newWorld(t, nil)
	v, _ := w.evaluate(w.submit(stripExpect(t, fixtures("ref-adamw"))), evaluate.Options{})
	ck, _, err := loadRecorded(w, v.Runs[0].Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	taskFS, _ := protocol.LoadTaskFS(w.ctx, w.validator, w.task.Digest)
	spec, _ := optimizer.LoadTask(taskFS)
	taskDir, err := sandbox.Materialize(taskFS)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(taskDir)
	var m optimizer.Machine
	var got []int64
	for i := 0; i < 2; i++ {
		d, err := optimizer.Derive(*v.Beacon, spec)
		if err != nil {
			t.Fatal(err)
		}
		h, err := m.Evaluate(w.ctx, spec, taskDir, ck, d.WindowsBytes())
		if err != nil || h.Status != optimizer.RunCompleted {
			t.Fatalf("%v %s %s", err, h.Status, h.Detail)
		}
		got = append(got, h.LossMicroNats)
	}
	if got[0] != got[1] || got[0] != loss(v.Runs[0]) {
		t.Fatalf("held-out losses %v, verdict %d", got, loss(v.Runs[0]))
	}
}

func loadRecorded(w *world, d digest.Digest) ([]byte, optimizer.CheckpointRecord, error) {
	var rec optimizer.CheckpointRecord
	desc, err := w.validator.Resolve(w.ctx, d.String())
	if err != nil {
		return nil, rec, err
	}
	art, err := protocol.LoadAs(w.ctx, w.validator, desc, optimizer.KindCheckpoint, &rec)
	if err != nil {
		return nil, rec, err
	}
	b, err := bundleRead(w, art)
	return b, rec, err
}

// TestSubmissionFailures: an optimizer that raises, and one that exceeds the
// memory limit, each get a clear verdict reason.
func TestSubmissionFailures(t *testing.T) {
	w := newWorld(t, nil)
	cases := []struct {
		name, step, reason, detail string
		memory                     int64
	}{
		{"raises", "        return 1 / 0\n", optimizer.RunCrashed, "ZeroDivisionError", 0},
		{"out-of-memory", "        self.hoard = torch.ones(384, 1024, 1024)\n        return None\n", optimizer.RunOutOfMemory, "memory limit", 768 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w.t = t
			dir := t.TempDir()
			src := "import torch\nfrom torch.optim import Optimizer\n\n\nclass Failing(Optimizer):\n" +
				"    def __init__(self, params, lr=0.01):\n        super().__init__(params, dict(lr=lr))\n\n" +
				"    @torch.no_grad()\n    def step(self, closure=None):\n" + c.step
			if err := os.WriteFile(filepath.Join(dir, "optimizer.py"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			v, _ := w.evaluate(w.submit(dir), evaluate.Options{Optimizer: optimizer.Params{Machine: optimizer.Machine{MemoryBytes: c.memory}}})
			if v.Status != protocol.VerdictRejected || v.Reason != c.reason || !strings.Contains(v.Detail, c.detail) {
				t.Fatalf("%s %s %q, want rejected %s mentioning %q", v.Status, v.Reason, v.Detail, c.reason, c.detail)
			}
		})
	}
}

// TestHeldOutDataNeverInTraining: the training sandbox's task directory has
// no held-out data or held-out program.
func TestHeldOutDataNeverInTraining(t *testing.T) {
	// A trainer that reports, as its error, whether the held-out files exist.
	probe := "    result[\"error\"] = \"HeldOutVisible\" if os.path.exists(os.path.join(task_dir, spec[\"data\"][\"held_out_pool\"])) or os.path.exists(os.path.join(task_dir, \"heldout.py\")) else \"HeldOutHidden\"\n    result[\"status\"] = \"crashed\"\n    write_result(out_dir, result)\n    return\n"
	w := newWorld(t, editTrainer(t, "    budget = Budget(budget_ms)\n", "    budget = Budget(budget_ms)\n"+probe))
	v, _ := w.evaluate(w.submit(stripExpect(t, fixtures("ref-sgd-momentum"))), evaluate.Options{})
	if !strings.Contains(v.Detail, "HeldOutHidden") {
		t.Fatalf("%s %s %q: the training sandbox can see held-out data", v.Status, v.Reason, v.Detail)
	}
}
