package optimizer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/feval/feval/sandbox"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/feval/feval/protocol/optimizer"
)

// BenchmarkTraining trains the reference task with the tuned reference
// optimizer for the full horizon, alternating a run in the sandbox with the
// same script run directly by python3 outside it, in one benchmark, and
// reports training steps per second for each (from the trainer's own loop
// timer: per wall second, and per CPU second, which is what the budget
// counts) and the wall time of a whole run including interpreter start-up.
// It then times the held-out evaluation in its sandbox.
//
//	go test -run '^$' -bench BenchmarkTraining -benchtime 3x ./protocol/optimizer/
func BenchmarkTraining(b *testing.B) {
	ctx := context.Background()
	taskDir, spec := referenceTask(b)
	derived, err := optimizer.Derive(testBeacon, spec)
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(taskDir), taskDir} {
		if err := os.Chmod(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	subDir, err := sandbox.Materialize(os.DirFS(fixtures("ref-tuned")))
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(subDir)
	os.Remove(filepath.Join(subDir, "expect.json"))
	steps := spec.Training.HorizonSteps
	var m optimizer.Machine
	var inLoop, outLoop, inWall, outWall, inCPU, outCPU time.Duration
	var ck []byte
	for i := 0; i < b.N; i++ {
		start := time.Now()
		t, err := m.Train(ctx, spec, taskDir, subDir, derived.Seeds[0], steps)
		if err != nil || t.Status != optimizer.RunCompleted || t.Steps != steps {
			b.Fatalf("sandboxed run: %v %s %s", err, t.Status, t.Detail)
		}
		inWall += time.Since(start)
		inLoop += time.Duration(t.LoopMicros) * time.Microsecond
		inCPU += time.Duration(t.CPUMicros) * time.Microsecond
		ck = t.Checkpoint

		out := b.TempDir()
		start = time.Now()
		cmd := exec.Command(optimizer.Setarch, "-R", optimizer.DefaultPython, "-s", "-P", "-B", filepath.Join(taskDir, spec.Entry.Train), taskDir,
			filepath.Join(subDir, "optimizer.py"), out, strconv.FormatInt(derived.Seeds[0], 10), "300")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + out, "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "LC_ALL=C.UTF-8", "PYTHONHASHSEED=0"}
		if o, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("direct run: %v\n%s", err, o)
		}
		outWall += time.Since(start)
		raw, err := os.ReadFile(filepath.Join(out, "result.json"))
		if err != nil {
			b.Fatal(err)
		}
		var r struct {
			LoopMicros int64 `json:"loop_micros"`
			CPUMicros  int64 `json:"cpu_micros"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			b.Fatal(err)
		}
		outLoop += time.Duration(r.LoopMicros) * time.Microsecond
		outCPU += time.Duration(r.CPUMicros) * time.Microsecond
		direct, _ := os.ReadFile(filepath.Join(out, optimizer.CheckpointFile))
		if !bytes.Equal(direct, ck) {
			b.Fatal("the sandboxed and the direct run wrote different checkpoints")
		}
	}
	n := float64(b.N * steps)
	b.ReportMetric(n/inLoop.Seconds(), "sandbox-steps/s")
	b.ReportMetric(n/outLoop.Seconds(), "direct-steps/s")
	b.ReportMetric(n/inCPU.Seconds(), "sandbox-steps/cpu-s")
	b.ReportMetric(n/outCPU.Seconds(), "direct-steps/cpu-s")
	b.ReportMetric(float64(inWall.Milliseconds())/float64(b.N), "sandbox-run-ms")
	b.ReportMetric(float64(outWall.Milliseconds())/float64(b.N), "direct-run-ms")
	var held time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		h, err := m.Evaluate(ctx, spec, taskDir, ck, derived.WindowsBytes())
		if err != nil || h.Status != optimizer.RunCompleted {
			b.Fatalf("held-out: %v %s %s", err, h.Status, h.Detail)
		}
		held += time.Since(start)
	}
	b.ReportMetric(float64(held.Milliseconds())/float64(b.N), "heldout-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSlowReferenceSteps trains the slow reference (whose runs the
// budget stops) five times on a quiet machine and five times next to a
// spinning goroutine per CPU, with the round's first seed, and reports the
// fewest and most steps at each load level: the spread that step
// reconciliation (docs/OPTIMIZER.md §3) deals with.
//
//	go test -run '^$' -bench BenchmarkSlowReferenceSteps -benchtime 1x ./protocol/optimizer/
func BenchmarkSlowReferenceSteps(b *testing.B) {
	ctx := context.Background()
	taskDir, spec := referenceTask(b)
	derived, err := optimizer.Derive(testBeacon, spec)
	if err != nil {
		b.Fatal(err)
	}
	subDir, err := sandbox.Materialize(os.DirFS(fixtures("ref-slow")))
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(subDir)
	os.Remove(filepath.Join(subDir, "expect.json"))
	var m optimizer.Machine
	for i := 0; i < b.N; i++ {
		for _, level := range []struct {
			name   string
			loaded bool
		}{{"quiet", false}, {"loaded", true}} {
			stop := func() {}
			if level.loaded {
				stop = spin()
			}
			least, most := spec.Training.HorizonSteps, 0
			for r := 0; r < 5; r++ {
				t, err := m.Train(ctx, spec, taskDir, subDir, derived.Seeds[0], 0)
				if err != nil || t.Status != optimizer.RunCompleted {
					b.Fatalf("%s run %d: %v %s %s", level.name, r, err, t.Status, t.Detail)
				}
				least, most = min(least, t.Steps), max(most, t.Steps)
			}
			stop()
			b.ReportMetric(float64(least), level.name+"-steps-min")
			b.ReportMetric(float64(most), level.name+"-steps-max")
		}
	}
	b.ReportMetric(0, "ns/op")
}
