package rollouts_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

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
// recompute). Replay runs the same Decide. The "layered" cases use a
// submission in format 3 (rows layer read by byte range through a rows
// index), the "indexed" cases one with a claims file (format 2); the others
// decode every row (format 1). The
// task is parsed once per process (as a validator evaluating a round does);
// BenchmarkDecideColdTask prices the first evaluation.
func BenchmarkDecide(b *testing.B) {
	l, refs, xrefs, lrefs := decideFixture(b)
	entry := protocol.Entry{Status: protocol.StatusAccepted, Commitment: "sha256:" + digest.FromString("c").Encoded()}
	for _, mode := range []struct {
		name string
		refs rollouts.Refs
		full bool
	}{{"audit-320", refs, false}, {"full-10000", refs, true}, {"indexed/audit-320", xrefs, false}, {"indexed/full-10000", xrefs, true},
		{"layered/audit-320", lrefs, false}, {"layered/full-10000", lrefs, true}} {
		b.Run(mode.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				decide(b, l, mode.refs, entry, mode.full)
			}
		})
	}
}

// BenchmarkDecidePaired alternates an audit and a full evaluation of the same
// submission in one loop (the order swapping each round), so that load from
// elsewhere falls on both alike, and reports the medians and the median of the
// per-round ratios audit / full: the goal is at most 0.05. A garbage
// collection runs, untimed, before each evaluation, so that neither pays for
// the other's garbage.
func BenchmarkDecidePaired(b *testing.B) {
	l, refs, xrefs, lrefs := decideFixture(b)
	entry := protocol.Entry{Status: protocol.StatusAccepted, Commitment: "sha256:" + digest.FromString("c").Encoded()}
	for _, c := range []struct {
		name string
		refs rollouts.Refs
	}{{"rows", refs}, {"indexed", xrefs}, {"layered", lrefs}} {
		b.Run(c.name, func(b *testing.B) {
			decide(b, l, c.refs, entry, false) // parse the task once, as a validator does per round
			var audit, full, ratio []float64
			for i := 0; i < b.N; i++ {
				var ta, tf time.Duration
				if i%2 == 0 {
					ta, tf = decide(b, l, c.refs, entry, false), decide(b, l, c.refs, entry, true)
				} else {
					tf, ta = decide(b, l, c.refs, entry, true), decide(b, l, c.refs, entry, false)
				}
				audit, full = append(audit, ta.Seconds()*1e3), append(full, tf.Seconds()*1e3)
				ratio = append(ratio, float64(ta)/float64(tf))
			}
			b.ReportMetric(medianOf(audit), "audit-ms")
			b.ReportMetric(medianOf(full), "full-ms")
			b.ReportMetric(medianOf(ratio), "ratio")
		})
	}
}

// BenchmarkDecideColdTask is the audit of a format-3 submission when the
// task is not parsed yet: the first evaluation of a process.
func BenchmarkDecideColdTask(b *testing.B) {
	l, _, _, xrefs := decideFixture(b)
	entry := protocol.Entry{Status: protocol.StatusAccepted, Commitment: "sha256:" + digest.FromString("c").Encoded()}
	for i := 0; i < b.N; i++ {
		rollouts.ForgetTasks()
		decide(b, l, xrefs, entry, false)
	}
}

func medianOf(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func decide(b *testing.B, l cas.Store, refs rollouts.Refs, entry protocol.Entry, full bool) time.Duration {
	b.StopTimer() // the collection is nobody's cost
	runtime.GC()
	b.StartTimer()
	start := time.Now()
	v, err := rollouts.Decide(context.Background(), l, refs, entry, rollouts.Params{Beacon: rollouts.Beacon{Source: "s", Value: "v"}, Full: full})
	if err != nil || v.Status != rollouts.StatusPassed {
		b.Fatal(err, v.Status)
	}
	return time.Since(start)
}

// decideFixture stores the reference task and the honest miner's submission,
// as rows alone (format 1), with a claims file (format 2) and as a rows
// layer with its index (format 3).
func decideFixture(b *testing.B) (*cas.Layout, rollouts.Refs, rollouts.Refs, rollouts.Refs) {
	ctx := context.Background()
	dir := b.TempDir()
	g := fx.Generate([]byte(fx.ReferenceSeed), fx.ReferenceMath, fx.ReferenceIF)
	if err := fx.WriteTask(filepath.Join(dir, "task"), g.Spec, g.Items); err != nil {
		b.Fatal(err)
	}
	if err := fx.WriteSubmission(filepath.Join(dir, "honest"), fx.Honest, g, []byte(fx.ReferenceMinerSeed)); err != nil {
		b.Fatal(err)
	}
	if err := fx.WriteIndexedSubmission(filepath.Join(dir, "indexed"), fx.Honest, g, []byte(fx.ReferenceMinerSeed)); err != nil {
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
	indexed, err := bundle.PackPath(ctx, l, s, filepath.Join(dir, "indexed"), bundle.PackOptions{Kind: protocol.KindSubmission})
	if err != nil {
		b.Fatal(err)
	}
	layered, err := protocol.PackSubmission(ctx, l, s, filepath.Join(dir, "honest"), bundle.PackOptions{Kind: protocol.KindSubmission})
	if err != nil {
		b.Fatal(err)
	}
	if layered.Content.Type != protocol.ContentTypeRollouts {
		b.Fatalf("honest submission packed as %q, not in format 3", layered.Content.Type)
	}
	refs := rollouts.Refs{Task: task.Digest, Submission: sub.Artifact.OCI(), Round: ocispec.Descriptor{Digest: digest.FromString("r")}}
	xrefs, lrefs := refs, refs
	xrefs.Submission = indexed.Artifact.OCI()
	lrefs.Submission = layered.Artifact.OCI()
	return l, refs, xrefs, lrefs
}
