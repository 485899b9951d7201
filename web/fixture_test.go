package web

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/consensus"
	"github.com/feval/feval/evaluate"
	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/internal/roundtest"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// hostile is a miner- or validator-supplied string that would run script,
// break out of an attribute or inject markup if it were not escaped.
const hostile = `"><script>alert(1)</script><img src=x onerror=alert(2)>'&`

// demo is a store as the demo leaves it, built in-process with the
// production code: a rollouts round with an honest and an inflating miner,
// three validators that evaluate both (the inflating one is rejected for
// mismatching rewards), a consensus record over them, a verdict of a fourth,
// hostile validator whose strings must come out escaped, a verdict naming
// receipts and checkpoints, and a forged verdict signed by a rogue key.
type demo struct {
	root      string
	owner     *bundle.Signer
	vals      []*bundle.Signer
	rogue     *bundle.Signer
	round     ocispec.Descriptor
	honest    digest.Digest // v1's verdict on the honest miner
	rejected  digest.Digest // v1's verdict on the inflating miner
	hostile   digest.Digest // the hostile validator's verdict
	metered   digest.Digest // the verdict with receipts and checkpoints
	forged    digest.Digest // the rogue's forged verdict
	consensus digest.Digest
	frontier  *Frontier
}

func newSigner(t *testing.T) *bundle.Signer { return roundtest.NewSigner(t) }

func at(t *testing.T, s string) protocol.Observation {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return protocol.Observation{Now: ts}
}

