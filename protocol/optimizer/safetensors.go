package optimizer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
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
type HeaderEntry struct {
	Name        string
	DType       string
	Shape       []int64
	Begin, End  int64 // offsets into the data section
	ElementSize int64
}

// dtypeSizes are the element sizes of the safetensors dtypes feval accepts in a
// header. Tasks may ask only for F32 today.
var dtypeSizes = map[string]int64{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// ParseHeader reads the header of a safetensors file held in b: an 8-byte
// little-endian length N, N bytes of JSON (trailing spaces allowed), then the
// data section. It checks, without trusting anything the file says, that the
// header is within MaxHeaderBytes and inside b, that it is one JSON object of
// tensors (plus an optional "__metadata__" object of strings) without
// duplicate names, that every dtype is known, every shape non-negative and
// bounded, every tensor's byte range matches its shape, and that the ranges
// tile the data section exactly, in order, without gaps or overlap. Entries
// are returned sorted by name.
func ParseHeader(b []byte) ([]HeaderEntry, error) {
	if len(b) >= 2 && b[0] == 0x80 && b[1] <= 5 {
		return nil, ckErr("not-safetensors", "the file is a Python pickle; checkpoints are safetensors, never pickle")
	}
	if len(b) >= 4 && string(b[:4]) == "PK\x03\x04" {
		return nil, ckErr("not-safetensors", "the file is a zip archive (torch.save); checkpoints are safetensors, never pickle")
	}
	if len(b) < 8 {
		return nil, ckErr("header", "%d bytes is too short for a safetensors file", len(b))
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n > MaxHeaderBytes {
		return nil, ckErr("header", "header length %d exceeds the %d byte limit", n, MaxHeaderBytes)
	}
	if n > uint64(len(b)-8) {
		return nil, ckErr("header", "header length %d runs past the end of the %d byte file", n, len(b))
	}
	raw := bytes.TrimRight(b[8:8+n], " ")
	data := int64(len(b)) - 8 - int64(n)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, ckErr("header", "the header is not a JSON object")
	}
	seen := map[string]bool{}
	var out []HeaderEntry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, ckErr("header", "malformed JSON: %v", err)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, ckErr("header", "tensor %q is listed twice", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			var meta map[string]string
			if err := dec.Decode(&meta); err != nil {
				return nil, ckErr("header", "__metadata__ must map strings to strings")
			}
			continue
		}
		if name == "" || len(name) > 256 {
			return nil, ckErr("header", "a tensor name is empty or longer than 256 bytes")
		}
		if len(out) >= MaxTensors {
			return nil, ckErr("header", "more than %d tensors", MaxTensors)
		}
		var e struct {
			DType       string        `json:"dtype"`
			Shape       []json.Number `json:"shape"`
			DataOffsets []json.Number `json:"data_offsets"`
		}
		var rawEntry json.RawMessage
		if err := dec.Decode(&rawEntry); err != nil {
			return nil, ckErr("header", "tensor %q: malformed JSON: %v", name, err)
		}
		ed := json.NewDecoder(bytes.NewReader(rawEntry))
		ed.DisallowUnknownFields()
		ed.UseNumber()
		if err := ed.Decode(&e); err != nil {
			return nil, ckErr("header", "tensor %q: %v", name, err)
		}
		size, ok := dtypeSizes[e.DType]
		if !ok {
			return nil, ckErr("dtype", "tensor %q: unknown dtype %q", name, e.DType)
		}
		if len(e.Shape) > maxRank {
			return nil, ckErr("shape", "tensor %q: rank %d exceeds %d", name, len(e.Shape), maxRank)
		}
		he := HeaderEntry{Name: name, DType: e.DType, ElementSize: size, Shape: make([]int64, len(e.Shape))}
		elems := int64(1)
		for i, d := range e.Shape {
			v, err := d.Int64()
			if err != nil || v < 0 || v > math.MaxInt32 {
				return nil, ckErr("shape", "tensor %q: dimension %s is not an integer in [0, 2^31)", name, d)
			}
			he.Shape[i] = v
			if v != 0 && elems > math.MaxInt64/v {
				return nil, ckErr("shape", "tensor %q: element count overflows", name)
			}
			elems *= v
		}
		if len(e.DataOffsets) != 2 {
			return nil, ckErr("offsets", "tensor %q: data_offsets must be [begin, end]", name)
		}
		begin, err1 := e.DataOffsets[0].Int64()
		end, err2 := e.DataOffsets[1].Int64()
		if err1 != nil || err2 != nil || begin < 0 || end < begin || end > data {
			return nil, ckErr("offsets", "tensor %q: data_offsets %v outside the %d byte data section", name, e.DataOffsets, data)
		}
		if elems > (end-begin)/size+1 || elems*size != end-begin {
			return nil, ckErr("offsets", "tensor %q: shape %v of %s needs %s bytes, data_offsets give %d", name, he.Shape, e.DType, mulText(elems, size), end-begin)
		}
		he.Begin, he.End = begin, end
		out = append(out, he)
	}
	if _, err := dec.Token(); err != nil {
		return nil, ckErr("header", "malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ckErr("header", "trailing data after the header object")
	}
	byOffset := append([]HeaderEntry(nil), out...)
	sort.Slice(byOffset, func(i, j int) bool {
		if byOffset[i].Begin != byOffset[j].Begin {
			return byOffset[i].Begin < byOffset[j].Begin
		}
		return byOffset[i].End < byOffset[j].End
	})
	var at int64
	for _, e := range byOffset {
		if e.Begin != at {
			return nil, ckErr("offsets", "tensor %q starts at %d, want %d: tensors must tile the data section", e.Name, e.Begin, at)
		}
		at = e.End
	}
	if at != data {
		return nil, ckErr("offsets", "tensors cover %d of %d data bytes", at, data)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func mulText(a, b int64) string {
	if a > math.MaxInt64/b {
		return "more than 2^63"
	}
	return fmt.Sprint(a * b)
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
