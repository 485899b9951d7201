package optimizer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/feval/feval/model/safetensors"
)

// Checkpoint limits.
const (
	// MaxHeaderBytes bounds a checkpoint's JSON header.
	MaxHeaderBytes = 64 << 10
	// MaxTensors bounds the tensors a header may list.
	MaxTensors = 1024
	// maxRank bounds a tensor's number of dimensions.
	maxRank = 8
)

// ErrCheckpoint is wrapped by every reason a checkpoint is refused.
var ErrCheckpoint = errors.New("invalid checkpoint")

// CheckpointError says why a checkpoint was refused. Problem is a stable name:
// not-safetensors, too-large, header, dtype, shape, tensors, offsets,
// non-finite.
type CheckpointError struct {
	Problem string
	Detail  string
}

func (e *CheckpointError) Error() string { return "checkpoint: " + e.Problem + ": " + e.Detail }

// Unwrap makes every CheckpointError an ErrCheckpoint.
func (e *CheckpointError) Unwrap() error { return ErrCheckpoint }

func ckErr(problem, format string, a ...any) error {
	return &CheckpointError{Problem: problem, Detail: fmt.Sprintf(format, a...)}
}

// TensorSpec is one tensor the task's model has: its name, dtype (safetensors
// names: F32) and shape.
type TensorSpec struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"`
	Shape []int64 `json:"shape"`
}

// HeaderEntry is one tensor of a safetensors header.
type HeaderEntry = safetensors.Entry

// ParseHeader is safetensors.ParseHeader within MaxHeaderBytes and
// MaxTensors, its refusals as CheckpointErrors.
func ParseHeader(b []byte) ([]HeaderEntry, error) {
	es, err := safetensors.ParseHeader(b, safetensors.Limits{MaxHeaderBytes: MaxHeaderBytes, MaxTensors: MaxTensors})
	var se *safetensors.Error
	if errors.As(err, &se) {
		return nil, &CheckpointError{Problem: se.Problem, Detail: se.Detail}
	}
	return es, err
}

// ValidateCheckpoint checks a checkpoint against the task's model before
// anything else reads it: total size at most maxBytes, a valid header
// (ParseHeader), exactly the tensors of want with their dtypes and shapes, and
// only finite values. It returns the parsed entries, sorted by name.
func ValidateCheckpoint(b []byte, want []TensorSpec, maxBytes int64) ([]HeaderEntry, error) {
	if int64(len(b)) > maxBytes {
		return nil, ckErr("too-large", "%d bytes exceed the task's %d byte limit", len(b), maxBytes)
	}
	es, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	byName := map[string]HeaderEntry{}
	for _, e := range es {
		byName[e.Name] = e
	}
	var missing []string
	for _, w := range want {
		e, ok := byName[w.Name]
		if !ok {
			missing = append(missing, w.Name)
			continue
		}
		if e.DType != w.DType {
			return nil, ckErr("dtype", "tensor %q is %s, the task's model has %s", w.Name, e.DType, w.DType)
		}
		if !equalShape(e.Shape, w.Shape) {
			return nil, ckErr("shape", "tensor %q has shape %v, the task's model has %v", w.Name, e.Shape, w.Shape)
		}
		delete(byName, w.Name)
	}
	if len(missing) > 0 {
		return nil, ckErr("tensors", "missing %s", strings.Join(missing, ", "))
	}
	if len(byName) > 0 {
		var extra []string
		for n := range byName {
			extra = append(extra, n)
		}
		sort.Strings(extra)
		return nil, ckErr("tensors", "the task's model has no %s", strings.Join(extra, ", "))
	}
	data := b[len(b)-int(dataLen(es)):]
	for _, e := range es {
		if e.DType != "F32" {
			continue
		}
		for i := e.Begin; i < e.End; i += 4 {
			f := math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, ckErr("non-finite", "tensor %q holds %v at element %d", e.Name, f, (i-e.Begin)/4)
			}
		}
	}
	return es, nil
}

func dataLen(es []HeaderEntry) int64 {
	var n int64
	for _, e := range es {
		n = max(n, e.End)
	}
	return n
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FirstDifference compares two valid checkpoints of the same model and
// returns the first tensor (in name order) whose bytes differ and the index of
// its first differing element, or ok=false when they are bitwise equal.
func FirstDifference(a, b []byte) (tensor string, element int64, differs bool, err error) {
	ea, err := ParseHeader(a)
	if err != nil {
		return "", 0, false, err
	}
	eb, err := ParseHeader(b)
	if err != nil {
		return "", 0, false, err
	}
	da, db := a[len(a)-int(dataLen(ea)):], b[len(b)-int(dataLen(eb)):]
	bm := map[string]HeaderEntry{}
	for _, e := range eb {
		bm[e.Name] = e
	}
	for _, x := range ea {
		y, ok := bm[x.Name]
		if !ok || x.DType != y.DType || !equalShape(x.Shape, y.Shape) {
			return x.Name, 0, true, nil
		}
		xa, yb := da[x.Begin:x.End], db[y.Begin:y.End]
		if !bytes.Equal(xa, yb) {
			for i := int64(0); i < int64(len(xa)); i++ {
				if xa[i] != yb[i] {
					return x.Name, i / x.ElementSize, true, nil
				}
			}
		}
	}
	if len(ea) != len(eb) || !bytes.Equal(a, b) {
		return "(header)", 0, !bytes.Equal(a, b), nil
	}
	return "", 0, false, nil
}
