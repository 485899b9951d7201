package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/feval/feval/internal/strictjson"
)

// MaxRecordSize bounds any record feval parses from an untrusted source.
const MaxRecordSize = 4 << 20

// ErrNotCanonical reports bytes that are valid JSON but not in canonical form.
var ErrNotCanonical = errors.New("not canonical JSON")

// Canonical encodes v as canonical JSON: object keys sorted by their UTF-16 code
// units (RFC 8785), no insignificant whitespace, strings escaped minimally, and
// integers only. Any non-integer number is an error, so no float can reach a signed
// record. Canonical(Decode(Canonical(v))) == Canonical(v).
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonicalize(raw)
}

// Canonicalize re-encodes arbitrary JSON bytes in canonical form. It rejects
// duplicate keys, non-integer numbers, invalid UTF-8 and trailing data.
func Canonicalize(raw []byte) ([]byte, error) {
	if len(raw) > MaxRecordSize {
		return nil, fmt.Errorf("record of %d bytes exceeds the %d byte limit", len(raw), MaxRecordSize)
	}
	if !utf8.Valid(raw) {
		return nil, errors.New("record is not valid UTF-8")
	}
	if out, ok := canonFast(raw); ok {
		return out, nil
	}
	return canonTokens(raw)
}

// canonTokens is Canonicalize over the token stream of encoding/json: the
// reference canonFast is held to, and what decides (with its error) on
// input canonFast does not take.
func canonTokens(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := canonValue(dec, &buf, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return buf.Bytes(), nil
}

// ErrMalformedRecord is wrapped by every error of ParseCanonical: the bytes are
// not a record of the required form.
var ErrMalformedRecord = errors.New("malformed record")

// ParseCanonical reads a record exactly as FORMAT.md specifies it: raw must be
// the canonical encoding of its content (ErrNotCanonical), every member name
// must be exactly a field's name (case-sensitive), unknown fields are refused
// (strictjson.Decode), and re-encoding the decoded value must give raw again,
// so that each value has one spelling: a missing field, an empty optional
// field spelled out, or a null where the record has a value are refused too.
// It is how feval reads every record it did not just write. Every error wraps
// ErrMalformedRecord.
func ParseCanonical(raw []byte, v any) error {
	// A record that decodes and re-encodes to its own bytes is canonical
	// (Canonical's output is, and Canonicalize is idempotent): accepted
	// after one decode and one encode. Any other record takes the checks
	// below in order, from a zero v, so that it is refused with the same
	// error.
	if len(raw) <= MaxRecordSize && strictjson.Decode(raw, v) == nil {
		if again, err := Canonical(v); err == nil && bytes.Equal(again, raw) {
			return nil
		}
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv.Elem().SetZero()
	}
	c, err := Canonicalize(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	if !bytes.Equal(c, raw) {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, ErrNotCanonical)
	}
	if err := strictjson.Decode(raw, v); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	again, err := Canonical(v)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	if !bytes.Equal(again, raw) {
		return fmt.Errorf("%w: it does not re-encode to the same bytes (a required field is missing, or an empty one is spelled out): %s",
			ErrMalformedRecord, firstDifference(raw, again))
	}
	return nil
}

// firstDifference shows where two encodings part.
func firstDifference(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	clip := func(x []byte) string {
		x = x[i:]
		if len(x) > 40 {
			x = x[:40]
		}
		return string(x)
	}
	return fmt.Sprintf("at byte %d, %q against %q", i, clip(a), clip(b))
}

const maxDepth = 64

func canonValue(dec *json.Decoder, w *bytes.Buffer, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("JSON nested deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return canonObject(dec, w, depth)
		case '[':
			w.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					w.WriteByte(',')
				}
				if err := canonValue(dec, w, depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			w.WriteByte(']')
			return nil
		}
		return fmt.Errorf("unexpected %q", t)
	case string:
		writeString(w, t)
	case json.Number:
		n, err := canonInteger(string(t))
		if err != nil {
			return err
		}
		w.WriteString(n)
	case bool:
		w.WriteString(strconv.FormatBool(t))
	case nil:
		w.WriteString("null")
	}
	return nil
}

func canonObject(dec *json.Decoder, w *bytes.Buffer, depth int) error {
	type member struct {
		key string
		val []byte
	}
	var members []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		if seen[key] {
			return fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var vb bytes.Buffer
		if err := canonValue(dec, &vb, depth+1); err != nil {
			return err
		}
		members = append(members, member{key, vb.Bytes()})
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	sort.Slice(members, func(i, j int) bool { return lessUTF16(members[i].key, members[j].key) })
	w.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			w.WriteByte(',')
		}
		writeString(w, m.key)
		w.WriteByte(':')
		w.Write(m.val)
	}
	w.WriteByte('}')
	return nil
}

// canonInteger accepts only JSON integers and returns their canonical spelling.
func canonInteger(s string) (string, error) {
	for _, c := range s {
		if c == '.' || c == 'e' || c == 'E' {
			return "", fmt.Errorf("number %s is not an integer: signed records hold integers or rational strings only", s)
		}
	}
	if s == "-0" {
		return "0", nil
	}
	return s, nil
}

// lessUTF16 orders strings by UTF-16 code units, as RFC 8785 requires.
// Without characters beyond U+FFFF (four-byte UTF-8 sequences, whose first
// byte is 0xF0 or more), each code unit is a code point, and the UTF-8 bytes
// of valid strings order as their code points: the byte-wise order is the
// same.
func lessUTF16(a, b string) bool {
	if !hasSupplementary(a) && !hasSupplementary(b) {
		return a < b
	}
	ua, ub := utf16Units(a), utf16Units(b)
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

func hasSupplementary(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0xF0 {
			return true
		}
	}
	return false
}

func utf16Units(s string) []uint16 {
	out := make([]uint16, 0, len(s))
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
			continue
		}
		out = append(out, uint16(r))
	}
	return out
}

// AppendJSONString appends s as a JSON string escaped as RFC 8785 does: only
// '"', '\\' and control characters; the short escapes where JSON has them,
// \u00xx (lower-case hex) otherwise. Canonical records and the meter's
// canonical requests share it.
func AppendJSONString(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			out = append(out, '\\', '"')
		case c == '\\':
			out = append(out, '\\', '\\')
		case c == '\b':
			out = append(out, '\\', 'b')
		case c == '\f':
			out = append(out, '\\', 'f')
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\r':
			out = append(out, '\\', 'r')
		case c == '\t':
			out = append(out, '\\', 't')
		case c < 0x20:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}

// writeString writes s escaped by AppendJSONString.
func writeString(w *bytes.Buffer, s string) { w.Write(AppendJSONString(w.AvailableBuffer(), s)) }
