package optimizer

import (
	"context"
	"errors"
	"fmt"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
)

// ErrCheckpointRecord reports a checkpoint artifact that is not about the run
// a verdict names.
var ErrCheckpointRecord = errors.New("checkpoint artifact does not match the verdict")

// Finding is a difference replay found outside the verdict record.
type Finding = protocol.Finding

// ReplayOptions say how much of a verdict to re-derive.
type ReplayOptions struct {
	// Retrain re-runs each recorded training run for its recorded number of
	// steps and compares the checkpoint bit for bit. It runs the submission's
	// code (in the sandbox).
	Retrain bool
	Machine Machine
	// Beacon is the recorded verdict's beacon, checked against the round
	// again (a drand one verified) by the caller.
	Beacon rollouts.Beacon
}

// Evidence lists the checkpoint artifacts a verdict names.
func Evidence(v Verdict) []digest.Digest {
	var out []digest.Digest
	for _, r := range v.Runs {
		if r.Checkpoint != "" {
			out = append(out, r.Checkpoint)
		}
	}
	return out
}

// Redecide re-derives a recorded verdict: the reveal check (c.Entry, done by
// the caller), the seeds and held-out windows from the recorded beacon
// (opts.Beacon), and for every recorded checkpoint its
// validation and held-out loss in a fresh sandbox that never holds the
// submission; the steps of training are the validator's observations and
// are taken as recorded. A failed run has nothing to re-derive without
// running the submission: it is reported as unchecked. With opts.Retrain
// every completed run is trained again for its recorded steps and its
// checkpoint compared, and every failed run is run again and its outcome
// compared (rerun).
func Redecide(ctx context.Context, c Case, recorded Verdict, opts ReplayOptions) (Verdict, []Finding, error) {
	if c.Entry.Status != protocol.StatusAccepted {
		v, err := Decide(ctx, c, Params{})
		return v, nil, err
	}
	w, err := openWorkspace(ctx, c, opts.Retrain)
	if err != nil {
		return Verdict{}, nil, err
	}
	defer w.close()
	if w.derived, err = Derive(opts.Beacon, w.spec); err != nil {
		return Verdict{}, nil, err
	}
	p := Params{BarMicroNats: recorded.BarMicroNats, FloorMicroNats: recorded.FloorMicroNats, Machine: opts.Machine, Beacon: opts.Beacon}
	v := p.start(c, w.spec)
	b := opts.Beacon
	v.Beacon, v.Derivation = &b, w.derived.RootHex()
	var findings []Finding
	steps := cas.StepsFrom(ctx)
	runs := min(len(recorded.Runs), 2)
	steps.Begin("run", runs)
	for i, rr := range recorded.Runs {
		if i >= 2 {
			break
		}
		if i > 0 {
			steps.Step("run")
		}
		r := Run{Index: i, Seed: w.derived.Seeds[i], Status: rr.Status, Detail: rr.Detail, Steps: rr.Steps,
			CPUMillis: rr.CPUMillis, CheckpointContent: rr.CheckpointContent}
		if rr.Checkpoint == "" {
			v.Runs = append(v.Runs, r)
			f, err := checkFailed(ctx, opts, w, r)
			if err != nil {
				return Verdict{}, nil, err
			}
			findings = append(findings, f)
			continue
		}
		ck, rec, err := loadCheckpoint(ctx, c, w.spec, rr.Checkpoint)
		if err != nil {
			return Verdict{}, nil, err
		}
		if rec.Run != i {
			return Verdict{}, nil, fmt.Errorf("%w: %s is run %d, the verdict names it for run %d", ErrCheckpointRecord, rr.Checkpoint, rec.Run, i)
		}
		if rec.Seed != r.Seed {
			// The checkpoint was trained with a seed that the recorded beacon
			// does not give: its loss says nothing about this derivation.
			findings = append(findings, Finding{Path: fmt.Sprintf("runs[%d].seed", i), Recorded: fmt.Sprint(rec.Seed),
				Recomputed: fmt.Sprintf("%d (derived from the recorded beacon)", r.Seed)})
			r.Checkpoint, r.Status, r.Detail = rr.Checkpoint, RunBadCheckpoint, "the checkpoint was trained with another seed"
			v.Runs = append(v.Runs, r)
			continue
		}
		r.Steps, r.Checkpoint, r.CheckpointContent, r.Status, r.Detail = rec.Steps, rr.Checkpoint, digest.FromBytes(ck), RunCompleted, ""
		if _, err := ValidateCheckpoint(ck, w.spec.Model.Tensors, w.spec.CheckpointBytes()); err != nil {
			r.Status, r.Detail = RunBadCheckpoint, err.Error()
			v.Runs = append(v.Runs, r)
			continue
		}
		r.Stop = stopOf(r.Steps, w.spec)
		if r, err = p.heldOut(ctx, w, r, ck); err != nil {
			return Verdict{}, nil, err
		}
		v.Runs = append(v.Runs, r)
		if opts.Retrain {
			f, err := retrain(ctx, opts.Machine, w, r, ck)
			if err != nil {
				return Verdict{}, nil, err
			}
			findings = append(findings, f...)
		}
	}
	if runs > 0 {
		steps.Step("run")
	}
	settle(&v)
	return v, findings, nil
}

