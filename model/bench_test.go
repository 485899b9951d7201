package model_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/fixtures/tinymodel"
	"github.com/feval/feval/internal/roundtest"
	"github.com/feval/feval/model"
)

// benchShapes are the models the per-token benchmark runs: the reference
// tiny model, and a mid-sized one (12 M parameters) where the matrix
// products, not the per-operation overheads, dominate.
var benchShapes = []struct {
	name  string
	shape tinymodel.Shape
}{
	{"tiny", tinymodel.ReferenceShape},
	{"mid", tinymodel.Shape{Hidden: 512, Layers: 4, Heads: 8, KVHeads: 2, HeadDim: 64, Intermediate: 1536, Merges: 384, MaxPositions: 1024}},
}

// BenchmarkPrefillPerToken is the provenance check's cost per token: the
// reference runtime runs a row teacher-forced, one token at a time with its
// key/value cache and the logits of every position, as Check does. Plain
// torch (model/testdata/qwen3_torch.py, one thread, the whole row in one
// batched pass) runs the same weights and tokens in the same run; the
// metrics are ns/token for each and their ratio.
func BenchmarkPrefillPerToken(b *testing.B) {
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		b.Skipf("%s has no torch: %v", python, err)
	}
	for _, c := range benchShapes {
		b.Run(c.name, func(b *testing.B) {
			f, err := tinymodel.Generate("bench-"+c.name, testCorpus, c.shape)
			if err != nil {
				b.Fatal(err)
			}
			m, err := f.Load()
			if err != nil {
				b.Fatal(err)
			}
			// A row of 256 tokens: a prompt and its completion.
			seq := make([]int, 256)
			for i := range seq {
				seq[i] = (i * 37) % m.Config.VocabSize
			}
			torchNs := torchPerToken(b, f, seq)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				st := m.NewState()
				for _, t := range seq {
					st.Step(t, true)
				}
			}
			goNs := float64(time.Since(start).Nanoseconds()) / float64(b.N*len(seq))
			b.ReportMetric(goNs, "ns/token")
			b.ReportMetric(torchNs, "torch-ns/token")
			b.ReportMetric(goNs/torchNs, "go/torch")
		})
	}
}

// torchPerToken times plain torch over seq (10 passes after a warm-up) and
// returns its ns per token.
func torchPerToken(b *testing.B, f tinymodel.Files, seq []int) float64 {
	b.Helper()
	dir := b.TempDir()
	if err := f.Write(dir); err != nil {
		b.Fatal(err)
	}
	var got struct {
		Seconds float64 `json:"seconds"`
		Tokens  int     `json:"tokens"`
	}
	runTorch(b, map[string]any{"dir": dir, "rows": [][]int{seq}, "repeat": 10}, &got)
	if got.Tokens == 0 {
		b.Fatal("qwen3_torch.py timed no tokens")
	}
	return got.Seconds * 1e9 / float64(got.Tokens)
}

// BenchmarkModelCheck is the memory the committed model's check takes: the
// reference runtime's LoadArtifact (the weights as stored, then widened to
// float32) against CheckArtifact (the weights streamed through the check, as
// feval rollouts generate --runtime runs it), on the mid-sized model packed
// into a store. The metric is bytes allocated per check against the weights'
// size.
func BenchmarkModelCheck(b *testing.B) {
	ctx := context.Background()
	mid := benchShapes[1]
	f, err := tinymodel.Generate("bench-"+mid.name, testCorpus, mid.shape)
	if err != nil {
		b.Fatal(err)
	}
	l, err := cas.Init(filepath.Join(b.TempDir(), "store"))
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := f.Write(dir); err != nil {
		b.Fatal(err)
	}
	s := roundtest.NewSigner(b)
	p, err := bundle.PackModel(ctx, l, func() (*bundle.Signer, error) { return s, nil }, dir, bundle.PackOptions{Kind: "model"})
	if err != nil {
		b.Fatal(err)
	}
	desc := p.Artifact.OCI()
	for _, c := range []struct {
		name  string
		check func() error
	}{
		{"load", func() error { _, err := model.LoadArtifact(ctx, l, desc, model.DefaultLimits); return err }},
		{"stream", func() error { _, err := model.CheckArtifact(ctx, l, desc, model.DefaultLimits); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range b.N {
				if err := c.check(); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			perCheck := float64(after.TotalAlloc-before.TotalAlloc) / float64(b.N)
			b.ReportMetric(perCheck/float64(len(f.Weights)), "alloc/weights")
		})
	}
}
