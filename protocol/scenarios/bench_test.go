package scenarios_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/replay"
)

// Simulated latency of the fixture models for the benchmark: 1 s to the first
// byte and 25 ms per output token (40 tokens/s), what large open-weight
// models on shared endpoints typically give (docs/PERFORMANCE.md).
const (
	benchFirstByteMillis = 1000
	benchPerTokenMicros  = 25_000
)

// BenchmarkTwentyScenarios evaluates one pack (policy.json, deepseek-v3.1)
// on all twenty scenarios with the simulated latency, two scenarios at a
// time, then replays the verdict (meter in replay mode: no model is called),
// and reports both wall times and replay as a percentage of the evaluation;
// then replays again four scenarios at a time (replay4), and re-runs only the
// twenty verifiers one at a time (verifyonly).
func BenchmarkTwentyScenarios(b *testing.B) {
	w := newWorld(b, scenariotask.Config{})
	w.up.SetLatency(benchFirstByteMillis, benchPerTokenMicros)
	var evalTotal, replayTotal, wideTotal, verifyTotal, replayCPU time.Duration
	for i := 0; i < b.N; i++ {
		reveal := w.submit(pack(b, "deepseek-v3.1"))
		t0 := time.Now()
		out, err := evaluate.Evaluate(w.ctx, w.validator, w.key, evaluate.Request{Reveal: reveal.Digest.String(),
			Task: w.task.Digest.String(), Obs: at("2026-12-01T06:00:00Z"), Options: w.options()})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		cpu0 := childCPU()
		if out.Verdict.Head().Status != protocol.VerdictPassed {
			b.Fatalf("verdict %s", out.Verdict.Head().Status)
		}
		res, err := replay.RunWith(w.ctx, w.validator, out.Artifact.OCI(), w.trusted(), w.options())
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		replayCPU += childCPU() - cpu0
		if res.Outcome != replay.Identical {
			b.Fatalf("replay %s: %+v", res.Outcome, res.Diffs)
		}
		// The auditor's replay at four scenarios at a time: its parallelism
		// changes nothing in the verdict and no upstream limits it.
		wide := w.options()
		wide.Scenarios.Parallel = 4
		res, err = replay.RunWith(w.ctx, w.validator, out.Artifact.OCI(), w.trusted(), wide)
		if err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if res.Outcome != replay.Identical {
			b.Fatalf("replay %s: %+v", res.Outcome, res.Diffs)
		}
		// Only the verifiers, one scenario at a time: their share of a replay.
		res, err = replay.RunWith(w.ctx, w.validator, out.Artifact.OCI(), w.trusted(), evaluate.Options{VerifyOnly: true})
		if err != nil || res.Outcome != replay.Identical {
			b.Fatalf("verify-only replay: %v %+v", err, res.Diffs)
		}
		verifyTotal += time.Since(t3)
		evalTotal += t1.Sub(t0)
		replayTotal += t2.Sub(t1)
		wideTotal += t3.Sub(t2)
	}
	b.ReportMetric(evalTotal.Seconds()/float64(b.N), "eval-s")
	b.ReportMetric(replayTotal.Seconds()/float64(b.N), "replay-s")
	b.ReportMetric(100*replayTotal.Seconds()/evalTotal.Seconds(), "replay-%")
	b.ReportMetric(wideTotal.Seconds()/float64(b.N), "replay4-s")
	b.ReportMetric(100*wideTotal.Seconds()/evalTotal.Seconds(), "replay4-%")
	b.ReportMetric(verifyTotal.Seconds()/float64(b.N), "verifyonly-s")
	b.ReportMetric(replayCPU.Seconds()/float64(b.N), "replay-cpu-s")
}

// childCPU is the user and system CPU time of the sandboxes this process has
// run and waited for.
func childCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
