package rollouts_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// modelCorpus trains the test model's tokenizer.
var modelCorpus = []string{"What is 12 + 30? The answer is 42.", "Write a short poem about the sea, in three lines."}

// smallShape keeps the test model small: the check reads every weight.
var smallShape = tinymodel.Shape{Hidden: 16, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 8, Intermediate: 32, Merges: 64, MaxPositions: 256}

// modelEnv is an indexedEnv whose task binds rows to a model.
type modelEnv struct {
	*indexedEnv
	files tinymodel.Files
	model ocispec.Descriptor // the accepted model, packed into the store
}

func newModelEnv(t *testing.T, maxWeights int64) *modelEnv {
	t.Helper()
	files, err := tinymodel.Generate("modelcheck", modelCorpus, smallShape)
	if err != nil {
		t.Fatal(err)
	}
	e := newIndexedEnv(t)
	// An entry as a reveal check gives it, so verdicts match their schema.
	e.entry.Miner = e.s.Public().Fingerprint
	e.entry.CommitSeen = protocol.Seen{Time: "2026-01-01T00:00:00Z"}
	e.entry.RevealSeen = &protocol.Seen{Time: "2026-01-01T01:00:00Z"}
	spec := e.g.Spec
	spec.Model = &rollouts.ModelSpec{Architecture: rollouts.ArchitectureQwen3, Tokenizer: digest.FromBytes(files.Tokenizer), MaxWeightsBytes: maxWeights}
	dir := filepath.Join(e.dir, "model-task")
	if err := fx.WriteTask(dir, spec, e.g.Items); err != nil {
		t.Fatal(err)
	}
	task, err := protocol.CreateTask(e.ctx, e.l, e.s, "rollouts", dir, "")
	if err != nil {
		t.Fatal(err)
	}
	e.task = task.Digest
	m := &modelEnv{indexedEnv: e, files: files}
	m.model = m.packModel(t, "model", files, nil)
	return m
}

