package meter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/opencontainers/go-digest"
)

// maxJSONDepth bounds the nesting of a request body.
const maxJSONDepth = 64

// CanonicalRequest returns the canonical form of a request body (docs/METER.md,
// "Canonical request"): object keys sorted by their UTF-8 bytes, no insignificant
// whitespace, strings escaped minimally, numbers in their shortest exact decimal
// form (no float conversion: 0.70, 7e-1 and 0.7 are all written 0.7). It rejects
// invalid UTF-8, duplicate keys, nesting deeper than 64 and trailing data.
func CanonicalRequest(raw []byte) ([]byte, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := canonValue(dec, &buf, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return buf.Bytes(), nil
}

// RequestDigest is the digest that keys a request in receipts and traces: the
// SHA-256 of its canonical form, or of its raw bytes when it has none (a
// malformed body).
func RequestDigest(raw []byte) digest.Digest {
	if c, err := CanonicalRequest(raw); err == nil {
		return digest.FromBytes(c)
	}
	return digest.FromBytes(raw)
}

func canonValue(dec *json.Decoder, w *bytes.Buffer, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("JSON nested deeper than %d levels", maxJSONDepth)
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
				return fmt.Errorf("invalid JSON: %w", err)
			}
			w.WriteByte(']')
			return nil
		}
		return fmt.Errorf("invalid JSON: unexpected %q", t)
	case string:
		writeString(w, t)
	case json.Number:
		n, err := canonNumber(string(t))
		if err != nil {
			return err
		}
		w.WriteString(n)
	case bool:
		if t {
			w.WriteString("true")
		} else {
			w.WriteString("false")
		}
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
	var ms []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		k, ok := tok.(string)
		if !ok {
			return errors.New("invalid JSON: object key is not a string")
		}
		if seen[k] {
			return fmt.Errorf("duplicate key %q", k)
		}
		seen[k] = true
		var v bytes.Buffer
		if err := canonValue(dec, &v, depth+1); err != nil {
			return err
		}
		ms = append(ms, member{k, v.Bytes()})
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].key < ms[j].key })
	w.WriteByte('{')
	for i, m := range ms {
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

func writeString(w *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	w.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			w.WriteString(`\"`)
		case c == '\\':
			w.WriteString(`\\`)
		case c == '\b':
			w.WriteString(`\b`)
		case c == '\f':
			w.WriteString(`\f`)
		case c == '\n':
			w.WriteString(`\n`)
		case c == '\r':
			w.WriteString(`\r`)
		case c == '\t':
			w.WriteString(`\t`)
		case c < 0x20:
			w.WriteString(`\u00`)
			w.WriteByte(hex[c>>4])
			w.WriteByte(hex[c&0xF])
		default:
			w.WriteByte(c)
		}
	}
	w.WriteByte('"')
}

// maxExponent bounds the decimal exponent of a number in a request.
const maxExponent = 400

// canonNumber writes a JSON number literal in its shortest exact decimal form
// without converting it to binary floating point: the value is d x 10^e with d
// a digit string without leading or trailing zeros; it is written as an integer
// when e >= 0 and the result has at most 21 digits, as a plain decimal when
// -e <= 21, and otherwise as d[0].d[1:]e<exp>.
func canonNumber(lit string) (string, error) {
	s := lit
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		es := s[i+1:]
		eneg := false
		if es != "" && (es[0] == '+' || es[0] == '-') {
			eneg = es[0] == '-'
			es = es[1:]
		}
		if es == "" || len(es) > 6 {
			return "", fmt.Errorf("number %q: exponent out of range", lit)
		}
		for _, c := range es {
			if c < '0' || c > '9' {
				return "", fmt.Errorf("number %q is malformed", lit)
			}
			exp = exp*10 + int(c-'0')
		}
		if eneg {
			exp = -exp
		}
	}
	digits := mant
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		digits = mant[:i] + mant[i+1:]
		exp -= len(mant) - i - 1
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil
	}
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	if exp+len(digits) > maxExponent || exp < -maxExponent {
		return "", fmt.Errorf("number %q: exponent out of range", lit)
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch {
	case exp >= 0 && len(digits)+exp <= 21:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", exp))
	case exp < 0 && -exp <= 21:
		point := len(digits) + exp
		if point > 0 {
			b.WriteString(digits[:point])
			b.WriteByte('.')
			b.WriteString(digits[point:])
		} else {
			b.WriteString("0.")
			b.WriteString(strings.Repeat("0", -point))
			b.WriteString(digits)
		}
	default:
		b.WriteByte(digits[0])
		if len(digits) > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		fmt.Fprintf(&b, "e%d", exp+len(digits)-1)
	}
	return b.String(), nil
}
