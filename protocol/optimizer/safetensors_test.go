package optimizer

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// build assembles a safetensors file from a header text and data bytes.
func build(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	return append(append(b, header...), data...)
}

func f32s(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

var want = []TensorSpec{{Name: "a", DType: "F32", Shape: []int64{2}}, {Name: "b", DType: "F32", Shape: []int64{1, 1}}}

func TestValidateCheckpoint(t *testing.T) {
	good := build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]},"__metadata__":{"k":"v"}}  `, f32s(1, 2, 3))
	if es, err := ValidateCheckpoint(good, want, 1<<20); err != nil || len(es) != 2 || es[0].Name != "a" {
		t.Fatalf("a valid checkpoint: %v %v", es, err)
	}
	cases := []struct {
		name    string
		b       []byte
		problem string
	}{
		{"pickle", append([]byte{0x80, 0x04, 0x95}, make([]byte, 20)...), "not-safetensors"},
		{"zip", append([]byte("PK\x03\x04"), make([]byte, 20)...), "not-safetensors"},
		{"short", []byte{1, 2}, "header"},
		{"header over limit", build(strings.Repeat(" ", MaxHeaderBytes+1), nil), "header"},
		{"header past end", func() []byte { b := build("{}", nil); b[0] = 200; return b }(), "header"},
		{"not an object", build(`[]`, nil), "header"},
		{"duplicate", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32s(1, 2)), "header"},
		{"unknown field", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"code":"x"}}`, f32s(1)), "header"},
		{"unknown dtype", build(`{"a":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}}`, f32s(1)), "dtype"},
		{"negative dim", build(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, f32s(1)), "shape"},
		{"huge dims", build(`{"a":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,4]}}`, f32s(1)), "shape"},
		{"size mismatch", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, f32s(1)), "offsets"},
		{"gap", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32s(1, 2)), "offsets"},
		{"overlap", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32s(1)), "offsets"},
		{"trailing data", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32s(1, 2)), "offsets"},
		{"wrong dtype", build(`{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}}`, f32s(1, 2, 3)), "dtype"},
		{"wrong shape", build(`{"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}}`, f32s(1, 2, 3)), "shape"},
		{"missing tensor", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32s(1, 2)), "tensors"},
		{"extra tensor", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]},"c":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}`, f32s(1, 2, 3, 4)), "tensors"},
		{"nan", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}}`, f32s(1, float32(math.NaN()), 3)), "non-finite"},
		{"inf", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}}`, f32s(1, 2, float32(math.Inf(1)))), "non-finite"},
		{"too large", append(good, make([]byte, 1<<20)...), "too-large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ValidateCheckpoint(c.b, want, 1<<20)
			var ce *CheckpointError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCheckpoint) || ce.Problem != c.problem {
				t.Fatalf("got %v, want problem %s", err, c.problem)
			}
		})
	}
}

func TestFirstDifference(t *testing.T) {
	h := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}}`
	x, y := build(h, f32s(1, 2, 3)), build(h, f32s(1, 2.5, 3))
	if _, _, differs, err := FirstDifference(x, x); differs || err != nil {
		t.Fatalf("equal checkpoints differ: %v", err)
	}
	name, elem, differs, err := FirstDifference(x, y)
	if err != nil || !differs || name != "a" || elem != 1 {
		t.Fatalf("got %s[%d] %t %v, want a[1]", name, elem, differs, err)
	}
}
