package replay_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/internal/roundtest"
	"github.com/feval/feval/internal/testenv"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/replay"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestMain lets the test binary act as an auditor in a separate process: it
// replays a verdict from a registry into a store of its own and prints the
// outcome and the regenerated digest.
func TestMain(m *testing.M) {
	if repo := os.Getenv("FEVAL_TEST_AUDIT_REPO"); repo != "" {
		out, err := audit(repo, os.Getenv("FEVAL_TEST_AUDIT_STORE"), os.Getenv("FEVAL_TEST_AUDIT_VERDICT"), os.Getenv("FEVAL_TEST_AUDIT_PUB"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(out)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func audit(repo, store, verdict, pubPEM string) (string, error) {
	ctx := context.Background()
	pub, err := bundle.ParsePublicKey([]byte(pubPEM))
	if err != nil {
		return "", err
	}
	l, err := cas.Init(store)
	if err != nil {
		return "", err
	}
	src, err := openRemote(repo)
	if err != nil {
		return "", err
	}
	desc, err := src.Resolve(ctx, verdict)
	if err != nil {
		return "", err
	}
	if err := replay.Fetch(ctx, src, l, desc); err != nil {
		return "", err
	}
	res, err := replay.Run(ctx, l, desc, []*bundle.PublicKey{pub})
	if err != nil {
		return "", err
	}
	return res.Outcome + " " + res.Recomputed.String(), nil
}

func openRemote(repo string) (*cas.Remote, error) {
	ref, err := cas.ParseRemote(repo)
	if err != nil {
		return nil, err
	}
	return cas.OpenRemote(ref, cas.RemoteOptions{})
}

func signer(t *testing.T) *bundle.Signer { return roundtest.NewSigner(t) }

func layout(t *testing.T, name string) *cas.Layout {
	l, err := cas.Init(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func at(s string) protocol.Observation {
	ts, _ := time.Parse(time.RFC3339, s)
	return protocol.Observation{Now: ts}
}

// TestRolloutLoop runs the whole rollout audit with the reference task across
// separate stores that share only a loopback registry: every fixture miner gets
// its expected verdict, and an auditor in another process and another store
// regenerates every verdict byte for byte.
func TestRolloutLoop(t *testing.T) {
	ctx := context.Background()
	reg := testenv.StartRegistry(t)
	repo := reg.Addr + "/competition/rollouts"
	remote, err := openRemote(repo)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	g := fx.Generate([]byte(fx.ReferenceSeed), fx.ReferenceMath, fx.ReferenceIF)
	if err := fx.WriteTask(filepath.Join(dir, "task"), g.Spec, g.Items); err != nil {
		t.Fatal(err)
	}
	minerSeed := []byte(fx.ReferenceMinerSeed)
	if _, err := fx.WriteMiners(filepath.Join(dir, "miners"), g, minerSeed); err != nil {
		t.Fatal(err)
	}

	// The task owner publishes task and round.
	owner, ownerKey := layout(t, "owner"), signer(t)
	task, err := protocol.CreateTask(ctx, owner, ownerKey, "rollouts", filepath.Join(dir, "task"), "")
	if err != nil {
		t.Fatal(err)
	}
	cu, _ := protocol.ParseWindow("2026-12-01T00:00:00Z")
	ru, _ := protocol.ParseWindow("2026-12-02T00:00:00Z")
	round, err := protocol.OpenRound(ctx, owner, ownerKey, task, cu, ru, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cas.Copy(ctx, owner, remote, round, cas.CopyOptions{Subjects: true, Referrers: true}); err != nil {
		t.Fatal(err)
	}

	// Miners commit in order; the validator sees each commitment at a later
	// minute, so the honest miner's commitment comes first.
	validator, validatorKey := layout(t, "validator"), signer(t)
	type miner struct {
		kind   fx.MinerKind
		store  *cas.Layout
		key    *bundle.Signer
		secret protocol.Secret
		reveal ocispec.Descriptor
	}
	var miners []*miner
	for i, kind := range fx.MinerKinds() {
		m := &miner{kind: kind, store: layout(t, string(kind)), key: signer(t)}
		if _, err := cas.Copy(ctx, remote, m.store, round, cas.CopyOptions{Subjects: true}); err != nil {
			t.Fatal(err)
		}
		c, err := protocol.Commit(ctx, m.store, m.key, round, filepath.Join(dir, "miners", string(kind)), "", rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cas.Copy(ctx, m.store, remote, c.Artifact.OCI(), cas.CopyOptions{Referrers: true}); err != nil {
			t.Fatal(err)
		}
		if m.secret, err = protocol.LoadSecret(m.store, c.Commitment); err != nil {
			t.Fatal(err)
		}
		if _, err := protocol.Collect(ctx, remote, validator, round, at(fmt.Sprintf("2026-11-30T10:%02d:00Z", i))); err != nil {
			t.Fatal(err)
		}
		miners = append(miners, m)
	}
	for _, m := range miners {
		rv, err := protocol.RevealCommitment(ctx, m.store, m.key, m.secret, "")
		if err != nil {
			t.Fatal(err)
		}
		sub, _ := m.store.Resolve(ctx, rv.Submission.String())
		for _, d := range []ocispec.Descriptor{sub, rv.Artifact.OCI()} {
			if _, err := cas.Copy(ctx, m.store, remote, d, cas.CopyOptions{Referrers: true}); err != nil {
				t.Fatal(err)
			}
		}
		m.reveal = rv.Artifact.OCI()
	}

	beacon := rollouts.Beacon{Source: "drand:test:1", Value: "0f1e2d3c4b5a69788796a5b4c3d2e1f0"}
	subs, err := fx.Miners(g, minerSeed)
	if err != nil {
		t.Fatal(err)
	}
	inflated := map[fx.MinerKind]map[string]bool{}
	for i, kind := range fx.MinerKinds() {
		inflated[kind] = map[string]bool{}
		for _, row := range subs[i].Inflated {
			inflated[kind][subs[i].Rows[row].TaskID] = true
		}
	}
	var ids []string
	for _, it := range g.Items {
		ids = append(ids, it.TaskID)
	}
	var verdicts []digest.Digest
	for _, m := range miners {
		out, err := evaluate.Evaluate(ctx, validator, validatorKey, evaluate.Request{
			Reveal: m.reveal.Digest.String(), Task: task.Digest.String(), Source: remote,
			Obs: at("2026-12-01T06:00:00Z"), Options: evaluate.Options{Rollouts: rollouts.Params{Beacon: beacon}}})
		if err != nil {
			t.Fatalf("%s: %v", m.kind, err)
		}
		v := out.Verdict.(rollouts.Verdict)
		switch m.kind {
		case fx.Honest:
			if v.Status != rollouts.StatusPassed || v.Audit.SampleSize != 320 || len(v.Audit.Mismatches) != 0 {
				t.Errorf("honest: %s %s", v.Status, v.Reason)
			}
		case fx.Inflated1, fx.Inflated10:
			// The sample catches the miner exactly when it contains an inflated row.
			seed := scoring.AuditSeed(beacon.Source, beacon.Value, m.secret.Commitment, m.secret.Submission.String())
			caught := 0
			for _, id := range scoring.SampleRows(seed, ids, 320) {
				if inflated[m.kind][id] {
					caught++
				}
			}
			if len(v.Audit.Mismatches) != caught || (caught > 0) != (v.Status == rollouts.StatusRejected) {
				t.Errorf("%s: %d mismatches, status %s; the sample holds %d inflated rows", m.kind, len(v.Audit.Mismatches), v.Status, caught)
			}
			if m.kind == fx.Inflated10 && v.Status != rollouts.StatusRejected {
				t.Errorf("inflated-10 escaped: %s", v.Status)
			}
		case fx.WrongTask:
			if v.Status != rollouts.StatusRejected || v.Reason != protocol.ReasonGateFailed || !hasRule(v, "unknown-task-id") {
				t.Errorf("wrong-task: %s %s %v", v.Status, v.Reason, v.Violations)
			}
		case fx.Copier:
			if v.Status != rollouts.StatusRejected || v.Reason != protocol.ReasonCopy {
				t.Errorf("copier: %s %s", v.Status, v.Reason)
			}
		}
		if _, err := cas.Copy(ctx, validator, remote, out.Artifact.OCI(), cas.CopyOptions{Subjects: true, Referrers: true}); err != nil {
			t.Fatal(err)
		}
		verdicts = append(verdicts, out.Artifact.Digest)
	}

	// A full evaluation catches every inflated row.
	for _, m := range miners {
		if m.kind != fx.Inflated1 {
			continue
		}
		out, err := evaluate.Evaluate(ctx, validator, validatorKey, evaluate.Request{
			Reveal: m.reveal.Digest.String(), Obs: at("2026-12-01T06:00:00Z"), Options: evaluate.Options{Rollouts: rollouts.Params{Beacon: beacon, Full: true}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(out.Verdict.(rollouts.Verdict).Audit.Mismatches); got != len(inflated[fx.Inflated1]) || got != 100 {
			t.Fatalf("full audit of inflated-1 found %d mismatches, want 100", got)
		}
	}

	// An auditor decides on the keys it trusts, never on whoever signed: no
	// key is a refusal, another key a failure naming the key that signed.
	vd, err := validator.Resolve(ctx, verdicts[0].String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Run(ctx, validator, vd, nil); !errors.Is(err, replay.ErrNoTrustedKeys) {
		t.Fatalf("replay trusting no key: %v", err)
	}
	_, err = replay.Run(ctx, validator, vd, []*bundle.PublicKey{signer(t).Public()})
	if !errors.Is(err, replay.ErrUntrusted) || !errors.Is(err, bundle.ErrVerify) ||
		!strings.Contains(err.Error(), "signed by "+validatorKey.Public().Fingerprint[:16]) {
		t.Fatalf("replay trusting another key: %v", err)
	}

	// Auditors in two other processes, each with its own store, regenerate
	// every verdict to the same digest.
	for i, v := range verdicts {
		for j := 0; j < 2; j++ {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "FEVAL_TEST_AUDIT_REPO="+repo, "FEVAL_TEST_AUDIT_VERDICT="+v.String(),
				"FEVAL_TEST_AUDIT_STORE="+filepath.Join(t.TempDir(), fmt.Sprintf("auditor-%d-%d", i, j)),
				"FEVAL_TEST_AUDIT_PUB="+string(validatorKey.Public().PEM))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("auditor process for %s: %v\n%s", v, err, out)
			}
			if want := replay.Identical + " " + v.String(); strings.TrimSpace(string(out)) != want {
				t.Fatalf("auditor %d for verdict %d: %s, want %s", j, i, out, want)
			}
		}
	}
}

func hasRule(v rollouts.Verdict, rule string) bool {
	for _, vi := range v.Violations {
		if vi.Rule == rule {
			return true
		}
	}
	return false
}