// packModel writes files (and extra, by name) into dir/name and packs them
// as a model artifact.
func (e *modelEnv) packModel(t *testing.T, name string, files tinymodel.Files, extra map[string][]byte) ocispec.Descriptor {
	t.Helper()
	dir := filepath.Join(e.dir, name)
	if err := files.Write(dir); err != nil {
		t.Fatal(err)
	}
	for n, b := range extra {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := bundle.PackModel(e.ctx, e.l, func() (*bundle.Signer, error) { return e.s, nil }, dir, bundle.PackOptions{Kind: "model"})
	if err != nil {
		t.Fatal(err)
	}
	return p.Artifact.OCI()
}

// submit writes the honest submission naming revision into dir/name and packs
// it as feval commit does (protocol.PackSubmission), or without the model
// as subject (bare), or with subj as its subject.
func (e *modelEnv) submit(t *testing.T, name, revision string, bare bool, subj *ocispec.Descriptor) rollouts.Refs {
	t.Helper()
	dir := filepath.Join(e.dir, name)
	if err := fx.WriteSubmission(dir, fx.Honest, e.g, []byte(fx.ReferenceMinerSeed)); err != nil {
		t.Fatal(err)
	}
	setRevision(t, dir, revision)
	pack := protocol.PackSubmission
	if bare {
		pack = bundle.PackPath
	}
	sub, err := pack(e.ctx, e.l, e.s, dir, bundle.PackOptions{Kind: protocol.KindSubmission, Subject: subj})
	if err != nil {
		t.Fatal(err)
	}
	return rollouts.Refs{Task: e.task, Submission: sub.Artifact.OCI(), Round: ocispec.Descriptor{Digest: digest.FromString("r")},
		Commitment: ocispec.Descriptor{Digest: digest.FromString("c")}, Reveal: ocispec.Descriptor{Digest: digest.FromString("v")}}
}

func setRevision(t *testing.T, dir, revision string) {
	t.Helper()
	p := filepath.Join(dir, gate.RolloutSubmissionFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var sub gate.RolloutSubmission
	if err := json.Unmarshal(b, &sub); err != nil {
		t.Fatal(err)
	}
	sub.ModelRevision = revision
	if b, err = json.Marshal(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestModelBoundSubmission: in a task that binds rows to a model, the
// verdict records the committed model's check; a model that is not a
// loadable Qwen3 safetensors model with the task's tokenizer, or one the
// submission does not carry as its subject, rejects the submission with
// reason model_refused and says why.
func TestModelBoundSubmission(t *testing.T) {
	e := newModelEnv(t, 1<<20)
	honest := e.submit(t, "honest", e.model.Digest.String(), false, nil)
	art, err := bundle.Load(e.ctx, e.l, honest.Submission)
	if err != nil {
		t.Fatal(err)
	}
	if s := art.Manifest.Subject; s == nil || s.Digest != e.model.Digest {
		t.Fatalf("the submission's subject is %v, want the model %s", s, e.model.Digest)
	}
	v := e.decide(t, honest, false)
	if v.Status != rollouts.StatusPassed || v.ModelCheck == nil || v.ModelCheck.Status != rollouts.ModelAccepted || v.ModelCheck.Revision != e.model.Digest.String() {
		t.Fatalf("honest: status %s, model %+v", v.Status, v.ModelCheck)
	}
	roundtest.MatchesSchema(t, "verdict-rollouts.schema.json", v)

	otherTok, err := tinymodel.Generate("modelcheck", []string{"another corpus, another tokenizer"}, smallShape)
	if err != nil {
		t.Fatal(err)
	}
	pickled := e.packModel(t, "pickled", e.files, map[string][]byte{"pytorch_model.bin": e.files.Weights})
	retok := e.packModel(t, "retok", otherTok, nil)
	notModel, err := bundle.PackPath(e.ctx, e.l, e.s, filepath.Join(e.dir, "honest"), bundle.PackOptions{Kind: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		revision string
		bare     bool
		subject  *ocispec.Descriptor
		detail   string
	}{
		"git commit":        {revision: strings.Repeat("ab", 20), detail: "is a git commit"},
		"not carried":       {revision: e.model.Digest.String(), bare: true, detail: "does not carry model"},
		"not in the store":  {revision: "sha256:" + strings.Repeat("0", 64), detail: "does not carry model"},
		"pickle beside":     {revision: pickled.Digest.String(), detail: "pytorch_model.bin is a .bin file, a format that runs code when loaded"},
		"another tokenizer": {revision: retok.Digest.String(), detail: "the task's prompts are encoded with " + digest.FromBytes(e.files.Tokenizer).String()},
		"bare, not a model": {revision: notModel.Artifact.Digest.String(), bare: true, detail: "does not carry model"},
		"another subject":   {revision: e.model.Digest.String(), subject: &retok, detail: "does not carry model"},
	} {
		v := e.decide(t, e.submit(t, strings.ReplaceAll(name, " ", "-"), c.revision, c.bare, c.subject), false)
		if v.Status != rollouts.StatusRejected || v.Reason != rollouts.ReasonModel || v.ModelCheck == nil ||
			v.ModelCheck.Status != rollouts.ModelRefused || !strings.Contains(v.ModelCheck.Detail, c.detail) || v.Audit != nil {
			t.Errorf("%s: status %s (%s), model %+v, audit %v; want a refusal saying %q", name, v.Status, v.Reason, v.ModelCheck, v.Audit != nil, c.detail)
			continue
		}
		roundtest.MatchesSchema(t, "verdict-rollouts.schema.json", v)
	}

	// A model_revision naming a non-model artifact in the store is refused
	// when packing: it cannot become the submission's subject.
	dir := filepath.Join(e.dir, "honest")
	setRevision(t, dir, notModel.Artifact.Digest.String())
	if _, err := protocol.PackSubmission(e.ctx, e.l, e.s, dir, bundle.PackOptions{Kind: protocol.KindSubmission}); !errors.Is(err, protocol.ErrModelRevision) {
		t.Errorf("packing a submission naming a non-model artifact: %v, want ErrModelRevision", err)
	}
}

// TestModelOverTaskLimit: weights over the task's max_weights_bytes are
// refused before they are read.
func TestModelOverTaskLimit(t *testing.T) {
	e := newModelEnv(t, 1000)
	v := e.decide(t, e.submit(t, "big", e.model.Digest.String(), false, nil), false)
	if v.Status != rollouts.StatusRejected || v.ModelCheck == nil || !strings.Contains(v.ModelCheck.Detail, "model.safetensors has") || !strings.Contains(v.ModelCheck.Detail, "over 1000") {
		t.Fatalf("status %s, model %+v; want model.safetensors refused over 1000 bytes", v.Status, v.ModelCheck)
	}
}

// TestCopySubmissionNeedsItsModel: a submission travels with its model; one
// whose model is missing at the source is not copied at all (a validator
// reports it as submission_missing), so no store holds a submission without
// its model.
func TestCopySubmissionNeedsItsModel(t *testing.T) {
	e := newModelEnv(t, 1<<20)
	refs := e.submit(t, "honest", e.model.Digest.String(), false, nil)
	dst, err := cas.Init(filepath.Join(e.dir, "validator"))
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.CopySubmission(e.ctx, e.l, dst, refs.Submission); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Resolve(e.ctx, e.model.Digest.String()); err != nil {
		t.Errorf("the model did not come with the submission: %v", err)
	}
	// A source that has the submission but not its model.
	partial, err := cas.Init(filepath.Join(e.dir, "partial"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cas.Copy(e.ctx, e.l, partial, refs.Submission, cas.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	empty, err := cas.Init(filepath.Join(e.dir, "empty"))
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.CopySubmission(e.ctx, partial, empty, refs.Submission); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("copying a submission whose model is missing: %v, want ErrNotFound", err)
	}
	if _, err := empty.Resolve(e.ctx, refs.Submission.Digest.String()); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("the submission was copied without its model: %v", err)
	}
}

// TestModelSpecChecked: a task's model section must name the architecture
// feval runs, a sha256 tokenizer digest and a weights bound within the
// default limit.
func TestModelSpecChecked(t *testing.T) {
	e := newIndexedEnv(t)
	tok := digest.FromString("tokenizer")
	for name, m := range map[string]rollouts.ModelSpec{
		"architecture": {Architecture: "llama", Tokenizer: tok, MaxWeightsBytes: 1},
		"tokenizer":    {Architecture: rollouts.ArchitectureQwen3, Tokenizer: "md5:abc", MaxWeightsBytes: 1},
		"no weights":   {Architecture: rollouts.ArchitectureQwen3, Tokenizer: tok},
		"too many":     {Architecture: rollouts.ArchitectureQwen3, Tokenizer: tok, MaxWeightsBytes: 1 << 50},
	} {
		spec := e.g.Spec
		spec.Model = &m
		dir := filepath.Join(e.dir, "task-"+strings.ReplaceAll(name, " ", "-"))
		if err := fx.WriteTask(dir, spec, e.g.Items); err != nil {
			t.Fatal(err)
		}
		if _, err := rollouts.LoadTask(os.DirFS(dir)); !errors.Is(err, rollouts.ErrTask) || !strings.Contains(err.Error(), "model.") {
			t.Errorf("%s: %v, want a malformed task naming its model section", name, err)
		}
	}
}
