package rollouts_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/feval/feval/model"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// smallShape keeps the test model small: the check reads every weight.
var smallShape = tinymodel.Shape{Hidden: 32, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 16, Intermediate: 32, Merges: 256, MaxPositions: 1024}

// modelEnv is an indexedEnv whose task binds rows to a model.
type modelEnv struct {
	*indexedEnv
	files  tinymodel.Files
	m      *model.Model
	model  ocispec.Descriptor // the accepted model, packed into the store
	loaded *rollouts.LoadedTask
	round  digest.Digest // the round of the Refs submit returns
	rows   string        // the honest rows, generated once
}

func newModelEnv(t *testing.T, maxWeights int64) *modelEnv {
	t.Helper()
	e := newIndexedEnv(t)
	// The tokenizer learns the task's prompts, as a real one knows the
	// language: the model's random text then holds words, not bytes.
	var corpus []string
	for _, it := range e.g.Items {
		corpus = append(corpus, it.Prompt)
	}
	files, err := tinymodel.Generate("modelcheck", corpus, smallShape)
	if err != nil {
		t.Fatal(err)
	}
	// An entry as a reveal check gives it, so verdicts match their schema.
	// A fixed miner: the rows, which its key seeds, are the same every run.
	e.entry.Miner = strings.Repeat("5e", 32)
	e.entry.CommitSeen = protocol.Seen{Time: "2026-01-01T00:00:00Z"}
	e.entry.RevealSeen = &protocol.Seen{Time: "2026-01-01T01:00:00Z"}
	mm, err := files.Load()
	if err != nil {
		t.Fatal(err)
	}
	g := *e.g
	g.Items = append([]rollouts.Item(nil), e.g.Items...)
	if err := fx.BindModel(&g, mm, fx.ReferenceSampling, maxWeights); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.dir, "model-task")
	if err := fx.WriteTask(dir, g.Spec, g.Items); err != nil {
		t.Fatal(err)
	}
	task, err := protocol.CreateTask(e.ctx, e.l, e.s, "rollouts", dir, "")
	if err != nil {
		t.Fatal(err)
	}
	e.task = task.Digest
	loaded, err := rollouts.LoadTask(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	m := &modelEnv{indexedEnv: e, files: files, m: mm, loaded: loaded, round: digest.FromString("r")}
	m.model = m.packModel(t, "model", files, nil)
	m.rows = m.generate(t, "honest-rows", mm)
	return m
}