func newDemo(t *testing.T) *demo {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	d := &demo{root: filepath.Join(dir, "store"), owner: newSigner(t), rogue: newSigner(t)}
	for range 4 {
		d.vals = append(d.vals, newSigner(t))
	}
	l, err := cas.Init(d.root)
	if err != nil {
		t.Fatal(err)
	}
	g := fx.Generate([]byte(fx.ReferenceSeed), 30, 30)
	if err := fx.WriteTask(filepath.Join(dir, "task"), g.Spec, g.Items); err != nil {
		t.Fatal(err)
	}
	for _, k := range []fx.MinerKind{fx.Honest, fx.Inflated10} {
		if err := fx.WriteSubmission(filepath.Join(dir, "miners", string(k)), k, g, []byte(fx.ReferenceMinerSeed)); err != nil {
			t.Fatal(err)
		}
	}
	task, err := protocol.CreateTask(ctx, l, d.owner, "rollouts", filepath.Join(dir, "task"), "")
	if err != nil {
		t.Fatal(err)
	}
	cu, _ := protocol.ParseWindow("2026-12-01T00:00:00Z")
	ru, _ := protocol.ParseWindow("2026-12-02T00:00:00Z")
	if d.round, err = protocol.OpenRound(ctx, l, d.owner, task, cu, ru, ""); err != nil {
		t.Fatal(err)
	}
	if err := l.Tag(ctx, d.round, "round"); err != nil {
		t.Fatal(err)
	}
	var secrets []protocol.Secret
	var miners []*bundle.Signer
	for _, k := range []fx.MinerKind{fx.Honest, fx.Inflated10} {
		m := newSigner(t)
		c, err := protocol.Commit(ctx, l, m, d.round, filepath.Join(dir, "miners", string(k)), "", rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		sec, err := protocol.LoadSecret(l, c.Commitment)
		if err != nil {
			t.Fatal(err)
		}
		secrets, miners = append(secrets, sec), append(miners, m)
	}
	if _, err := protocol.Collect(ctx, l, l, d.round, at(t, "2026-11-30T18:00:00Z")); err != nil {
		t.Fatal(err)
	}
	var reveals []ocispec.Descriptor
	for i, sec := range secrets {
		rv, err := protocol.RevealCommitment(ctx, l, miners[i], sec, "")
		if err != nil {
			t.Fatal(err)
		}
		reveals = append(reveals, rv.Artifact.OCI())
	}
	beacon := rollouts.Beacon{Source: "drand:simulated:4242", Value: "5f3c2a"}
	for vi, v := range d.vals[:3] {
		for ri, rv := range reveals {
			out, err := evaluate.Evaluate(ctx, l, v, evaluate.Request{Reveal: rv.Digest.String(), Task: task.Digest.String(),
				Obs: at(t, "2026-12-01T06:00:00Z"), Options: evaluate.Options{Rollouts: rollouts.Params{Beacon: beacon, Full: true}}})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{rollouts.StatusPassed, rollouts.StatusRejected}[ri]
			if h := out.Verdict.Head(); h.Status != want {
				t.Fatalf("validator %d, reveal %d: %s (%s), want %s", vi, ri, h.Status, h.Reason, want)
			}
			if vi == 0 {
				if ri == 0 {
					d.honest = out.Artifact.Digest
				} else {
					d.rejected = out.Artifact.Digest
				}
			}
		}
	}

	// A fourth validator signs a rejection of the inflating miner whose
	// free-text strings (the beacon's source, an audited task id) are
	// hostile; the rest is strict, so the verdict counts (CONSENSUS.md 8.2).
	art, _, err := evaluate.LoadVerdict(ctx, l, mustResolve(t, l, d.rejected))
	if err != nil {
		t.Fatal(err)
	}
	var rej rollouts.Verdict
	if err := art.Decode(&rej); err != nil {
		t.Fatal(err)
	}
	h, audit := rej, *rej.Audit
	h.Sequence, h.Audit = 99, &audit
	audit.Beacon.Source = hostile
	audit.Rows = append([]rollouts.AuditRow{{TaskID: hostile, Claimed: "1", Recomputed: "0", Outcome: "mismatch"}}, audit.Rows...)
	subject := mustResolve(t, l, rej.Submission)
	hd, err := bundle.WriteSigned(ctx, l, d.vals[3], bundle.Artifact{Kind: protocol.KindVerdict, Record: h, Subject: &subject})
	if err != nil {
		t.Fatal(err)
	}
	d.hostile = hd.Digest

	// The rogue turns the rejection into a pass and signs it.
	forged := rej
	forged.Status, forged.Reason = rollouts.StatusPassed, ""
	fd, err := bundle.WriteSigned(ctx, l, d.rogue, bundle.Artifact{Kind: protocol.KindVerdict, Record: forged, Subject: &subject})
	if err != nil {
		t.Fatal(err)
	}
	d.forged = fd.Digest

	// A verdict of a metered protocol names receipts and a checkpoint; its
	// subject is an artifact of its own, so no round counts it.
	// The receipts record is the meter's own (docs/METER.md §6.2), summaries
	// included: costs must be counted once.
	var rs []meter.Receipt
	for i, c := range []struct {
		scenario, model string
		cost            int64
	}{{"scenario-01", "model-a", 120000}, {"scenario-01", "model-b", 30000}, {"scenario-02", "model-a", 45000}, {"scenario-02", hostile, 5000}} {
		rs = append(rs, meter.Receipt{Scenario: c.scenario, Seq: int64(i + 1), Model: c.model, RequestDigest: digest.FromString(c.model),
			ResponseDigest: digest.FromString(c.scenario), CostMicroUSD: c.cost, ReservedMicroUSD: c.cost, Outcome: "ok", UpstreamStatus: 200, HTTPStatus: 200, Attempts: 1})
	}
	receipts := meter.ReceiptsRecord{Format: meter.ReceiptsFormat, Submission: digest.FromString("metered"), Config: digest.FromString("config"),
		Trace: digest.FromString("trace"), Receipts: rs, Summaries: meter.Summarize(rs)}
	rd, err := bundle.WriteSigned(ctx, l, d.vals[0], bundle.Artifact{Kind: meter.KindReceipts, Record: receipts})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := bundle.WriteSigned(ctx, l, d.vals[0], bundle.Artifact{Kind: "checkpoint", Record: map[string]any{"held_out_loss_micro_nats": 3141592, "step": 200}})
	if err != nil {
		t.Fatal(err)
	}
	msub, err := bundle.WriteSigned(ctx, l, d.owner, bundle.Artifact{Kind: "submission", Record: map[string]any{"name": "metered"}})
	if err != nil {
		t.Fatal(err)
	}
	metered := map[string]any{"protocol": "scenarios", "status": "passed", "submission": msub.Digest.String(), "sequence": 1,
		"receipts": []string{rd.Digest.String()}, "checkpoints": []string{ck.Digest.String()}, "traces": []string{},
		"loss_micro_nats": 2718281}
	md, err := bundle.WriteSigned(ctx, l, d.vals[0], bundle.Artifact{Kind: protocol.KindVerdict, Record: metered, Subject: &msub})
	if err != nil {
		t.Fatal(err)
	}
	d.metered = md.Digest

	stakes := map[string]any{"stakes": map[string]uint64{}}
	for _, v := range d.vals {
		stakes["stakes"].(map[string]uint64)[v.Public().Fingerprint] = 100
	}
	sb, _ := json.Marshal(stakes)
	out, err := consensus.Run(ctx, l, d.owner, consensus.Options{Round: d.round.Digest.String(), Stakes: consensus.Input{JSON: sb}})
	if err != nil {
		t.Fatal(err)
	}
	d.consensus = out.Artifact.Digest
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	a, b := digest.FromString("optimizer-a"), digest.FromString("optimizer-b")
	d.frontier = &Frontier{BaselineMicroNats: 3_500_000, Rules: scoring.DefaultRules(), Runs: []scoring.Run{
		{Submission: a, Author: miners[0].Public().Fingerprint, RunIndex: 0, LossMicroNats: 3_450_000, AtSec: 86400},
		{Submission: a, Author: miners[0].Public().Fingerprint, RunIndex: 1, LossMicroNats: 3_460_000, AtSec: 2 * 86400},
		{Submission: b, Author: hostile, RunIndex: 0, LossMicroNats: 3_400_000, AtSec: 5 * 86400},
		{Submission: b, Author: hostile, RunIndex: 1, LossMicroNats: 3_410_000, AtSec: 6 * 86400},
	}}
	return d
}

// resign writes a copy of a rollouts verdict with another sequence number,
// signed by s, as a validator that evaluated it later would.
func (d *demo) resign(t *testing.T, s *bundle.Signer, verdict digest.Digest, sequence uint64) digest.Digest {
	t.Helper()
	ctx := context.Background()
	l, err := cas.OpenLayout(d.root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	art, _, err := evaluate.LoadVerdict(ctx, l, mustResolve(t, l, verdict))
	if err != nil {
		t.Fatal(err)
	}
	var v rollouts.Verdict
	if err := art.Decode(&v); err != nil {
		t.Fatal(err)
	}
	v.Sequence = sequence
	subject := mustResolve(t, l, v.Submission)
	desc, err := bundle.WriteSigned(ctx, l, s, bundle.Artifact{Kind: protocol.KindVerdict, Record: v, Subject: &subject})
	if err != nil {
		t.Fatal(err)
	}
	return desc.Digest
}

func mustResolve(t *testing.T, l *cas.Layout, d digest.Digest) ocispec.Descriptor {
	t.Helper()
	desc, err := l.Resolve(context.Background(), d.String())
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

// server returns a Server over the demo store trusting the first three
// validators and the owner, who signed the consensus record.
func (d *demo) server(t *testing.T) *Server {
	t.Helper()
	var keys []TrustedKey
	for i, v := range d.vals[:3] {
		keys = append(keys, TrustedKey{Path: filepath.Join("keys", "validator-"+string(rune('1'+i))+".pub"), Key: v.Public()})
	}
	keys = append(keys, TrustedKey{Path: filepath.Join("keys", "owner.pub"), Key: d.owner.Public()})
	s, err := New(d.root, Options{Trusted: keys, Frontier: d.frontier,
		Now: func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
