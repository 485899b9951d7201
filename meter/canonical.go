package meter

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/opencontainers/go-digest"

	"github.com/feval/feval/bundle"
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
	s := scanner{in: raw, out: make([]byte, 0, len(raw))}
	s.skipSpace()
	if err := s.value(0); err != nil {
		return nil, err
	}
	s.skipSpace()
	if s.pos != len(s.in) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return s.out, nil
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

// scanner is a one-pass JSON reader that writes the canonical form as it goes
// (objects are buffered to sort their members). Its input is valid UTF-8.
type scanner struct {
	in  []byte
	pos int
	out []byte
}

var errEnd = errors.New("invalid JSON: unexpected end of input")

func (s *scanner) skipSpace() {
	for s.pos < len(s.in) {
		switch s.in[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) syntax(what string) error {
	if s.pos >= len(s.in) {
		return errEnd
	}
	return fmt.Errorf("invalid JSON: %s at offset %d", what, s.pos)
}

func (s *scanner) value(depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("JSON nested deeper than %d levels", maxJSONDepth)
	}
	if s.pos >= len(s.in) {
		return errEnd
	}
	switch c := s.in[s.pos]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == '"':
		str, err := s.str()
		if err != nil {
			return err
		}
		s.out = bundle.AppendJSONString(s.out, str)
		return nil
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return s.syntax("unexpected character")
}

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.in[s.pos:], []byte(lit)) {
		return s.syntax("invalid literal")
	}
	s.pos += len(lit)
	s.out = append(s.out, lit...)
	return nil
}

func (s *scanner) array(depth int) error {
	s.pos++ // [
	s.out = append(s.out, '[')
	s.skipSpace()
	if s.pos < len(s.in) && s.in[s.pos] == ']' {
		s.pos++
		s.out = append(s.out, ']')
		return nil
	}
	for {
		s.skipSpace()
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.skipSpace()
		if s.pos >= len(s.in) {
			return errEnd
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
			s.out = append(s.out, ',')
		case ']':
			s.pos++
			s.out = append(s.out, ']')
			return nil
		default:
			return s.syntax("expected ',' or ']'")
		}
	}
}

func (s *scanner) object(depth int) error {
	s.pos++ // {
	type member struct {
		key string
		val []byte
	}
	var ms []member
	outer := s.out
	s.skipSpace()
	if s.pos < len(s.in) && s.in[s.pos] == '}' {
		s.pos++
		s.out = append(outer, '{', '}')
		return nil
	}
	for {
		s.skipSpace()
		if s.pos >= len(s.in) || s.in[s.pos] != '"' {
			return s.syntax("expected a string key")
		}
		k, err := s.str()
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.key == k {
				return fmt.Errorf("duplicate key %q", k)
			}
		}
		s.skipSpace()
		if s.pos >= len(s.in) || s.in[s.pos] != ':' {
			return s.syntax("expected ':'")
		}
		s.pos++
		s.skipSpace()
		s.out = nil
		if err := s.value(depth + 1); err != nil {
			return err
		}
		ms = append(ms, member{k, s.out})
		s.skipSpace()
		if s.pos >= len(s.in) {
			return errEnd
		}
		if c := s.in[s.pos]; c == ',' {
			s.pos++
			continue
		} else if c != '}' {
			return s.syntax("expected ',' or '}'")
		}
		s.pos++
		break
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].key < ms[j].key })
	out := append(outer, '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		out = bundle.AppendJSONString(out, m.key)
		out = append(out, ':')
		out = append(out, m.val...)
	}
	s.out = append(out, '}')
	return nil
}

// str reads a string literal and returns its decoded value. A lone UTF-16
// surrogate escape decodes to U+FFFD, as encoding/json does.
func (s *scanner) str() (string, error) {
	s.pos++ // opening quote
	start := s.pos
	for s.pos < len(s.in) {
		c := s.in[s.pos]
		switch {
		case c == '"':
			v := string(s.in[start:s.pos])
			s.pos++
			return v, nil
		case c == '\\':
			return s.strSlow(start)
		case c < 0x20:
			return "", s.syntax("control character in string")
		}
		s.pos++
	}
	return "", errEnd
}

func (s *scanner) strSlow(start int) (string, error) {
	b := append([]byte(nil), s.in[start:s.pos]...)
	for s.pos < len(s.in) {
		c := s.in[s.pos]
		switch {
		case c == '"':
			s.pos++
			return string(b), nil
		case c < 0x20:
			return "", s.syntax("control character in string")
		case c != '\\':
			b = append(b, c)
			s.pos++
			continue
		}
		if s.pos+1 >= len(s.in) {
			return "", errEnd
		}
		e := s.in[s.pos+1]
		s.pos += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", s.syntax("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := unicode.ReplacementChar
				if save := s.pos; s.pos+1 < len(s.in) && s.in[s.pos] == '\\' && s.in[s.pos+1] == 'u' {
					s.pos += 2
					if lo, ok := s.hex4(); ok {
						if d := utf16.DecodeRune(r, lo); d != unicode.ReplacementChar {
							r2 = d
						} else {
							s.pos = save // not a pair: the second escape stands alone
						}
					} else {
						return "", s.syntax("invalid \\u escape")
					}
				}
				r = r2
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", s.syntax("invalid escape")
		}
	}
	return "", errEnd
}

func (s *scanner) hex4() (rune, bool) {
	if s.pos+4 > len(s.in) {
		return 0, false
	}
	var r rune
	for _, c := range s.in[s.pos : s.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	s.pos += 4
	return r, true
}

// number reads a number literal by JSON's grammar and writes its canonical form.
func (s *scanner) number() error {
	start := s.pos
	digits := func() int {
		n := 0
		for s.pos < len(s.in) && s.in[s.pos] >= '0' && s.in[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	if s.in[s.pos] == '-' {
		s.pos++
	}
	if s.pos < len(s.in) && s.in[s.pos] == '0' {
		s.pos++
	} else if digits() == 0 {
		return s.syntax("invalid number")
	}
	if s.pos < len(s.in) && s.in[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return s.syntax("invalid number")
		}
	}
	if s.pos < len(s.in) && (s.in[s.pos] == 'e' || s.in[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.in) && (s.in[s.pos] == '+' || s.in[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return s.syntax("invalid number")
		}
	}
	n, err := canonNumber(string(s.in[start:s.pos]))
	if err != nil {
		return err
	}
	s.out = append(s.out, n...)
	return nil
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
