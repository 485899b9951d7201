package rollouts_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"path/filepath"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// BenchmarkScoreAllRows recomputes the reward of all 10,000 honest rows of the
// reference task (the checkers alone). Goal: under 1 s per op on one core.
func BenchmarkScoreAllRows(b *testing.B) {
	g := fx.Generate([]byte(fx.ReferenceSeed), fx.ReferenceMath, fx.ReferenceIF)
	sub, err := fx.Miner(fx.Honest, g, []byte(fx.ReferenceMinerSeed))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, it := range g.Items {
			if _, und, err := rollouts.RowReward(it, sub.Rows[j].Response, g.Spec.MathFuel); err != nil || und {
				b.Fatal(err, und)
			}
		}
	}
}

// BenchmarkDecide compares a full evaluation of the reference honest miner with
// a 320-row audit of it (Decide: load the task and rows from the store, sample,
// recompute). Replay runs the same Decide.
func BenchmarkDecide(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	g := fx.Generate([]byte(fx.ReferenceSeed), fx.ReferenceMath, fx.ReferenceIF)
	if err := fx.WriteTask(filepath.Join(dir, "task"), g.Spec, g.Items); err != nil {
		b.Fatal(err)
	}
	if err := fx.WriteSubmission(filepath.Join(dir, "honest"), fx.Honest, g, []byte(fx.ReferenceMinerSeed)); err != nil {
		b.Fatal(err)
	}
	l, err := cas.Init(filepath.Join(dir, "store"))
	if err != nil {
		b.Fatal(err)
	}
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	s, _ := bundle.NewSigner(k)
	task, err := protocol.CreateTask(ctx, l, s, "rollouts", filepath.Join(dir, "task"), "")
	if err != nil {
		b.Fatal(err)
	}
	sub, err := bundle.PackPath(ctx, l, s, filepath.Join(dir, "honest"), bundle.PackOptions{Kind: protocol.KindSubmission})
	if err != nil {
		b.Fatal(err)
	}
	refs := rollouts.Refs{Task: task.Digest, Submission: sub.Artifact, Round: ocispec.Descriptor{Digest: digest.FromString("r")}}
	entry := protocol.Entry{Status: protocol.StatusAccepted, Commitment: "sha256:" + digest.FromString("c").Encoded()}
	for _, mode := range []struct {
		name string
		full bool
	}{{"audit-320", false}, {"full-10000", true}} {
		b.Run(mode.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				v, err := rollouts.Decide(ctx, l, refs, entry, rollouts.Params{Beacon: rollouts.Beacon{Source: "s", Value: "v"}, Full: mode.full})
				if err != nil || v.Status != rollouts.StatusPassed {
					b.Fatal(err, v.Status)
				}
			}
		})
	}
}
