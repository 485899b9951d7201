package replay_test

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"testing"

	"github.com/feval/feval/beacon"
	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/replay"
	"github.com/feval/feval/scoring"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Quicknet round 9683710 as the chain's relays publish it (2024-07-24T20:54:54Z),
// and the round just before it, at 20:54:51Z.
const (
	drandRound      = 9683710
	drandSignature  = "b0a8b04e009cf72534321aca0f50048da596a3feec1172a0244d9a4a623a3123d0402da79854d4c705e94bc73224c342"
	drandRandomness = "87f03ef5f62885390defedf60d5b8132b4dc2115b1efc6e99d166a37ab2f3a02"
	// Commits close at round 9683709's time: 9683710 is the first round after.
	drandCommitUntil = "2024-07-24T20:54:51Z"
)

type beaconFixture struct {
	ctx     context.Context
	l       *cas.Layout
	val     *bundle.Signer
	task    ocispec.Descriptor
	reveal  ocispec.Descriptor
	trusted []*bundle.PublicKey // owner, miner and validator
}

// newBeaconFixture is a small rollouts round whose commit window closes at
// drandCommitUntil, with one honest miner's reveal, all in one store.
func newBeaconFixture(t *testing.T, commitUntil, revealUntil string) *beaconFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	g := fx.Generate([]byte(fx.ReferenceSeed), 40, 40)
	if err := fx.WriteTask(filepath.Join(dir, "task"), g.Spec, g.Items); err != nil {
		t.Fatal(err)
	}
	if err := fx.WriteSubmission(filepath.Join(dir, "honest"), fx.Honest, g, []byte(fx.ReferenceMinerSeed)); err != nil {
		t.Fatal(err)
	}
	l := layout(t, "store")
	owner, miner := signer(t), signer(t)
	task, err := protocol.CreateTask(ctx, l, owner, "rollouts", filepath.Join(dir, "task"), "")
	if err != nil {
		t.Fatal(err)
	}
	cu, err := protocol.ParseWindow(commitUntil)
	if err != nil {
		t.Fatal(err)
	}
	ru, err := protocol.ParseWindow(revealUntil)
	if err != nil {
		t.Fatal(err)
	}
	round, err := protocol.OpenRound(ctx, l, owner, task, cu, ru, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := protocol.Commit(ctx, l, miner, round, filepath.Join(dir, "honest"), "", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// The validator sees the commitment before commits close.
	seenAt := at("2024-07-24T20:00:00Z")
	h := int64(90)
	seenAt.Height = &h
	if _, err := protocol.Collect(ctx, l, l, round, seenAt); err != nil {
		t.Fatal(err)
	}
	sec, err := protocol.LoadSecret(l, c.Commitment)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := protocol.RevealCommitment(ctx, l, miner, sec, "")
	if err != nil {
		t.Fatal(err)
	}
	val := signer(t)
	return &beaconFixture{ctx: ctx, l: l, val: val, task: task, reveal: rv.Artifact.OCI(),
		trusted: []*bundle.PublicKey{owner.Public(), miner.Public(), val.Public()}}
}

func (f *beaconFixture) evaluate(b rollouts.Beacon, now string) (evaluate.Outcome, error) {
	return evaluate.Evaluate(f.ctx, f.l, f.val, evaluate.Request{Reveal: f.reveal.Digest.String(), Task: f.task.Digest.String(),
		Obs: at(now), Options: evaluate.Options{Rollouts: rollouts.Params{Beacon: b}}})
}

func drandBeacon(round uint64, sig string) rollouts.Beacon {
	return rollouts.Beacon{Drand: &beacon.Drand{Chain: beacon.Quicknet.Hash, Round: round, Signature: sig}}
}

// TestDrandBeacon: a verdict audited with a published quicknet round records
// chain, round and signature, derives the value from the signature, and replays
// identically; a round the validator could have chosen, or one that existed
// before commits closed, or a signature that does not verify, is refused by
// evaluate and by replay.
func TestDrandBeacon(t *testing.T) {
	f := newBeaconFixture(t, drandCommitUntil, "2024-07-25T00:00:00Z")
	out, err := f.evaluate(drandBeacon(drandRound, drandSignature), "2024-07-24T21:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	v := out.Verdict.(rollouts.Verdict)
	if v.Status != rollouts.StatusPassed || v.Audit == nil {
		t.Fatalf("verdict %s %s", v.Status, v.Reason)
	}
	b := v.Audit.Beacon
	if !b.Verified || b.Value != drandRandomness || b.Source != "drand:"+beacon.Quicknet.Hash+":9683710" || b.Drand == nil || b.Drand.Signature != drandSignature {
		t.Fatalf("recorded beacon %+v", b)
	}
	var rv protocol.Reveal
	if _, err := protocol.LoadAs(f.ctx, f.l, f.reveal, protocol.KindReveal, &rv); err != nil {
		t.Fatal(err)
	}
	if seed := scoring.AuditSeed(b.Source, drandRandomness, rv.Commitment, rv.Submission.String()); v.Audit.Seed != scoring.SeedHex(seed) {
		t.Errorf("seed %s is not derived from the round's randomness", v.Audit.Seed)
	}
	res, err := replay.Run(f.ctx, f.l, out.Artifact.OCI(), f.trusted)
	if err != nil || res.Outcome != replay.Identical {
		t.Fatalf("replay: %v %+v", err, res)
	}

	for name, bad := range map[string]rollouts.Beacon{
		"a later round":       drandBeacon(drandRound+1, drandSignature),
		"an earlier round":    drandBeacon(3, "b3fab6df720b68cc47175f2c777e86d84187caab5770906f515ff1099cb01e4deaa027075d860823e49477b93c72bd64"),
		"a forged signature":  drandBeacon(drandRound, "b3fab6df720b68cc47175f2c777e86d84187caab5770906f515ff1099cb01e4deaa027075d860823e49477b93c72bd64"),
		"an unknown chain":    {Drand: &beacon.Drand{Chain: "00" + beacon.Quicknet.Hash[2:], Round: drandRound, Signature: drandSignature}},
		"upper-case hex":      drandBeacon(drandRound, "B0A8"+drandSignature[4:]),
		"a plain empty value": {Source: "x"},
	} {
		if _, err := f.evaluate(bad, "2024-07-24T21:00:00Z"); !errors.Is(err, rollouts.ErrBeacon) {
			t.Errorf("%s: evaluate gave %v, want ErrBeacon", name, err)
		}
	}

	// Verdicts signed by the validator that misstate their beacon.
	forge := func(mut func(b *rollouts.Beacon)) ocispec.Descriptor {
		fv := v
		a := *v.Audit
		fv.Audit = &a
		mut(&fv.Audit.Beacon)
		desc, err := bundle.WriteSigned(f.ctx, f.l, f.val, bundle.Artifact{Kind: protocol.KindVerdict, Record: fv, Subject: &ocispec.Descriptor{
			MediaType: ocispec.MediaTypeImageManifest, Digest: v.Submission, Size: subjectSize(t, f, v)}})
		if err != nil {
			t.Fatal(err)
		}
		return desc
	}
	claimed := forge(func(b *rollouts.Beacon) { *b = rollouts.Beacon{Source: b.Source, Value: b.Value, Verified: true} })
	if res, err := replay.Run(f.ctx, f.l, claimed, f.trusted); err != nil || res.Outcome != replay.Differs || !hasDiff(res, "audit.beacon.verified") {
		t.Errorf("a plain beacon claiming to be verified: %v %+v", err, res)
	}
	otherRound := forge(func(b *rollouts.Beacon) {
		b.Drand = &beacon.Drand{Chain: b.Drand.Chain, Round: drandRound + 1, Signature: drandSignature}
	})
	if _, err := replay.Run(f.ctx, f.l, otherRound, f.trusted); !errors.Is(err, bundle.ErrVerify) {
		t.Errorf("a drand beacon that does not verify: replay gave %v, want a verification failure", err)
	}
	otherValue := forge(func(b *rollouts.Beacon) { b.Value = "00" + b.Value[2:] })
	if res, err := replay.Run(f.ctx, f.l, otherValue, f.trusted); err != nil || res.Outcome != replay.Differs || !hasDiff(res, "audit.beacon.value") {
		t.Errorf("a drand beacon with another value: %v %+v", err, res)
	}
}

// TestPlainBeaconIsUnverified: the plain form still works for tests, and the
// verdict says it is unverified.
func TestPlainBeaconIsUnverified(t *testing.T) {
	f := newBeaconFixture(t, drandCommitUntil, "2024-07-25T00:00:00Z")
	out, err := f.evaluate(rollouts.Beacon{Source: "block:4200", Value: "0f1e2d", Verified: true}, "2024-07-24T21:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	if b := out.Verdict.(rollouts.Verdict).Audit.Beacon; b.Verified || b.Drand != nil || b.Value != "0f1e2d" {
		t.Fatalf("plain beacon recorded as %+v", b)
	}
	if res, err := replay.Run(f.ctx, f.l, out.Artifact.OCI(), f.trusted); err != nil || res.Outcome != replay.Identical {
		t.Fatalf("replay: %v %+v", err, res)
	}
}

// TestDrandBeaconHeightWindow: with block-height windows the round must be the
// first one produced after the reveal was first seen.
func TestDrandBeaconHeightWindow(t *testing.T) {
	f := newBeaconFixture(t, "height:100", "height:200")
	obs := at("2024-07-24T20:54:52Z")
	h := int64(150)
	obs.Height = &h
	out, err := evaluate.Evaluate(f.ctx, f.l, f.val, evaluate.Request{Reveal: f.reveal.Digest.String(), Obs: obs,
		Options: evaluate.Options{Rollouts: rollouts.Params{Beacon: drandBeacon(drandRound, drandSignature)}}})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Verdict.(rollouts.Verdict).Audit.Beacon.Verified {
		t.Fatalf("beacon %+v", out.Verdict.(rollouts.Verdict).Audit.Beacon)
	}
	if _, err := evaluate.Evaluate(f.ctx, f.l, f.val, evaluate.Request{Reveal: f.reveal.Digest.String(), Obs: obs,
		Options: evaluate.Options{Rollouts: rollouts.Params{Beacon: drandBeacon(drandRound+1, drandSignature)}}}); !errors.Is(err, rollouts.ErrBeacon) {
		t.Errorf("a later round: %v, want ErrBeacon", err)
	}
	if res, err := replay.Run(f.ctx, f.l, out.Artifact.OCI(), f.trusted); err != nil || res.Outcome != replay.Identical {
		t.Fatalf("replay: %v %+v", err, res)
	}
}

func subjectSize(t *testing.T, f *beaconFixture, v rollouts.Verdict) int64 {
	d, err := f.l.Resolve(f.ctx, v.Submission.String())
	if err != nil {
		t.Fatal(err)
	}
	return d.Size
}

func hasDiff(res replay.Result, path string) bool {
	for _, d := range res.Diffs {
		if d.Path == path {
			return true
		}
	}
	return false
}

// TestLateCommitmentVerdict: the reveal of a commitment first seen after the
// commit window gets a rejected verdict (commit_late) that replays identically.
func TestLateCommitmentVerdict(t *testing.T) {
	f := newBeaconFixture(t, "2024-07-24T19:00:00Z", "2024-07-25T00:00:00Z") // commitment seen at 20:00
	out, err := f.evaluate(rollouts.Beacon{Source: "block:1", Value: "00"}, "2024-07-24T21:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	if v := out.Verdict.(rollouts.Verdict); v.Status != rollouts.StatusRejected || v.Reason != protocol.ReasonCommitLate || v.RevealCheck.RevealSeen.Time != "2024-07-24T21:00:00Z" {
		t.Fatalf("verdict %s %s, reveal seen %+v", v.Status, v.Reason, v.RevealCheck.RevealSeen)
	}
	if res, err := replay.Run(f.ctx, f.l, out.Artifact.OCI(), f.trusted); err != nil || res.Outcome != replay.Identical {
		t.Fatalf("replay: %v %+v", err, res)
	}
}
