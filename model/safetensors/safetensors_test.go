package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

var lim = Limits{MaxHeaderBytes: 1 << 10, MaxTensors: 4}

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

func TestParseHeader(t *testing.T) {
	good := build(`{"b":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]},"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}}  `, f32s(1, 2, 3))
	es, err := ParseHeader(good, lim)
	if err != nil || len(es) != 2 || es[0].Name != "a" || es[0].Elements() != 4 || es[1].Begin != 8 {
		t.Fatalf("a valid file: %+v %v", es, err)
	}
	if d := DataSection(good, es); len(d) != 12 {
		t.Fatalf("data section of %d bytes, want 12", len(d))
	}
	r := bytes.NewReader(good)
	if res, err := ReadHeader(r, int64(len(good)), lim); err != nil || !reflect.DeepEqual(res, es) || r.Len() != 12 {
		t.Fatalf("ReadHeader: %+v %v, %d bytes left, want %+v and the 12 data bytes", res, err, r.Len(), es)
	}
	cases := []struct {
		name    string
		b       []byte
		problem string
	}{
		{"pickle", append([]byte{0x80, 0x04, 0x95}, make([]byte, 20)...), "not-safetensors"},
		{"zip", append([]byte("PK\x03\x04"), make([]byte, 20)...), "not-safetensors"},
		{"short", []byte{1, 2}, "header"},
		{"header over limit", build(strings.Repeat(" ", 1<<10+1), nil), "header"},
		{"header past end", func() []byte { b := build("{}", nil); b[0] = 200; return b }(), "header"},
		{"not an object", build(`[]`, nil), "header"},
		{"too many tensors", build(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"c":{"dtype":"U8","shape":[1],"data_offsets":[2,3]},"d":{"dtype":"U8","shape":[1],"data_offsets":[3,4]},"e":{"dtype":"U8","shape":[1],"data_offsets":[4,5]}}`, make([]byte, 5)), "header"},
		{"duplicate", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32s(1, 2)), "header"},
		{"unknown field", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"code":"x"}}`, f32s(1)), "header"},
		{"bad metadata", build(`{"__metadata__":{"k":1}}`, nil), "header"},
		{"unknown dtype", build(`{"a":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}}`, f32s(1)), "dtype"},
		{"negative dim", build(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, f32s(1)), "shape"},
		{"rank", build(`{"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}`, f32s(1)), "shape"},
		{"huge dims", build(`{"a":{"dtype":"F32","shape":[2147483647,2147483647,2147483647],"data_offsets":[0,4]}}`, f32s(1)), "shape"},
		{"size mismatch", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, f32s(1)), "offsets"},
		{"gap", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, f32s(1, 2)), "offsets"},
		{"overlap", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32s(1)), "offsets"},
		{"past the data", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32s(1)), "offsets"},
		{"trailing data", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32s(1, 2)), "offsets"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHeader(c.b, lim)
			var se *Error
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalid) || se.Problem != c.problem {
				t.Fatalf("got %v, want problem %s", err, c.problem)
			}
			if _, rerr := ReadHeader(bytes.NewReader(c.b), int64(len(c.b)), lim); rerr == nil || rerr.Error() != err.Error() {
				t.Fatalf("ReadHeader: %v, ParseHeader: %v", rerr, err)
			}
		})
	}
}

// FuzzParseHeader: no input makes the parser panic or hang, and every header
// it accepts describes tensors that lie inside the file and tile its data.
func FuzzParseHeader(f *testing.F) {
	f.Add(build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32s(1, 2)))
	f.Add(build(`{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[1,3],"data_offsets":[0,6]}}`, make([]byte, 6)))
	f.Add(build(`{}`, nil))
	f.Add([]byte{0x80, 0x04})
	f.Add(build(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := ParseHeader(b, lim)
		res, rerr := ReadHeader(bytes.NewReader(b), int64(len(b)), lim)
		if (err == nil) != (rerr == nil) || err != nil && err.Error() != rerr.Error() || !reflect.DeepEqual(es, res) {
			t.Fatalf("ReadHeader (%+v, %v) differs from ParseHeader (%+v, %v)", res, rerr, es, err)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("an error that is not ErrInvalid: %v", err)
			}
			return
		}
		n := int64(binary.LittleEndian.Uint64(b[:8]))
		data := int64(len(b)) - 8 - n
		var total int64
		for _, e := range es {
			if e.Begin < 0 || e.End > data || e.End < e.Begin || e.Elements()*e.ElementSize != e.End-e.Begin {
				t.Fatalf("accepted %s at [%d,%d) outside %d data bytes", e.Name, e.Begin, e.End, data)
			}
			total += e.End - e.Begin
		}
		if total != data {
			t.Fatalf("accepted tensors cover %d of %d bytes", total, data)
		}
	})
}
