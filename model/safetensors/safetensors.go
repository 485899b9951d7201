// Package safetensors reads the header of a safetensors file without trusting
// it: the one weight format feval accepts, because reading it runs no code
// (pickle-based formats, torch.save's zip archives among them, execute code when
// loaded and are refused by name).
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON (trailing spaces allowed), then the data section. The JSON is one object
// mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets into the data section), plus an optional "__metadata__" object of
// strings.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// Limits bound what ParseHeader accepts.
type Limits struct {
	// MaxHeaderBytes bounds the JSON header.
	MaxHeaderBytes uint64
	// MaxTensors bounds the tensors the header may list.
	MaxTensors int
}

// maxRank bounds a tensor's number of dimensions.
const maxRank = 8

// ErrInvalid is wrapped by every reason a file is refused.
var ErrInvalid = errors.New("invalid safetensors file")

// Error says why a file was refused. Problem is a stable name:
// not-safetensors, header, dtype, shape, offsets.
type Error struct {
	Problem string
	Detail  string
}

func (e *Error) Error() string { return "safetensors: " + e.Problem + ": " + e.Detail }

// Unwrap makes every Error an ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

func fail(problem, format string, a ...any) error {
	return &Error{Problem: problem, Detail: fmt.Sprintf(format, a...)}
}

// Entry is one tensor of a header.
type Entry struct {
	Name        string
	DType       string
	Shape       []int64
	Begin, End  int64 // offsets into the data section
	ElementSize int64
}

// Elements is the number of elements of the tensor.
func (e Entry) Elements() int64 { return (e.End - e.Begin) / e.ElementSize }

