package optimizer

import (
	"context"
	"fmt"
	"io/fs"
	"os"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/gate"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/sandbox"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// KindCheckpoint is the artifact kind of a checkpoint.
const KindCheckpoint = "checkpoint"

// Outcomes of an optimizer verdict that passed.
const (
	// OutcomeConfirmed: both runs cleared the bar; the worse is the candidate bar.
	OutcomeConfirmed = "confirmed"
	// OutcomeNotCleared: the first run did not clear the bar.
	OutcomeNotCleared = "not_cleared"
	// OutcomeConfirmFailed: the first run cleared, the worse of the two did not.
	OutcomeConfirmFailed = "confirm_failed"
	// outcomeUnconfirmed: a cleared first run without a confirm run; evaluate
	// never writes it, so a verdict that claims otherwise replays as differing.
	outcomeUnconfirmed = "unconfirmed"
)

// Verdict is the record a validator signs about one optimizer submission.
type Verdict struct {
	protocol.VerdictHead
	Detail     string           `json:"detail,omitempty"`
	Violations []gate.Violation `json:"violations,omitempty"`
	// BarMicroNats and FloorMicroNats are the bar in force and the least
	// improvement that clears it; HorizonSteps is the task's horizon.
	BarMicroNats   int64 `json:"bar_micro_nats"`
	FloorMicroNats int64 `json:"floor_micro_nats"`
	HorizonSteps   int   `json:"horizon_steps"`
	// Beacon is the round's beacon and Derivation the hex root derived from
	// it (DerivationV1), from which the run seeds and the held-out windows
	// follow; set when the reveal was accepted.
	Beacon     *rollouts.Beacon `json:"beacon,omitempty"`
	Derivation string           `json:"derivation,omitempty"`
	// Runs are the training runs, first run then confirm run.
	Runs []Run `json:"runs"`
	// Outcome is set when Status is passed.
	Outcome string `json:"outcome,omitempty"`
	// CandidateBarMicroNats is the worse loss of the two runs when confirmed.
	CandidateBarMicroNats int64 `json:"candidate_bar_micro_nats,omitempty"`
}

// Head returns the fields every protocol's verdict shares.
func (v Verdict) Head() protocol.VerdictHead { return v.VerdictHead }

// Details renders the runs for text output.
func (v Verdict) Details() []protocol.Detail {
	var out []protocol.Detail
	if v.Detail != "" {
		out = append(out, protocol.Detail{Label: "detail", Value: v.Detail})
	}
	if v.Beacon != nil {
		out = append(out, protocol.Detail{Label: "beacon", Value: beaconText(*v.Beacon)})
	}
	if v.Status != protocol.VerdictRejected || len(v.Runs) > 0 {
		out = append(out, protocol.Detail{Label: "bar", Value: fmt.Sprintf("%d micro-nats (floor %d)", v.BarMicroNats, v.FloorMicroNats)})
	}
	for _, r := range v.Runs {
		loss := "-"
		if r.HeldOutLossMicroNats != nil {
			loss = fmt.Sprintf("%d micro-nats", *r.HeldOutLossMicroNats)
		}
		out = append(out, protocol.Detail{Label: fmt.Sprintf("run %d", r.Index),
			Value: fmt.Sprintf("seed %d, %s, %d/%d steps%s, held-out loss %s, cleared %t", r.Seed, r.Status, r.Steps, v.HorizonSteps, cpuText(r), loss, r.Cleared)})
		if r.Checkpoint != "" {
			out = append(out, protocol.Detail{Label: fmt.Sprintf("run %d checkpoint", r.Index), Value: r.Checkpoint.String()})
		}
	}
	if v.Outcome != "" {
		out = append(out, protocol.Detail{Label: "outcome", Value: v.Outcome})
	}
	if v.CandidateBarMicroNats != 0 {
		out = append(out, protocol.Detail{Label: "candidate bar", Value: fmt.Sprintf("%d micro-nats", v.CandidateBarMicroNats)})
	}
	for _, vi := range v.Violations {
		out = append(out, protocol.Detail{Label: "violation", Value: vi.String()})
	}
	return out
}

// Run is one training run and its held-out loss.
type Run struct {
	Index  int    `json:"index"`
	Seed   int64  `json:"seed"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Steps is the number of optimizer steps the budget allowed, at most the
	// horizon; replay --retrain re-runs exactly this many. Stop says why a
	// completed run stopped: StopHorizon when Steps is the horizon, else
	// StopBudget. CPUMillis is the CPU time the run used (the training
	// loop's, as the trainer measured it; a run the backstop ended: the
	// process's, as the sandbox measured it), 0 and omitted when the run did
	// not get that far. Steps and CPUMillis are the validator's measurements.
	Steps     int    `json:"steps"`
	Stop      string `json:"stop,omitempty"`
	CPUMillis int64  `json:"cpu_millis,omitempty"`
	// Checkpoint is the signed checkpoint artifact, CheckpointContent the
	// SHA-256 of its safetensors bytes.
	Checkpoint        digest.Digest `json:"checkpoint,omitempty"`
	CheckpointContent digest.Digest `json:"checkpoint_content,omitempty"`
	// HeldOutLossMicroNats is the held-out loss computed from the checkpoint.
	HeldOutLossMicroNats *int64 `json:"held_out_loss_micro_nats,omitempty"`
	// Cleared reports bar - loss >= floor.
	Cleared bool `json:"cleared"`
}

// CheckpointRecord is the record of a checkpoint artifact; its subject is the
// submission and its one payload the safetensors file.
type CheckpointRecord struct {
	Task       digest.Digest  `json:"task"`
	Submission digest.Digest  `json:"submission"`
	Run        int            `json:"run"`
	Seed       int64          `json:"seed"`
	Steps      int            `json:"steps"`
	Content    bundle.Content `json:"content"`
}

// Params are the validator's choices for one evaluation.
type Params struct {
	// BarMicroNats is the bar in force; 0 takes the task's baseline.
	BarMicroNats int64
	// FloorMicroNats is the frontier floor; 0 takes the default rules'.
	FloorMicroNats int64
	// Machine runs the task's programs.
	Machine Machine
	// Beacon is the round's beacon, resolved by Prepare.
	Beacon rollouts.Beacon
}

// Prepare checks the validator's beacon against the round (a drand beacon
// must be the round's first after commits closed, and verify) before an
// accepted reveal is evaluated; without a beacon it fails with ErrNoBeacon.
func Prepare(p Params, c Case, round protocol.Round) (Params, error) {
	if c.Entry.Status != protocol.StatusAccepted || c.Entry.RevealSeen == nil {
		return p, nil
	}
	if p.Beacon.Drand == nil && (p.Beacon.Source == "" || p.Beacon.Value == "") {
		return p, ErrNoBeacon
	}
	b, err := rollouts.ResolveBeacon(p.Beacon, round, *c.Entry.RevealSeen)
	if err != nil {
		return p, err
	}
	p.Beacon = b
	return p, nil
}

// cpuText is a run's CPU time for text output.
func cpuText(r Run) string {
	switch {
	case r.Stop == StopBudget:
		return fmt.Sprintf(" (budget reached after %d CPU ms)", r.CPUMillis)
	case r.CPUMillis > 0:
		return fmt.Sprintf(" in %d CPU ms", r.CPUMillis)
	}
	return ""
}

// beaconText is a beacon for text output.
func beaconText(b rollouts.Beacon) string {
	if b.Verified {
		return b.Source + " (verified)"
	}
	return b.Source + " (unverified)"
}

// stopOf is why a completed run of steps steps stopped.
func stopOf(steps int, spec Spec) string {
	if steps == spec.Training.HorizonSteps {
		return StopHorizon
	}
	return StopBudget
}

// Case is one evaluation (protocol.Case).
type Case = protocol.Case

// workspace is a case's task and submission, on disk for the sandbox.
type workspace struct {
	spec Spec
	// taskDir is the whole task (for the held-out evaluation); trainDir the
	// task without the held-out pool and program, so that held-out data
	// never enters the process that runs miner code.
	taskDir, trainDir, subDir string
	// derived are the round's seeds and held-out windows.
	derived Derived
}

func (w *workspace) close() {
	for _, d := range []string{w.taskDir, w.trainDir, w.subDir} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
}

func openWorkspace(ctx context.Context, c Case, withSubmission bool) (*workspace, error) {
	taskFS, err := protocol.LoadTaskFS(ctx, c.Store, c.Refs.Task)
	if err != nil {
		return nil, err
	}
	w := &workspace{}
	if w.spec, err = LoadTask(taskFS); err != nil {
		return nil, err
	}
	if w.taskDir, err = sandbox.Materialize(taskFS); err != nil {
		return nil, err
	}
	if withSubmission {
		if w.trainDir, err = sandbox.Materialize(without(taskFS, w.spec.Data.HeldOutPool, w.spec.Entry.HeldOut)); err != nil {
			w.close()
			return nil, err
		}
		art, err := bundle.Load(ctx, c.Store, c.Refs.Submission)
		if err != nil {
			w.close()
			return nil, err
		}
		files, err := bundle.LoadTree(ctx, c.Store, art, bundle.Limits{MaxFiles: 16, MaxBytes: 1 << 20, MaxFile: 1 << 20})
		if err != nil {
			w.close()
			return nil, err
		}
		sub := bundle.TreeFS(files)
		if _, err := fs.Stat(sub, gate.OptimizerFile); err != nil {
			w.close()
			return nil, fmt.Errorf("submission %s has no %s", c.Refs.Submission.Digest, gate.OptimizerFile)
		}
		if w.subDir, err = sandbox.Materialize(sub); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

// without hides the named top-level files of a tree.
func without(fsys fs.FS, names ...string) fs.FS {
	return hiddenFS{fsys, names}
}

type hiddenFS struct {
	fs.FS
	hidden []string
}

func (h hiddenFS) Open(name string) (fs.File, error) {
	for _, n := range h.hidden {
		if name == n {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
	}
	return h.FS.Open(name)
}

func (h hiddenFS) ReadDir(name string) ([]fs.DirEntry, error) {
	es, err := fs.ReadDir(h.FS, name)
	if err != nil || name != "." {
		return es, err
	}
	out := es[:0:0]
	for _, e := range es {
		hide := false
		for _, n := range h.hidden {
			hide = hide || e.Name() == n
		}
		if !hide {
			out = append(out, e)
		}
	}
	return out, nil
}

func (p Params) start(c Case, spec Spec) Verdict {
	v := Verdict{VerdictHead: protocol.NewVerdictHead("optimizer", c.Refs, c.Entry, c.Sequence), Runs: []Run{},
		BarMicroNats: p.BarMicroNats, FloorMicroNats: p.FloorMicroNats, HorizonSteps: spec.Training.HorizonSteps}
	if v.BarMicroNats == 0 {
		v.BarMicroNats = spec.BaselineMicroNats
	}
	if v.FloorMicroNats == 0 {
		v.FloorMicroNats = scoring.DefaultRules().Frontier.FloorMicroNats
	}
	return v
}

// Decide evaluates one reveal whose checks gave c.Entry with the beacon that
// Prepare resolved: it derives the round's seeds and held-out windows, trains
// with the first seed, validates and signs the checkpoint, computes the
// held-out loss, and when the run clears the bar trains again with the second
// seed. The same inputs give the same verdict up to what the clock allowed
// (the steps completed), which the verdict records.
func Decide(ctx context.Context, c Case, p Params) (Verdict, error) {
	if c.Entry.Status != protocol.StatusAccepted {
		v := Verdict{VerdictHead: protocol.NewVerdictHead("optimizer", c.Refs, c.Entry, c.Sequence), Runs: []Run{}}
		v.Status, v.Reason, v.Violations = protocol.VerdictRejected, c.Entry.Reason, c.Entry.Violations
		return v, nil
	}
	w, err := openWorkspace(ctx, c, true)
	if err != nil {
		return Verdict{}, err
	}
	defer w.close()
	if w.derived, err = Derive(p.Beacon, w.spec); err != nil {
		return Verdict{}, err
	}
	v := p.start(c, w.spec)
	b := p.Beacon
	v.Beacon, v.Derivation = &b, w.derived.RootHex()
	steps := cas.StepsFrom(ctx)
	steps.Begin("run", 2)
	for i := 0; i < 2; i++ {
		run, err := p.train(ctx, c, w, i)
		if err != nil {
			return Verdict{}, err
		}
		steps.Step("run")
		v.Runs = append(v.Runs, run)
		if run.Status != RunCompleted || !v.clears(run) {
			break
		}
	}
	settle(&v)
	return v, nil
}

// train makes run i: training, checkpoint validation and signing, held-out loss.
func (p Params) train(ctx context.Context, c Case, w *workspace, i int) (Run, error) {
	r := Run{Index: i, Seed: w.derived.Seeds[i]}
	t, err := p.Machine.Train(ctx, w.spec, w.trainDir, w.subDir, r.Seed, 0)
	if err != nil {
		return r, err
	}
	r.Status, r.Detail, r.Steps, r.CPUMillis = t.Status, t.Detail, t.Steps, t.CPUMillis
	if t.Status != RunCompleted {
		return r, nil
	}
	r.CheckpointContent = digest.FromBytes(t.Checkpoint)
	if _, err := ValidateCheckpoint(t.Checkpoint, w.spec.Model.Tensors, w.spec.CheckpointBytes()); err != nil {
		r.Status, r.Detail = RunBadCheckpoint, err.Error()
		if ce, ok := err.(*CheckpointError); ok && ce.Problem == "non-finite" {
			r.Status = RunDiverged
		}
		return r, nil
	}
	r.Stop = stopOf(r.Steps, w.spec)
	rec := CheckpointRecord{Task: c.Refs.Task, Submission: c.Refs.Submission.Digest, Run: i, Seed: r.Seed, Steps: r.Steps,
		Content: bundle.Content{Type: "file", Name: CheckpointFile, Digest: r.CheckpointContent, Size: int64(len(t.Checkpoint))}}
	layer, err := bundle.PushData(ctx, c.Store, CheckpointFile, t.Checkpoint)
	if err != nil {
		return r, err
	}
	subject := c.Refs.Submission
	desc, err := bundle.WriteSigned(ctx, c.Store, c.Signer, bundle.Artifact{Kind: KindCheckpoint, Record: rec,
		Layers: []ocispec.Descriptor{layer}, Subject: &subject, Created: c.Created})
	if err != nil {
		return r, err
	}
	r.Checkpoint = desc.Digest
	return p.heldOut(ctx, w, r, t.Checkpoint)
}

func (p Params) heldOut(ctx context.Context, w *workspace, r Run, checkpoint []byte) (Run, error) {
	h, err := p.Machine.Evaluate(ctx, w.spec, w.taskDir, checkpoint, w.derived.WindowsBytes())
	if err != nil {
		return r, err
	}
	if h.Status != RunCompleted {
		r.Status, r.Detail = h.Status, h.Detail
		return r, nil
	}
	loss := h.LossMicroNats
	r.HeldOutLossMicroNats = &loss
	return r, nil
}

// clears reports whether a run's held-out loss clears the verdict's bar.
func (v *Verdict) clears(r Run) bool {
	return r.HeldOutLossMicroNats != nil && v.BarMicroNats-*r.HeldOutLossMicroNats >= v.FloorMicroNats
}

// settle sets the cleared flags, the status, the reason and the outcome from
// the runs.
func settle(v *Verdict) {
	var losses []int64
	for i := range v.Runs {
		r := &v.Runs[i]
		r.Cleared = v.clears(*r)
		if r.Status == RunCompleted && r.HeldOutLossMicroNats == nil {
			r.Status, r.Detail = RunBadResult, "no held-out loss"
		}
		if r.Status != RunCompleted {
			v.Status, v.Reason, v.Detail = protocol.VerdictRejected, r.Status, fmt.Sprintf("run %d: %s", r.Index, r.Detail)
			if r.Status == RunInfra {
				v.Status = protocol.VerdictInfraError
			}
			v.Outcome, v.CandidateBarMicroNats = "", 0
			return
		}
		losses = append(losses, *r.HeldOutLossMicroNats)
	}
	v.Status, v.Reason, v.Detail = protocol.VerdictPassed, "", ""
	switch {
	case len(v.Runs) == 0:
		v.Status, v.Reason = protocol.VerdictInfraError, "no_runs"
	case !v.Runs[0].Cleared:
		v.Outcome = OutcomeNotCleared
	case len(v.Runs) == 1:
		v.Outcome = outcomeUnconfirmed
	default:
		worse := max(losses[0], losses[1])
		if v.BarMicroNats-worse >= v.FloorMicroNats {
			v.Outcome, v.CandidateBarMicroNats = OutcomeConfirmed, worse
		} else {
			v.Outcome = OutcomeConfirmFailed
		}
	}
}
