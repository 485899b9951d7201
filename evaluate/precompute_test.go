package evaluate

import (
	"bytes"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
)

// TestPrecomputedVerdicts: a verdict computed while the key is decrypted and
// numbered when written is the verdict decide computes with that number, for
// every reveal of a round that gets one (accepted and rejected alike).
func TestPrecomputedVerdicts(t *testing.T) {
	w := newBatchWorld(t)
	l, _ := w.clone(t)
	b := w.batch()
	seen, _, err := protocol.Preview(w.ctx, l, w.round, b.Obs)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := protocol.CheckRound(w.ctx, l, w.round, seen, b.Obs, Gate)
	if err != nil {
		t.Fatal(err)
	}
	pre := map[digest.Digest]*decided{}
	precompute(w.ctx, l, b, rep, nil, pre)
	if len(pre) != len(w.reveals) {
		t.Fatalf("%d verdicts computed beforehand, want %d (one per reveal)", len(pre), len(w.reveals))
	}
	for d, p := range pre {
		reveal, err := l.Resolve(w.ctx, d.String())
		if err != nil {
			t.Fatal(err)
		}
		_, round, err := rollouts.ResolveRound(w.ctx, l, reveal)
		if err != nil {
			t.Fatal(err)
		}
		drv, err := b.Options.Driver(round.Protocol)
		if err != nil {
			t.Fatal(err)
		}
		c := protocol.Case{Store: l, Refs: p.refs, Entry: p.entry, Sequence: 7}
		if drv, err = drv.Prepare(w.ctx, c, round); err != nil {
			t.Fatal(err)
		}
		v, err := drv.Decide(w.ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		want, err := bundle.Canonical(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := bundle.Canonical(drv.(numberedDriver).Numbered(p.v, 7))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("reveal %s: computed beforehand\n%s\nwant\n%s", d, got, want)
		}
	}
}

// TestPrecomputedBounded: precompute holds at most maxPrecomputed verdicts;
// the others are computed when written, to the same verdicts.
func TestPrecomputedBounded(t *testing.T) {
	w := newBatchWorld(t)
	l, _ := w.clone(t)
	b := w.batch()
	seen, _, err := protocol.Preview(w.ctx, l, w.round, b.Obs)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := protocol.CheckRound(w.ctx, l, w.round, seen, b.Obs, Gate)
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { maxPrecomputed = n }(maxPrecomputed)
	maxPrecomputed = 2
	pre := map[digest.Digest]*decided{}
	precompute(w.ctx, l, b, rep, nil, pre)
	if len(pre) != 2 {
		t.Fatalf("%d verdicts computed beforehand, want the bound, 2", len(pre))
	}
	evaluateRound := func() []Result {
		l, _ := w.clone(t)
		b := w.batch()
		b.Round = w.round.Digest.String()
		rs, err := EvaluateAll(w.ctx, l, w.signer, b)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	bounded := evaluateRound()
	maxPrecomputed = 1 << 20
	all := evaluateRound()
	if len(bounded) != len(all) {
		t.Fatalf("%d results, want %d", len(bounded), len(all))
	}
	for i := range all {
		if bounded[i].Err != nil || all[i].Err != nil {
			t.Fatalf("%s: %v / %v", all[i].Reveal, bounded[i].Err, all[i].Err)
		}
		if bounded[i].Outcome.Artifact.Digest != all[i].Outcome.Artifact.Digest {
			t.Errorf("%s: verdict %s with 2 computed beforehand, %s with all", all[i].Reveal, bounded[i].Outcome.Artifact.Digest, all[i].Outcome.Artifact.Digest)
		}
	}
}

// TestEvaluateAllListsVerdicts: the verdicts of a batch, listed in index.json
// together at its end, are in the store another process opens afterwards,
// and name no evidence.
func TestEvaluateAllListsVerdicts(t *testing.T) {
	w := newBatchWorld(t)
	l, root := w.clone(t)
	b := w.batch()
	b.Round = w.round.Digest.String()
	rs, err := EvaluateAll(w.ctx, l, w.signer, b)
	if err != nil {
		t.Fatal(err)
	}
	other, err := cas.OpenLayout(root)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Reveal, r.Err)
		}
		desc, err := other.Resolve(w.ctx, r.Outcome.Artifact.Digest.String())
		if err != nil {
			t.Errorf("verdict of %s not listed after the batch: %v", r.Reveal, err)
			continue
		}
		// decide does not read back what a numberedDriver wrote: its
		// verdicts must name no evidence.
		art, err := bundle.Load(w.ctx, other, desc)
		if err != nil {
			t.Fatal(err)
		}
		drv, err := b.Options.Driver("rollouts")
		if err != nil {
			t.Fatal(err)
		}
		if ev, err := drv.Evidence(art); err != nil || len(ev) != 0 || len(r.Outcome.Evidence) != 0 {
			t.Errorf("verdict of %s names evidence %v %v (%v)", r.Reveal, ev, r.Outcome.Evidence, err)
		}
	}
}