// DTypeSizes are the element sizes of the safetensors dtypes a header may name.
var DTypeSizes = map[string]int64{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// IsPickle reports whether b starts like a Python pickle (0x80 then a protocol
// byte up to 5) or a zip archive (torch.save), the formats that run code when
// loaded.
func IsPickle(b []byte) (bool, string) {
	if len(b) >= 2 && b[0] == 0x80 && b[1] <= 5 {
		return true, "a Python pickle"
	}
	if len(b) >= 4 && string(b[:4]) == "PK\x03\x04" {
		return true, "a zip archive (torch.save)"
	}
	return false, ""
}

// ParseHeader reads the header of the safetensors file held in b. It checks,
// without trusting anything the file says, that the header is within the
// limits and inside b, that it is one JSON object of tensors (plus an optional
// "__metadata__" object of strings) without duplicate names, that every dtype
// is known, every shape non-negative and bounded, every tensor's byte range
// matches its shape, and that the ranges tile the data section exactly, in
// order of offsets, without gaps or overlap. Entries are returned sorted by
// name.
func ParseHeader(b []byte, lim Limits) ([]Entry, error) {
	n, err := headerLength(b, int64(len(b)), lim)
	if err != nil {
		return nil, err
	}
	return parseJSON(b[8:8+n], int64(len(b))-8-n, lim)
}

// ReadHeader is ParseHeader of a file of size bytes read from r, which it
// leaves at the start of the data section: only the header is read.
func ReadHeader(r io.Reader, size int64, lim Limits) ([]Entry, error) {
	start := make([]byte, min(max(size, 0), 8))
	if _, err := io.ReadFull(r, start); err != nil {
		return nil, err
	}
	n, err := headerLength(start, size, lim)
	if err != nil {
		return nil, err
	}
	head := make([]byte, n)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	return parseJSON(head, size-8-n, lim)
}

// headerLength checks the start of a file of size bytes (its first 8 bytes,
// or all of a shorter file) and returns the header's length.
func headerLength(start []byte, size int64, lim Limits) (int64, error) {
	if ok, what := IsPickle(start); ok {
		return 0, fail("not-safetensors", "the file is %s; checkpoints are safetensors, never pickle", what)
	}
	if size < 8 || len(start) < 8 {
		return 0, fail("header", "%d bytes is too short for a safetensors file", size)
	}
	n := binary.LittleEndian.Uint64(start[:8])
	if n > lim.MaxHeaderBytes {
		return 0, fail("header", "header length %d exceeds the %d byte limit", n, lim.MaxHeaderBytes)
	}
	if n > uint64(size-8) {
		return 0, fail("header", "header length %d runs past the end of the %d byte file", n, size)
	}
	return int64(n), nil
}

// parseJSON checks a header (the bytes after the length) of a file whose
// data section has data bytes.
func parseJSON(header []byte, data int64, lim Limits) ([]Entry, error) {
	raw := bytes.TrimRight(header, " ")
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fail("header", "the header is not a JSON object")
	}
	seen := map[string]bool{}
	var out []Entry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fail("header", "malformed JSON: %v", err)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, fail("header", "tensor %q is listed twice", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			var meta map[string]string
			if err := dec.Decode(&meta); err != nil {
				return nil, fail("header", "__metadata__ must map strings to strings")
			}
			continue
		}
		if name == "" || len(name) > 256 {
			return nil, fail("header", "a tensor name is empty or longer than 256 bytes")
		}
		if len(out) >= lim.MaxTensors {
			return nil, fail("header", "more than %d tensors", lim.MaxTensors)
		}
		e, err := parseEntry(dec, name, data)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fail("header", "malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail("header", "trailing data after the header object")
	}
	byOffset := append([]Entry(nil), out...)
	sort.Slice(byOffset, func(i, j int) bool {
		if byOffset[i].Begin != byOffset[j].Begin {
			return byOffset[i].Begin < byOffset[j].Begin
		}
		return byOffset[i].End < byOffset[j].End
	})
	var at int64
	for _, e := range byOffset {
		if e.Begin != at {
			return nil, fail("offsets", "tensor %q starts at %d, want %d: tensors must tile the data section", e.Name, e.Begin, at)
		}
		at = e.End
	}
	if at != data {
		return nil, fail("offsets", "tensors cover %d of %d data bytes", at, data)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func parseEntry(dec *json.Decoder, name string, data int64) (Entry, error) {
	var e struct {
		DType       string        `json:"dtype"`
		Shape       []json.Number `json:"shape"`
		DataOffsets []json.Number `json:"data_offsets"`
	}
	var rawEntry json.RawMessage
	if err := dec.Decode(&rawEntry); err != nil {
		return Entry{}, fail("header", "tensor %q: malformed JSON: %v", name, err)
	}
	ed := json.NewDecoder(bytes.NewReader(rawEntry))
	ed.DisallowUnknownFields()
	ed.UseNumber()
	if err := ed.Decode(&e); err != nil {
		return Entry{}, fail("header", "tensor %q: %v", name, err)
	}
	size, ok := DTypeSizes[e.DType]
	if !ok {
		return Entry{}, fail("dtype", "tensor %q: unknown dtype %q", name, e.DType)
	}
	if len(e.Shape) > maxRank {
		return Entry{}, fail("shape", "tensor %q: rank %d exceeds %d", name, len(e.Shape), maxRank)
	}
	he := Entry{Name: name, DType: e.DType, ElementSize: size, Shape: make([]int64, len(e.Shape))}
	elems := int64(1)
	for i, d := range e.Shape {
		v, err := d.Int64()
		if err != nil || v < 0 || v > math.MaxInt32 {
			return Entry{}, fail("shape", "tensor %q: dimension %s is not an integer in [0, 2^31)", name, d)
		}
		he.Shape[i] = v
		if v != 0 && elems > math.MaxInt64/v {
			return Entry{}, fail("shape", "tensor %q: element count overflows", name)
		}
		elems *= v
	}
	if len(e.DataOffsets) != 2 {
		return Entry{}, fail("offsets", "tensor %q: data_offsets must be [begin, end]", name)
	}
	begin, err1 := e.DataOffsets[0].Int64()
	end, err2 := e.DataOffsets[1].Int64()
	if err1 != nil || err2 != nil || begin < 0 || end < begin || end > data {
		return Entry{}, fail("offsets", "tensor %q: data_offsets %v outside the %d byte data section", name, e.DataOffsets, data)
	}
	if elems > (end-begin)/size+1 || elems*size != end-begin {
		return Entry{}, fail("offsets", "tensor %q: shape %v of %s needs %s bytes, data_offsets give %d", name, he.Shape, e.DType, mulText(elems, size), end-begin)
	}
	he.Begin, he.End = begin, end
	return he, nil
}

func mulText(a, b int64) string {
	if a > math.MaxInt64/b {
		return "more than 2^63"
	}
	return fmt.Sprint(a * b)
}

// DataSection returns the data section of a file whose header es was parsed
// from b.
func DataSection(b []byte, es []Entry) []byte {
	var n int64
	for _, e := range es {
		n = max(n, e.End)
	}
	return b[len(b)-int(n):]
}
