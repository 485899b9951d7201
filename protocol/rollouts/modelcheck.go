package rollouts

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/model"
	"github.com/feval/feval/protocol"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// ReasonModel: in a task that binds rows to a model, the committed model is
// refused (ModelCheck.Detail says why).
const ReasonModel = "model_refused"

// Statuses of a ModelCheck.
const (
	ModelAccepted = "accepted"
	ModelRefused  = "refused"
)

// ModelCheck is a verdict's record of the committed model: the
// model_revision the submission names, whether the model was accepted and,
// if not, why. Every field is a function of the submission and the model's
// bytes, so replay regenerates it.
type ModelCheck struct {
	Revision string `json:"revision"`
	Status   string `json:"status"`
	Detail   string `json:"detail,omitempty"`
}

// checkModel checks the model a submission commits for a task that binds
// rows to one: model_revision (revision) must be the sha256 digest of a
// model artifact, the submission's manifest must carry that artifact as its
// subject (so the submission's digest, which the commitment binds, binds the
// model), the model must load within the task's limits (model.LoadArtifact:
// safetensors only, the header checked before any tensor is read), and its
// tokenizer.json must be the task's. A refusal is a ModelCheck with status
// ModelRefused and a nil model; an error is the store's (the model is
// collected with the submission, so a missing blob is the validator's).
func checkModel(ctx context.Context, st cas.Store, subj *ocispec.Descriptor, revision string, spec *ModelSpec) (ModelCheck, *model.Model, error) {
	mc := ModelCheck{Revision: revision, Status: ModelRefused}
	refuse := func(format string, a ...any) (ModelCheck, *model.Model, error) {
		mc.Detail = fmt.Sprintf(format, a...)
		return mc, nil, nil
	}
	if !strings.HasPrefix(revision, "sha256:") {
		return refuse("model_revision %s is a git commit: this task needs the sha256 digest of a model artifact committed with the submission", revision)
	}
	if subj == nil || subj.Digest.String() != revision {
		return refuse("the submission does not carry model %s as its subject: pack the model into the store before committing (feval pack --model)", revision)
	}
	return checkModelArtifact(ctx, st, *subj, revision, spec)
}

// checkModelArtifact is checkModel's check of the model artifact itself.
func checkModelArtifact(ctx context.Context, st cas.Store, desc ocispec.Descriptor, revision string, spec *ModelSpec) (ModelCheck, *model.Model, error) {
	mc := ModelCheck{Revision: revision, Status: ModelRefused}
	m, err := model.LoadArtifact(ctx, st, desc, spec.Limits())
	var ck *model.Checked
	if err == nil {
		ck = &m.Checked
	}
	if mc.Detail, err = refusal(ck, err, spec); err != nil {
		return mc, nil, fmt.Errorf("reading model %s: %w", revision, err)
	}
	if mc.Detail != "" {
		return mc, nil, nil
	}
	mc.Status = ModelAccepted
	return mc, m, nil
}

// refusal is why a model read as ck (with the reader's error err) is refused
// for a task of spec, or "" when it is not; an error that is not a refusal
// (model.ErrModel) is the store's, returned as it is.
func refusal(ck *model.Checked, err error, spec *ModelSpec) (string, error) {
	switch {
	case errors.Is(err, model.ErrModel):
		return strings.TrimPrefix(err.Error(), model.ErrModel.Error()+": "), nil
	case err != nil:
		return "", err
	case ck.TokenizerDigest != spec.Tokenizer:
		return fmt.Sprintf("tokenizer.json is %s; the task's prompts are encoded with %s", ck.TokenizerDigest, spec.Tokenizer), nil
	}
	return "", nil
}

// ErrModelRefused reports, before a commit, a model that validators would
// refuse (PreCheckModel).
var ErrModelRefused = errors.New("model refused")

// PreCheckModel is what feval commit runs before packing a submission
// directory for a round: when the round's task binds rows to a model, the
// model_revision of dir's submission.json must name a model artifact in l,
// and checkModel must accept it. A refusal wraps ErrModelRefused: nothing is
// committed that every validator would reject.
func PreCheckModel(ctx context.Context, l *cas.Layout, round ocispec.Descriptor, dir string) error {
	var r protocol.Round
	if _, err := protocol.LoadAs(ctx, l, round, protocol.KindRound, &r); err != nil {
		return fmt.Errorf("reading round: %w", err)
	}
	if r.Protocol != "rollouts" {
		return nil
	}
	tfs, err := protocol.LoadTaskFS(ctx, l, r.Task)
	if err != nil {
		return err
	}
	task, err := LoadTask(tfs)
	if err != nil || task.Spec.Model == nil {
		return err
	}
	subj, revision, err := protocol.ModelSubject(ctx, l, dir)
	if err != nil {
		return fmt.Errorf("%w: %w; nothing was committed", ErrModelRefused, err)
	}
	if subj == nil {
		return fmt.Errorf("%w: this task binds rows to a model, and model_revision %q is not a model artifact in this store: pack the model first (feval pack --model --kind model DIR) and name its digest; nothing was committed",
			ErrModelRefused, revision)
	}
	mc, _, err := checkModelArtifact(ctx, l, *subj, revision, task.Spec.Model)
	if err != nil {
		return err
	}
	if mc.Status != ModelAccepted {
		return fmt.Errorf("%w: %s: %s; nothing was committed", ErrModelRefused, revision, mc.Detail)
	}
	return nil
}
