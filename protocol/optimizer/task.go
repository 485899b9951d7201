// Package optimizer is the protocol driver for optimizer research at a fixed
// compute budget (competition kind C): the task holds the model, the training
// data, the held-out pool, the training loop, the horizon and the budget; the
// round's beacon gives the run seeds and the held-out windows; the miner's
// optimizer.py holds the update rule and its schedule. A validator trains the
// task's model with the miner's optimizer in the sandbox, validates the
// checkpoint the trainer wrote (safetensors, checked in Go before anything
// reads it), stores it as a signed checkpoint artifact, and has the held-out
// loss computed by a second sandboxed process that holds only the task's code
// and the checkpoint. A run that clears the bar is confirmed by a second run
// with the round's second seed; the worse of the two is the candidate bar.
// docs/OPTIMIZER.md specifies the task, the interface and the verdict.
package optimizer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
)

// TaskFile is the optimizer task's parameter file.
const TaskFile = "task.json"

// ErrTask reports a task directory that does not have the optimizer form.
var ErrTask = errors.New("malformed optimizer task")

// Spec is task.json.
type Spec struct {
	Protocol   string         `json:"protocol"`
	Model      ModelSpec      `json:"model"`
	Data       DataSpec       `json:"data"`
	Training   TrainingSpec   `json:"training"`
	Evaluation EvaluationSpec `json:"evaluation"`
	// Derivation names how the round's beacon gives the run seeds and the
	// held-out windows (DerivationV1).
	Derivation        string    `json:"derivation"`
	BaselineMicroNats int64     `json:"baseline_micro_nats"`
	Entry             EntrySpec `json:"entry"`
}

// ModelSpec describes the task's model; Tensors is what a checkpoint must hold.
type ModelSpec struct {
	Kind    string       `json:"kind"`
	Context int          `json:"context"`
	Embed   int          `json:"embed"`
	Hidden  int          `json:"hidden"`
	Tensors []TensorSpec `json:"tensors"`
}

// DataSpec names the data files inside the task. The held-out pool is pinned
// by its size and SHA-256; each round evaluates HeldOutWindows windows of it
// that the round's beacon selects.
type DataSpec struct {
	Train             string `json:"train"`
	HeldOutPool       string `json:"held_out_pool"`
	HeldOutPoolBytes  int64  `json:"held_out_pool_bytes"`
	HeldOutPoolSHA256 string `json:"held_out_pool_sha256"`
	HeldOutWindows    int    `json:"held_out_windows"`
}

// Bounds of the held-out pool and windows. The smallest pool is 64 times the
// largest optimizer.py the gate accepts, and a thousand times the literal
// data it may hold, so no submission carries a useful part of it.
const (
	MinPoolBytes      = 4 << 20
	MaxPoolBytes      = 64 << 20
	MaxHeldOutWindows = 1 << 20
)

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
	case s.Derivation != DerivationV1:
		return s, bad(fmt.Sprintf("derivation must be %q", DerivationV1))
	case s.Data.HeldOutPoolBytes < MinPoolBytes || s.Data.HeldOutPoolBytes > MaxPoolBytes:
		return s, bad(fmt.Sprintf("data.held_out_pool_bytes must be in [%d, %d]", MinPoolBytes, MaxPoolBytes))
	case s.Data.HeldOutWindows <= 0 || s.Data.HeldOutWindows > MaxHeldOutWindows:
		return s, bad(fmt.Sprintf("data.held_out_windows must be in [1, %d]", MaxHeldOutWindows))
	case !isHex64(s.Data.HeldOutPoolSHA256):
		return s, bad("data.held_out_pool_sha256 must be 64 lower-case hex digits")
	case s.BaselineMicroNats <= 0:
		return s, bad("baseline_micro_nats must be positive")
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
	for _, name := range []string{s.Data.Train, s.Data.HeldOutPool, s.Entry.Train, s.Entry.HeldOut} {
		if name == "" || !fs.ValidPath(name) || path.Dir(name) != "." {
			return s, bad(fmt.Sprintf("file name %q must be a plain file name", name))
		}
		if _, err := fs.Stat(fsys, name); err != nil {
			return s, bad(fmt.Sprintf("%s is missing", name))
		}
	}
	if err := checkPool(fsys, s.Data); err != nil {
		return s, bad(err.Error())
	}
	return s, nil
}

// checkPool checks the held-out pool's size and SHA-256 against task.json.
func checkPool(fsys fs.FS, d DataSpec) error {
	f, err := fsys.Open(d.HeldOutPool)
	if err != nil {
		return fmt.Errorf("%s: %v", d.HeldOutPool, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, d.HeldOutPoolBytes+1))
	if err != nil {
		return fmt.Errorf("%s: %v", d.HeldOutPool, err)
	}
	if n != d.HeldOutPoolBytes {
		return fmt.Errorf("%s holds %d bytes, data.held_out_pool_bytes says %d", d.HeldOutPool, n, d.HeldOutPoolBytes)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.HeldOutPoolSHA256 {
		return fmt.Errorf("%s has SHA-256 %s, data.held_out_pool_sha256 says %s", d.HeldOutPool, got, d.HeldOutPoolSHA256)
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
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