func loadCheckpoint(ctx context.Context, c Case, spec Spec, d digest.Digest) ([]byte, CheckpointRecord, error) {
	var rec CheckpointRecord
	desc, err := c.Store.Resolve(ctx, d.String())
	if err != nil {
		return nil, rec, fmt.Errorf("checkpoint %s: %w", d, err)
	}
	art, err := protocol.LoadAs(ctx, c.Store, desc, KindCheckpoint, &rec)
	if err != nil {
		return nil, rec, fmt.Errorf("checkpoint %s: %w", d, err)
	}
	if rec.Task != c.Refs.Task || rec.Submission != c.Refs.Submission.Digest || len(art.Payloads) != 1 ||
		art.Manifest.Subject == nil || art.Manifest.Subject.Digest != c.Refs.Submission.Digest {
		return nil, rec, fmt.Errorf("%w: %s is about another task or submission", ErrCheckpointRecord, d)
	}
	b, err := bundle.ReadPayload(ctx, c.Store, art.Payloads[0], spec.CheckpointBytes())
	if err != nil {
		return nil, rec, fmt.Errorf("checkpoint %s: %w", d, err)
	}
	if digest.FromBytes(b) != rec.Content.Digest {
		return nil, rec, fmt.Errorf("%w: %s payload differs from its record", ErrCheckpointRecord, d)
	}
	return b, rec, nil
}

// retrain trains run r again for its recorded steps and compares checkpoints.
func retrain(ctx context.Context, m Machine, w *workspace, r Run, recorded []byte) ([]Finding, error) {
	path := fmt.Sprintf("runs[%d].checkpoint_content", r.Index)
	t, err := m.Train(ctx, w.spec, w.trainDir, w.subDir, r.Seed, r.Steps)
	if err != nil {
		return nil, err
	}
	if t.Status != RunCompleted {
		return []Finding{{Path: path, Recorded: r.CheckpointContent.String(), Recomputed: "retraining " + t.Status + ": " + t.Detail}}, nil
	}
	got := digest.FromBytes(t.Checkpoint)
	if got == r.CheckpointContent {
		return []Finding{{Path: path, Recorded: r.CheckpointContent.String(), Recomputed: got.String() + " (bitwise equal)", Equal: true}}, nil
	}
	tensor, elem, _, err := FirstDifference(recorded, t.Checkpoint)
	if err != nil {
		return []Finding{{Path: path, Recorded: r.CheckpointContent.String(), Recomputed: got.String() + " (" + err.Error() + ")"}}, nil
	}
	return []Finding{{Path: path, Recorded: r.CheckpointContent.String(),
		Recomputed: fmt.Sprintf("%s (first difference: tensor %s, element %d)", got, tensor, elem)}}, nil
}

// replayedClasses are the failures a re-run reproduces exactly, step for
// step: the submission's code raised, diverged or left a hook. Re-running
// the recorded steps plus the failing one shows them again on any machine,
// whatever its budget allows. Every other failure (over the budget, out of
// memory, past a sandbox limit, a result or checkpoint the trainer could not
// have written) is re-run as it first ran, under the budget, and compared by
// status alone.
var replayedClasses = map[string]bool{RunCrashed: true, RunDiverged: true, RunForbiddenHook: true}

// checkFailed reports what replay knows of a failed run r (recorded with no
// checkpoint). Without opts.Retrain it is unchecked. The validator's own
// failure (infra_error) is unchecked either way: another machine running it
// fine says nothing about the validator's. Otherwise the run is trained
// again and its outcome compared: a claimed crash that does not crash
// differs.
func checkFailed(ctx context.Context, opts ReplayOptions, w *workspace, r Run) (Finding, error) {
	path := fmt.Sprintf("runs[%d].status", r.Index)
	recorded := outcomeText(r.Status, r.Steps, r.Detail)
	switch {
	case r.Status == RunInfra:
		return Finding{Path: path, Recorded: recorded, Recomputed: "not re-run: the validator's own failure", Unchecked: true}, nil
	case !opts.Retrain:
		return Finding{Path: path, Recorded: recorded, Recomputed: "not re-run (replay --retrain runs it again)", Unchecked: true}, nil
	}
	steps := 0
	if replayedClasses[r.Status] {
		steps = min(r.Steps+1, w.spec.Training.HorizonSteps)
	}
	t, err := opts.Machine.Train(ctx, w.spec, w.trainDir, w.subDir, r.Seed, steps)
	if err != nil {
		return Finding{}, err
	}
	if t.Status == RunInfra {
		return Finding{Path: path, Recorded: recorded, Recomputed: "could not re-run here: " + t.Detail, Unchecked: true}, nil
	}
	got := outcomeText(t.Status, t.Steps, t.Detail)
	same := t.Status == r.Status
	if replayedClasses[r.Status] {
		same = same && t.Steps == r.Steps && t.Detail == r.Detail
	} else {
		recorded, got = r.Status, t.Status
	}
	if same {
		return Finding{Path: path, Recorded: recorded, Recomputed: got + " (re-run: the same outcome)", Equal: true}, nil
	}
	return Finding{Path: path, Recorded: recorded, Recomputed: got}, nil
}

// outcomeText renders a run's outcome for a finding.
func outcomeText(status string, steps int, detail string) string {
	s := fmt.Sprintf("%s after %d steps", status, steps)
	if detail != "" {
		s += " (" + detail + ")"
	}
	return s
}

// Parse decodes an optimizer verdict record.
func Parse(l *bundle.Loaded) (Verdict, error) {
	var v Verdict
	if err := l.Decode(&v); err != nil {
		return v, fmt.Errorf("%w: %v", protocol.ErrMalformed, err)
	}
	return v, nil
}