// generate writes the rows model gm generates for the env's miner and round
// into dir/name and returns the rows file's path.
func (e *modelEnv) generate(t *testing.T, name string, gm *model.Model) string {
	t.Helper()
	g := &rollouts.Generator{Task: e.loaded, Model: gm, Text: gm.ResponseText, Workers: 2,
		Spec: rollouts.GenerateSpec{Task: e.task, Round: e.round, Model: e.model.Digest, Miner: e.entry.Miner, Sampling: fx.ReferenceSampling}}
	dir := filepath.Join(e.dir, name)
	if _, err := g.Run(e.ctx, dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, rollouts.GeneratedRowsFile)
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

// submit writes the honest submission naming revision into dir/name, its
// rows changed by edit when given, and packs it as feval commit does
// (protocol.PackSubmission), or without the model as subject (bare), or with
// subj as its subject.
func (e *modelEnv) submit(t *testing.T, name, revision string, bare bool, subj *ocispec.Descriptor) rollouts.Refs {
	return e.submitRows(t, name, revision, bare, subj, e.rows, nil)
}

func (e *modelEnv) submitRows(t *testing.T, name, revision string, bare bool, subj *ocispec.Descriptor, rowsPath string, edit func(rows []gate.Row)) rollouts.Refs {
	t.Helper()
	dir := filepath.Join(e.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(rowsPath)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		var rows []gate.Row
		for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			r, rerr := gate.ParseRow(line)
			if rerr != nil {
				t.Fatal(rerr)
			}
			rows = append(rows, r)
		}
		edit(rows)
		b = nil
		for _, r := range rows {
			line, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			b = append(append(b, line...), '\n')
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "rows.jsonl"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, gate.RolloutSubmissionFile), []byte(`{"model_revision":"x","rows":"rows.jsonl"}`), 0o644); err != nil {
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
	return rollouts.Refs{Task: e.task, Submission: sub.Artifact.OCI(), Round: ocispec.Descriptor{Digest: e.round},
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

// TestProvenance: every audited row of a model-bound task must be the seeded
// completion of the task's prompt by the committed model. An honest miner's
// generated rows pass; a swapped token, another prompt, text rows, and rows
// generated with slightly perturbed weights are rejected with the row, the
// first failing position, the tokens and the margin.
func TestProvenance(t *testing.T) {
	e := newModelEnv(t, 1<<20)
	rev := e.model.Digest.String()
	full := func(refs rollouts.Refs) rollouts.Verdict {
		t.Helper()
		v := e.decide(t, refs, true)
		roundtest.MatchesSchema(t, "verdict-rollouts.schema.json", v)
		return v
	}
	honest := full(e.submit(t, "honest", rev, false, nil))
	if honest.Status != rollouts.StatusPassed || len(honest.Audit.Rows) != len(e.loaded.Items) {
		t.Fatalf("honest: %s %s, %d rows audited, undetermined %v", honest.Status, honest.Reason, len(honest.Audit.Rows), honest.Audit.Undetermined)
	}
	for _, r := range honest.Audit.Rows {
		if r.Provenance == nil || r.Provenance.Outcome != model.CheckOK || r.Outcome != rollouts.OutcomeMatch {
			t.Fatalf("honest row %s: %s, provenance %+v", r.TaskID, r.Outcome, r.Provenance)
		}
	}

	var swappedFrom, swappedTo int
	swapped := full(e.submitRows(t, "swapped", rev, false, nil, e.rows, func(rows []gate.Row) {
		c := rows[3].CompletionTokens
		swappedFrom, swappedTo = c[1], (c[1]+1)%256
		c[1] = swappedTo
	}))
	first := firstFailure(t, swapped)
	if swapped.Status != rollouts.StatusRejected || swapped.Reason != rollouts.ReasonProvenance || len(swapped.Audit.ProvenanceFailures) != 1 ||
		first.TaskID != e.loaded.Items[3].TaskID || first.Provenance.Outcome != model.CheckToken || first.Provenance.Position != 1 ||
		first.Provenance.ClaimedToken != swappedTo || first.Provenance.ExpectedToken != swappedFrom || first.Provenance.MarginMilli*1000 < fx.ReferenceSampling.EpsilonMicro {
		t.Errorf("swapped token: %s %s, failures %v, first %+v %+v", swapped.Status, swapped.Reason, swapped.Audit.ProvenanceFailures, first, first.Provenance)
	}
	found := false
	for _, d := range swapped.Details() {
		found = found || d.Label == "provenance" && strings.Contains(d.Value, fmt.Sprintf("token at completion position 1 (claimed %d, expected %d", swappedTo, swappedFrom))
	}
	if !found {
		t.Errorf("the verdict's details do not name the failing token: %+v", swapped.Details())
	}

	wrongPrompt := full(e.submitRows(t, "prompt", rev, false, nil, e.rows, func(rows []gate.Row) { rows[0].PromptTokens[2]++ }))
	if p := firstFailure(t, wrongPrompt).Provenance; wrongPrompt.Reason != rollouts.ReasonProvenance || p.Outcome != rollouts.CheckWrongPrompt || p.Position != 2 {
		t.Errorf("wrong prompt: %s, %+v", wrongPrompt.Reason, p)
	}

	textDir := filepath.Join(e.dir, "text")
	if err := fx.WriteSubmission(textDir, fx.Honest, e.g, []byte(fx.ReferenceMinerSeed)); err != nil {
		t.Fatal(err)
	}
	text := full(e.submitRows(t, "text-rows", rev, false, nil, filepath.Join(textDir, "rows.jsonl"), nil))
	if text.Reason != rollouts.ReasonProvenance || len(text.Audit.ProvenanceFailures) != len(e.loaded.Items) || firstFailure(t, text).Provenance.Outcome != rollouts.CheckNoTokens {
		t.Errorf("text rows: %s, %d failures", text.Reason, len(text.Audit.ProvenanceFailures))
	}

	// Rows generated with weights perturbed by 3 %, committed with the
	// original model.
	pm, err := model.Load(e.files.Config, e.files.Tokenizer, tinymodel.Perturb(e.files.Weights), model.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	perturbed := full(e.submitRows(t, "perturbed", rev, false, nil, e.generate(t, "perturbed-rows", pm), nil))
	if perturbed.Reason != rollouts.ReasonProvenance || len(perturbed.Audit.ProvenanceFailures) < len(e.loaded.Items)/2 {
		t.Errorf("perturbed weights: %s, %d of %d rows fail", perturbed.Reason, len(perturbed.Audit.ProvenanceFailures), len(e.loaded.Items))
	}
	t.Logf("rows from weights perturbed by 3 %%: %d of %d fail", len(perturbed.Audit.ProvenanceFailures), len(e.loaded.Items))

	// A token row in a task that takes text is not a row of that task.
	plain := newIndexedEnv(t)
	refs := plain.pack(t, "tokens-in-text-task", func(dir string) error {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		b, err := os.ReadFile(e.rows)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "rows.jsonl"), b, 0o644); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, gate.RolloutSubmissionFile), []byte(`{"model_revision":"`+rev+`","rows":"rows.jsonl"}`), 0o644)
	}, nil)
	if v := plain.decide(t, refs, true); v.Status != rollouts.StatusRejected || v.Audit.Rows[0].Outcome != rollouts.OutcomeMalformed {
		t.Errorf("token rows in a text task: %s, first row %s", v.Status, v.Audit.Rows[0].Outcome)
	}
}

// firstFailure is the first audited row that failed its provenance check.
func firstFailure(t *testing.T, v rollouts.Verdict) rollouts.AuditRow {
	t.Helper()
	for _, r := range v.Audit.Rows {
		if r.Outcome == rollouts.OutcomeProvenance {
			if r.Provenance == nil {
				t.Fatalf("row %s failed provenance without a record", r.TaskID)
			}
			return r
		}
	}
	t.Fatalf("no row failed provenance (%s %s)", v.Status, v.Reason)
	return rollouts.AuditRow{}
}
