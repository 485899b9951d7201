// Package optimizer is the protocol driver for optimizer research at a fixed
// compute budget (competition kind C): the task holds the model, the data, the
// training loop, the horizon, the budget and the seeds; the miner's
// optimizer.py holds the update rule and its schedule. A validator trains the
// task's model with the miner's optimizer in the sandbox, validates the
// checkpoint the trainer wrote (safetensors, checked in Go before anything
// reads it), stores it as a signed checkpoint artifact, and has the held-out
// loss computed by a second sandboxed process that holds only the task's code
// and the checkpoint. A run that clears the bar is confirmed by a second run
// with the task's next seed; the worse of the two is the candidate bar.
// docs/OPTIMIZER.md specifies the task, the interface and the verdict.
package optimizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
)

// TaskFile is the optimizer task's parameter file.
const TaskFile = "task.json"

// ErrTask reports a task directory that does not have the optimizer form.
var ErrTask = errors.New("malformed optimizer task")

// Spec is task.json.
type Spec struct {
	Protocol          string         `json:"protocol"`
	Model             ModelSpec      `json:"model"`
	Data              DataSpec       `json:"data"`
	Training          TrainingSpec   `json:"training"`
	Evaluation        EvaluationSpec `json:"evaluation"`
	Seeds             []int64        `json:"seeds"`
	BaselineMicroNats int64          `json:"baseline_micro_nats"`
	Entry             EntrySpec      `json:"entry"`
}

// ModelSpec describes the task's model; Tensors is what a checkpoint must hold.
type ModelSpec struct {
	Kind    string       `json:"kind"`
	Context int          `json:"context"`
	Embed   int          `json:"embed"`
	Hidden  int          `json:"hidden"`
	Tensors []TensorSpec `json:"tensors"`
}

// DataSpec names the data files inside the task.
type DataSpec struct {
	Train   string `json:"train"`
	HeldOut string `json:"held_out"`
}

// TrainingSpec is the schedule horizon, the compute budget and the batch.
type TrainingSpec struct {
	HorizonSteps    int   `json:"horizon_steps"`
	BudgetCPUMillis int64 `json:"budget_cpu_millis"`
	BatchSize       int   `json:"batch_size"`
}

// EvaluationSpec is the held-out evaluation's batch size.
type EvaluationSpec struct {
	BatchSize int `json:"batch_size"`
}

// EntrySpec names the task's training and held-out programs.
type EntrySpec struct {
	Train   string `json:"train"`
	HeldOut string `json:"held_out"`
}

// MaxTaskFile bounds task.json.
const MaxTaskFile = 64 << 10

// LoadTask reads and checks task.json from a task tree: every field present
// and in range, the named files present.
func LoadTask(fsys fs.FS) (Spec, error) {
	var s Spec
	f, err := fsys.Open(TaskFile)
	if err != nil {
		return s, fmt.Errorf("%w: %v", ErrTask, err)
	}
	defer f.Close()
	b := make([]byte, MaxTaskFile+1)
	n, _ := readFull(f, b)
	if n > MaxTaskFile {
		return s, fmt.Errorf("%w: task.json exceeds %d bytes", ErrTask, MaxTaskFile)
	}
	dec := json.NewDecoder(bytes.NewReader(b[:n]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("%w: task.json: %v", ErrTask, err)
	}
	bad := func(what string) error { return fmt.Errorf("%w: task.json: %s", ErrTask, what) }
	switch {
	case s.Protocol != "optimizer":
		return s, bad(`protocol must be "optimizer"`)
	case s.Model.Kind != "byte-mlp" || s.Model.Context <= 0 || s.Model.Embed <= 0 || s.Model.Hidden <= 0:
		return s, bad("model must be a byte-mlp with positive context, embed and hidden")
	case len(s.Model.Tensors) == 0:
		return s, bad("model.tensors is empty")
	case s.Training.HorizonSteps <= 0 || s.Training.HorizonSteps > 1_000_000:
		return s, bad("training.horizon_steps must be in [1, 1000000]")
	case s.Training.BudgetCPUMillis <= 0 || s.Training.BudgetCPUMillis > 24*3600*1000:
		return s, bad("training.budget_cpu_millis must be in [1, 86400000]")
	case s.Training.BatchSize <= 0 || s.Evaluation.BatchSize <= 0:
		return s, bad("batch sizes must be positive")
	case len(s.Seeds) < 2:
		return s, bad("seeds must list at least two seeds (a run and its confirm run)")
	case s.BaselineMicroNats <= 0:
		return s, bad("baseline_micro_nats must be positive")
	}
	for _, sd := range s.Seeds {
		if sd < 0 || sd >= 1<<53 {
			return s, bad("seeds must be integers in [0, 2^53)")
		}
	}
	for _, t := range s.Model.Tensors {
		if t.DType != "F32" || t.Name == "" || len(t.Shape) == 0 || len(t.Shape) > maxRank {
			return s, bad(fmt.Sprintf("tensor %q must be F32 with rank 1 to %d", t.Name, maxRank))
		}
		for _, d := range t.Shape {
			if d <= 0 || d > 1<<20 {
				return s, bad(fmt.Sprintf("tensor %q has a dimension outside [1, 2^20]", t.Name))
			}
		}
	}
	for _, name := range []string{s.Data.Train, s.Data.HeldOut, s.Entry.Train, s.Entry.HeldOut} {
		if name == "" || !fs.ValidPath(name) || path.Dir(name) != "." {
			return s, bad(fmt.Sprintf("file name %q must be a plain file name", name))
		}
		if _, err := fs.Stat(fsys, name); err != nil {
			return s, bad(fmt.Sprintf("%s is missing", name))
		}
	}
	return s, nil
}

// CheckpointBytes is the exact size of a checkpoint of the task's model, upper
// bound of what a validator accepts: the data plus a header of at most
// MaxHeaderBytes.
func (s Spec) CheckpointBytes() int64 {
	var n int64 = 8 + MaxHeaderBytes
	for _, t := range s.Model.Tensors {
		e := int64(4)
		for _, d := range t.Shape {
			e *= d
		}
		n += e
	}
	return n
}

func readFull(f fs.File, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := f.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
