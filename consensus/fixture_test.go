package consensus

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/roundtest"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// keys are the signing keys of a test world; the same keys give the same
// artifacts in any store.
type keys struct {
	owner  *bundle.Signer
	miners []*bundle.Signer
	vals   []*bundle.Signer
	rogue  *bundle.Signer
}

func newSigner(t *testing.T) *bundle.Signer { return roundtest.NewSigner(t) }

func newKeys(t *testing.T, miners, vals int) *keys {
	k := &keys{owner: newSigner(t), rogue: newSigner(t)}
	for range miners {
		k.miners = append(k.miners, newSigner(t))
	}
	for range vals {
		k.vals = append(k.vals, newSigner(t))
	}
	return k
}

// world is a round with revealed submissions in one store.
type world struct {
	t      *testing.T
	ctx    context.Context
	st     *cas.Layout
	keys   *keys
	dir    string
	task   ocispec.Descriptor
	round  ocispec.Descriptor
	miners []minerEntry
	stakes digest.Digest
	rules  digest.Digest
}

type minerEntry struct {
	key        *bundle.Signer
	reveal     ocispec.Descriptor
	submission ocispec.Descriptor
	// commitment is the commitment artifact, value its record's commitment.
	commitment digest.Digest
	value      string
}

// newWorld opens a round in a fresh store; every miner i commits and reveals
// the directory "sub-<content[i]>" (equal contents make copies), with a fixed
// salt so that equal keys give equal artifacts. stakes[i] is validator i's stake.
func newWorld(t *testing.T, k *keys, contents []string, stakes []uint64) *world {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := cas.Init(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, st: st, keys: k, dir: dir}
	taskDir := filepath.Join(dir, "task")
	write(t, filepath.Join(taskDir, "task.json"), `{"protocol":"rollouts"}`)
	if w.task, err = protocol.CreateTask(ctx, st, k.owner, "rollouts", taskDir, ""); err != nil {
		t.Fatal(err)
	}
	cu, _ := protocol.ParseWindow("2026-12-01T00:00:00Z")
	ru, _ := protocol.ParseWindow("2026-12-02T00:00:00Z")
	if w.round, err = protocol.OpenRound(ctx, st, k.owner, w.task, cu, ru, ""); err != nil {
		t.Fatal(err)
	}
	for i, c := range contents {
		w.miners = append(w.miners, w.reveal(k.miners[i], c, w.round, byte(i)))
	}
	table := StakeTable{Stakes: map[string]uint64{}}
	for i, s := range stakes {
		table.Stakes[k.vals[i].Public().Fingerprint] = s
	}
	sd, err := WriteStakes(ctx, st, k.owner, table, "")
	if err != nil {
		t.Fatal(err)
	}
	w.stakes = sd.Digest
	rules := scoring.DefaultRules()
	rules.MaxScore = scoring.NewRatio(1, 1)
	rd, err := WriteRules(ctx, st, k.owner, rules, "")
	if err != nil {
		t.Fatal(err)
	}
	w.rules = rd.Digest
	return w
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// reveal commits and reveals a submission of the given content in round.
func (w *world) reveal(key *bundle.Signer, content string, round ocispec.Descriptor, salt byte) minerEntry {
	w.t.Helper()
	subDir := filepath.Join(w.dir, "sub-"+content)
	write(w.t, filepath.Join(subDir, "rows.jsonl"), content+"\n")
	c, err := protocol.Commit(w.ctx, w.st, key, round, subDir, "", bytes.NewReader(bytes.Repeat([]byte{salt}, protocol.SaltSize)))
	if err != nil {
		w.t.Fatal(err)
	}
	sec, err := protocol.LoadSecret(w.st, c.Commitment)
	if err != nil {
		w.t.Fatal(err)
	}
	rv, err := protocol.RevealCommitment(w.ctx, w.st, key, sec, "")
	if err != nil {
		w.t.Fatal(err)
	}
	sub, err := w.st.Resolve(w.ctx, c.Submission.String())
	if err != nil {
		w.t.Fatal(err)
	}
	return minerEntry{key: key, reveal: rv.Artifact.OCI(), submission: sub, commitment: c.Artifact.Digest, value: c.Commitment}
}

// verdict writes a verdict by s (unsigned when s is nil) on miner m's entry;
// edit may change the record before it is written.
func (w *world) verdict(s *bundle.Signer, m int, status, score string, seq uint64, edit func(*rollouts.Verdict)) digest.Digest {
	w.t.Helper()
	e := w.miners[m]
	v := w.record(e, w.round.Digest, status, score, seq)
	if edit != nil {
		edit(&v)
	}
	return w.write(s, v, e.submission)
}

// record is a well-formed rollouts verdict record on entry e of round.
func (w *world) record(e minerEntry, round digest.Digest, status, score string, seq uint64) rollouts.Verdict {
	v := rollouts.Verdict{
		Protocol:   "rollouts",
		Status:     status,
		Submission: e.submission.Digest,
		Inputs: rollouts.Inputs{Task: w.task.Digest, Round: round, Commitment: e.commitment, CommitmentValue: e.value,
			Reveal: e.reveal.Digest, Miner: e.key.Public().Fingerprint},
		RevealCheck: rollouts.RevealCheck{Status: protocol.StatusAccepted,
			CommitSeen: protocol.Seen{Time: "2026-11-30T12:00:00Z"}, RevealSeen: protocol.Seen{Time: "2026-12-01T12:00:00Z"}},
		Checkers:     rollouts.Checkers{Math: "mathverify/2", IF: "ifeval/2"},
		Rows:         1,
		ClaimedScore: score,
		Traces:       []digest.Digest{},
		Sequence:     seq,
	}
	switch status {
	case protocol.VerdictRejected:
		v.Reason = rollouts.ReasonRewardMismatch
	case protocol.VerdictUndetermined:
		v.Reason = rollouts.ReasonUndeterminedRows
	case protocol.VerdictInfraError:
		v.Reason = rollouts.ReasonChecker
	}
	return v
}

func (w *world) write(s *bundle.Signer, record any, subject ocispec.Descriptor) digest.Digest {
	w.t.Helper()
	a := bundle.Artifact{Kind: protocol.KindVerdict, Record: record, Subject: &subject}
	var desc ocispec.Descriptor
	var err error
	if s == nil {
		desc, err = bundle.Write(w.ctx, w.st, a)
	} else {
		desc, err = bundle.WriteSigned(w.ctx, w.st, s, a)
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return desc.Digest
}

// foreignSignature attaches to target a well-formed signature by s over another
// artifact: a signature that does not verify.
func (w *world) foreignSignature(s *bundle.Signer, target, other digest.Digest) {
	w.t.Helper()
	td, err := w.st.Resolve(w.ctx, target.String())
	if err != nil {
		w.t.Fatal(err)
	}
	od, err := w.st.Resolve(w.ctx, other.String())
	if err != nil {
		w.t.Fatal(err)
	}
	sb, err := s.SignatureBytes(od)
	if err != nil {
		w.t.Fatal(err)
	}
	layer, err := bundle.PushBytes(w.ctx, w.st, bundle.MediaTypeSigstoreBundle, sb)
	if err != nil {
		w.t.Fatal(err)
	}
	cfg, err := bundle.PushBytes(w.ctx, w.st, ocispec.MediaTypeEmptyJSON, ocispec.DescriptorEmptyJSON.Data)
	if err != nil {
		w.t.Fatal(err)
	}
	cfg.Data = ocispec.DescriptorEmptyJSON.Data
	subj := clean(td)
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: bundle.MediaTypeSigstoreBundle,
		Config: cfg, Layers: []ocispec.Descriptor{layer}, Subject: &subj}
	m.SchemaVersion = 2
	mb, err := bundle.Canonical(m)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := bundle.PushBytes(w.ctx, w.st, ocispec.MediaTypeImageManifest, mb); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) compute(inc *Incumbent) Record {
	w.t.Helper()
	rec, err := Compute(w.ctx, w.st, Request{Round: w.round.Digest, Stakes: w.stakes, Rules: w.rules, Incumbent: inc})
	if err != nil {
		w.t.Fatal(err)
	}
	return rec
}

func encode(t *testing.T, rec Record) []byte {
	t.Helper()
	b, err := bundle.Canonical(rec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func result(t *testing.T, rec Record, reveal digest.Digest) Result {
	t.Helper()
	for _, r := range rec.Results {
		if r.Reveal == reveal {
			return r
		}
	}
	t.Fatalf("no result for reveal %s", reveal)
	return Result{}
}

func exclusionsOf(rec Record, verdict digest.Digest) []string {
	var out []string
	for _, x := range rec.Excluded {
		if x.Verdict == verdict {
			out = append(out, fmt.Sprintf("%s/%s", short(x.Validator), x.Reason))
		}
	}
	return out
}

func short(fp string) string {
	if len(fp) > 8 {
		return fp[:8]
	}
	return fp
}
