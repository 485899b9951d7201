package evaluate

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/internal/roundtest"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// batchWorld is a rollouts round of every fixture miner kind, observed by a
// validator whose store (commitments seen before commits closed, reveals not
// yet observed) can be cloned, so that evaluations in different ways start
// from the same state.
type batchWorld struct {
	ctx     context.Context
	base    string // the validator's store, closed
	round   ocispec.Descriptor
	task    ocispec.Descriptor
	reveals []ocispec.Descriptor // in fx.MinerKinds order
	key     *bundle.Signer
}

func newBatchWorld(t *testing.T) *batchWorld {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	g := fx.Generate([]byte("evaluate batch test"), 60, 40)
	if err := fx.WriteTask(filepath.Join(dir, "task"), g.Spec, g.Items); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.WriteMiners(filepath.Join(dir, "miners"), g, []byte("evaluate batch miners")); err != nil {
		t.Fatal(err)
	}
	w := &batchWorld{ctx: ctx, base: filepath.Join(dir, "validator"), key: roundtest.NewSigner(t)}
	v, err := cas.Init(w.base)
	if err != nil {
		t.Fatal(err)
	}
	owner := roundtest.NewSigner(t)
	if w.task, err = protocol.CreateTask(ctx, v, owner, "rollouts", filepath.Join(dir, "task"), ""); err != nil {
		t.Fatal(err)
	}
	cu, _ := protocol.ParseWindow("2026-12-01T00:00:00Z")
	ru, _ := protocol.ParseWindow("2026-12-02T00:00:00Z")
	if w.round, err = protocol.OpenRound(ctx, v, owner, w.task, cu, ru, ""); err != nil {
		t.Fatal(err)
	}
	// Every miner commits (the validator sees each commitment a minute after
	// the last), then every miner reveals.
	type miner struct {
		store *cas.Layout
		key   *bundle.Signer
		sec   protocol.Secret
	}
	var miners []miner
	for i, kind := range fx.MinerKinds() {
		m := miner{key: roundtest.NewSigner(t)}
		if m.store, err = cas.Init(filepath.Join(dir, "miner-"+string(kind))); err != nil {
			t.Fatal(err)
		}
		if _, err := cas.Copy(ctx, v, m.store, w.round, cas.CopyOptions{Subjects: true}); err != nil {
			t.Fatal(err)
		}
		c, err := protocol.Commit(ctx, m.store, m.key, w.round, filepath.Join(dir, "miners", string(kind)), "", rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cas.Copy(ctx, m.store, v, c.Artifact.OCI(), cas.CopyOptions{Referrers: true}); err != nil {
			t.Fatal(err)
		}
		seen := roundtest.At("2026-11-30T10:00:00Z")
		seen.Now = seen.Now.Add(time.Duration(i) * time.Minute)
		if _, err := protocol.Collect(ctx, v, v, w.round, seen); err != nil {
			t.Fatal(err)
		}
		if m.sec, err = protocol.LoadSecret(m.store, c.Commitment); err != nil {
			t.Fatal(err)
		}
		miners = append(miners, m)
	}
	for _, m := range miners {
		rv, err := protocol.RevealCommitment(ctx, m.store, m.key, m.sec, "")
		if err != nil {
			t.Fatal(err)
		}
		sub, err := m.store.Resolve(ctx, rv.Submission.String())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []ocispec.Descriptor{sub, rv.Artifact.OCI()} {
			if _, err := cas.Copy(ctx, m.store, v, d, cas.CopyOptions{Referrers: true}); err != nil {
				t.Fatal(err)
			}
		}
		w.reveals = append(w.reveals, rv.Artifact.OCI())
		m.store.Close()
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	return w
}

// clone returns a copy of the validator's store.
func (w *batchWorld) clone(t *testing.T) (*cas.Layout, string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "store")
	if err := os.CopyFS(dst, os.DirFS(w.base)); err != nil {
		t.Fatal(err)
	}
	l, err := cas.OpenLayout(dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dst
}

func (w *batchWorld) batch() Batch {
	return Batch{Task: w.task.Digest.String(), Obs: roundtest.At("2026-12-01T06:00:00Z"),
		Options: Options{Rollouts: rollouts.Params{Beacon: rollouts.Beacon{Source: "test:1", Value: "5e1f"}}}}
}

func (w *batchWorld) signer() (*bundle.Signer, error) { return w.key, nil }

// TestEvaluateAllSameVerdicts: evaluating the reveals of a round in one
// batch, by name or as the round, writes the very verdicts (same digests,
// same sequence numbers) that evaluating each alone writes, from a local
// store and from a source.
func TestEvaluateAllSameVerdicts(t *testing.T) {
	w := newBatchWorld(t)
	alone, _ := w.clone(t)
	var want []digest.Digest
	for _, rv := range w.reveals {
		b := w.batch()
		out, err := Evaluate(w.ctx, alone, w.key, Request{Reveal: rv.Digest.String(), Task: b.Task, Obs: b.Obs, Options: b.Options})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, out.Artifact.Digest)
	}
	statuses := map[fx.MinerKind]string{fx.Honest: "passed", fx.WrongTask: "rejected " + protocol.ReasonGateFailed, fx.Copier: "rejected " + protocol.ReasonCopy}
	check := func(t *testing.T, rs []Result) {
		t.Helper()
		if len(rs) != len(want) {
			t.Fatalf("%d results, want %d", len(rs), len(want))
		}
		for i, r := range rs {
			kind := fx.MinerKinds()[i]
			if r.Err != nil {
				t.Fatalf("%s: %v", kind, r.Err)
			}
			if r.Outcome.Artifact.Digest != want[i] {
				t.Errorf("%s: verdict %s, evaluated alone %s", kind, r.Outcome.Artifact.Digest, want[i])
			}
			h := r.Outcome.Verdict.Head()
			if s, ok := statuses[kind]; ok && s != h.Status && s != h.Status+" "+h.Reason {
				t.Errorf("%s: %s %s, want %s", kind, h.Status, h.Reason, s)
			}
		}
	}
	var names []string
	for _, rv := range w.reveals {
		names = append(names, rv.Digest.String())
	}
	t.Run("reveals", func(t *testing.T) {
		l, _ := w.clone(t)
		b := w.batch()
		b.Reveals = names
		rs, err := EvaluateAll(w.ctx, l, w.signer, b)
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs)
	})
	t.Run("round", func(t *testing.T) {
		l, _ := w.clone(t)
		b := w.batch()
		b.Round = w.round.Digest.String()
		rs, err := EvaluateAll(w.ctx, l, w.signer, b)
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs)
	})
	t.Run("from a source", func(t *testing.T) {
		l, _ := w.clone(t)
		src, _ := w.clone(t)
		b := w.batch()
		b.Reveals, b.Source = names, src
		rs, err := EvaluateAll(w.ctx, l, w.signer, b)
		if err != nil {
			t.Fatal(err)
		}
		check(t, rs)
	})
	t.Run("a bad reveal among them", func(t *testing.T) {
		l, _ := w.clone(t)
		b := w.batch()
		b.Reveals = []string{names[0], "sha256:" + string(bytes.Repeat([]byte("0"), 64)), names[1]}
		rs, err := EvaluateAll(w.ctx, l, w.signer, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 3 || rs[0].Err != nil || rs[2].Err != nil || !errors.Is(rs[1].Err, cas.ErrNotFound) {
			t.Fatalf("results %+v, want the second not found and the others evaluated", rs)
		}
		if rs[0].Outcome.Artifact.Digest != want[0] || rs[2].Outcome.Artifact.Digest != want[1] {
			t.Errorf("the others' verdicts differ from evaluating them alone")
		}
	})
}

// TestEvaluateAllBadKey: a key that cannot be decrypted fails the batch with
// its error, and the store is left as it was (no first-seen record, no
// sequence number, no verdict), with or without a source.
func TestEvaluateAllBadKey(t *testing.T) {
	w := newBatchWorld(t)
	bad := func() (*bundle.Signer, error) { return nil, bundle.ErrBadPassword }
	for _, source := range []bool{false, true} {
		l, dir := w.clone(t)
		before := treeSums(t, dir)
		b := w.batch()
		b.Round = w.round.Digest.String()
		if source {
			b.Source, _ = w.clone(t)
		}
		if _, err := EvaluateAll(w.ctx, l, bad, b); !errors.Is(err, bundle.ErrBadPassword) {
			t.Fatalf("source %v: %v, want ErrBadPassword", source, err)
		}
		after := treeSums(t, dir)
		for p, s := range after {
			if before[p] != s {
				t.Errorf("source %v: %s written", source, p)
			}
		}
	}
}

// treeSums maps every regular file under dir to its SHA-256.
func treeSums(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = sha256.Sum256(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
