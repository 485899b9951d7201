package rollouts_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/fixtures/tinymodel"
	"github.com/feval/feval/gate"
	"github.com/feval/feval/internal/roundtest"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// BenchmarkGenerateAndAudit prices a model-bound rollouts round on the
// reference task (10,000 rows) and the reference tiny model: a miner
// generating every row (feval rollouts generate's Generator, one worker per
// CPU), then a validator's audit of 320 rows (Decide: the model check and
// one teacher-forced pass per sampled row, then the rewards). Metrics: the
// seconds of each, the audit's share of the generation (goal: at most 5 %),
// and each one's CPU time per token (generation runs on every CPU, so its
// wall time is shared; the CPU figures compare like with like).
func BenchmarkGenerateAndAudit(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	g := fx.Generate([]byte(fx.ReferenceSeed), fx.ReferenceMath, fx.ReferenceIF)
	var corpus []string
	for _, it := range g.Items[:200] {
		corpus = append(corpus, it.Prompt)
	}
	for _, it := range g.Items[fx.ReferenceMath : fx.ReferenceMath+200] {
		corpus = append(corpus, it.Prompt)
	}
	files, err := tinymodel.Generate(tinymodel.ReferenceSeed, corpus, tinymodel.ReferenceShape)
	if err != nil {
		b.Fatal(err)
	}
	m, err := files.Load()
	if err != nil {
		b.Fatal(err)
	}
	if err := fx.BindModel(g, m, fx.ReferenceSampling, 1<<30); err != nil {
		b.Fatal(err)
	}
	if err := fx.WriteTask(filepath.Join(dir, "task"), g.Spec, g.Items); err != nil {
		b.Fatal(err)
	}
	l, err := cas.Init(filepath.Join(dir, "store"))
	if err != nil {
		b.Fatal(err)
	}
	s := roundtest.NewSigner(b)
	task, err := protocol.CreateTask(ctx, l, s, "rollouts", filepath.Join(dir, "task"), "")
	if err != nil {
		b.Fatal(err)
	}
	if err := files.Write(filepath.Join(dir, "model")); err != nil {
		b.Fatal(err)
	}
	mp, err := bundle.PackModel(ctx, l, func() (*bundle.Signer, error) { return s, nil }, filepath.Join(dir, "model"), bundle.PackOptions{Kind: "model"})
	if err != nil {
		b.Fatal(err)
	}
	loaded, err := rollouts.LoadTask(os.DirFS(filepath.Join(dir, "task")))
	if err != nil {
		b.Fatal(err)
	}
	miner, round := strings.Repeat("5e", 32), digest.FromString("round")
	entry := protocol.Entry{Status: protocol.StatusAccepted, Commitment: "sha256:" + digest.FromString("c").Encoded(), Miner: miner}
	for i := range b.N {
		sub := filepath.Join(dir, "sub", strings.Repeat("x", i+1))
		gen := &rollouts.Generator{Task: loaded, Model: m, Text: m.ResponseText, Workers: runtime.GOMAXPROCS(0),
			Spec: rollouts.GenerateSpec{Task: task.Digest, Round: round, Model: mp.Artifact.Digest, Miner: miner, Sampling: fx.ReferenceSampling}}
		cpu0 := cpuTime()
		start := time.Now()
		res, err := gen.Run(ctx, sub)
		if err != nil {
			b.Fatal(err)
		}
		genWall, genCPU := time.Since(start), cpuTime()-cpu0
		packed, err := protocol.PackSubmission(ctx, l, s, sub, bundle.PackOptions{Kind: protocol.KindSubmission})
		if err != nil {
			b.Fatal(err)
		}
		refs := rollouts.Refs{Task: task.Digest, Submission: packed.Artifact.OCI(), Round: ocispec.Descriptor{Digest: round}}
		cpu0 = cpuTime()
		start = time.Now()
		v, err := rollouts.Decide(ctx, l, refs, entry, rollouts.Params{Beacon: rollouts.Beacon{Source: "bench", Value: "v"}})
		if err != nil {
			b.Fatal(err)
		}
		auditWall, auditCPU := time.Since(start), cpuTime()-cpu0
		if v.Status != rollouts.StatusPassed || v.Audit.SampleSize != fx.ReferenceAuditRows {
			b.Fatalf("audit: %s %s, %d rows", v.Status, v.Reason, v.Audit.SampleSize)
		}
		// Tokens run through the model: prompt and completion of every row
		// generated, of every row audited.
		rows, err := os.ReadFile(filepath.Join(sub, rollouts.GeneratedRowsFile))
		if err != nil {
			b.Fatal(err)
		}
		tokens := map[string]int{}
		genTokens := 0
		for _, line := range strings.Split(strings.TrimSpace(string(rows)), "\n") {
			r, rerr := gate.ParseRow([]byte(line))
			if rerr != nil {
				b.Fatal(rerr)
			}
			tokens[r.TaskID] = len(r.PromptTokens) + len(r.CompletionTokens)
			genTokens += tokens[r.TaskID]
		}
		auditTokens := 0
		for _, r := range v.Audit.Rows {
			auditTokens += tokens[r.TaskID]
		}
		b.ReportMetric(float64(res.Rows), "rows")
		b.ReportMetric(genWall.Seconds(), "generate-s")
		b.ReportMetric(auditWall.Seconds(), "audit-s")
		b.ReportMetric(100*auditCPU.Seconds()/genCPU.Seconds(), "audit-%-of-generate-cpu")
		b.ReportMetric(100*auditWall.Seconds()/genWall.Seconds(), "audit-%-of-generate-wall")
		b.ReportMetric(float64(genCPU.Nanoseconds())/float64(genTokens), "generate-cpu-ns/token")
		b.ReportMetric(float64(auditCPU.Nanoseconds())/float64(auditTokens), "audit-cpu-ns/token")
	}
}

// cpuTime is the CPU time this process used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
