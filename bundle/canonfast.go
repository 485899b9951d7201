package bundle

import (
	"slices"
	"unicode/utf8"
)

// canonFast is Canonicalize for the records feval reads and writes: one pass
// over the bytes instead of a token stream. It reports ok only for input
// Canonicalize accepts, with the very bytes Canonicalize gives; for anything
// else (malformed JSON, a fraction, an escaped surrogate, a duplicate key,
// nesting deeper than maxDepth) it reports !ok and Canonicalize decides,
// with its own error. raw must be valid UTF-8 (Canonicalize checks it
// first). FuzzCanonicalFastAgrees holds the two to the same results.
func canonFast(raw []byte) ([]byte, bool) {
	p := fastCanon{in: raw, out: make([]byte, 0, len(raw))}
	if !p.value(0) {
		return nil, false
	}
	p.space()
	if p.i != len(p.in) {
		return nil, false
	}
	return p.out, true
}

type fastCanon struct {
	in  []byte
	i   int
	out []byte
}

func (p *fastCanon) space() {
	for p.i < len(p.in) {
		switch p.in[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastCanon) literal(s string) bool {
	if len(p.in)-p.i < len(s) || string(p.in[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	p.out = append(p.out, s...)
	return true
}

func (p *fastCanon) value(depth int) bool {
	if depth > maxDepth {
		return false
	}
	p.space()
	if p.i >= len(p.in) {
		return false
	}
	switch c := p.in[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		p.i++
		p.out = append(p.out, '[')
		p.space()
		if p.i < len(p.in) && p.in[p.i] == ']' {
			p.i++
			p.out = append(p.out, ']')
			return true
		}
		for {
			if !p.value(depth + 1) {
				return false
			}
			p.space()
			if p.i >= len(p.in) {
				return false
			}
			switch p.in[p.i] {
			case ',':
				p.i++
				p.out = append(p.out, ',')
			case ']':
				p.i++
				p.out = append(p.out, ']')
				return true
			default:
				return false
			}
		}
	case c == '"':
		s, ok := p.str()
		if !ok {
			return false
		}
		p.out = AppendJSONString(p.out, s)
		return true
	case c == '-' || (c >= '0' && c <= '9'):
		return p.integer()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	}
	return false
}

// integer copies -?(0|[1-9][0-9]*), "-0" as "0"; a fraction or an exponent
// is left to Canonicalize (which refuses it).
func (p *fastCanon) integer() bool {
	start := p.i
	if p.in[p.i] == '-' {
		p.i++
	}
	if p.i >= len(p.in) || p.in[p.i] < '0' || p.in[p.i] > '9' {
		return false
	}
	if p.in[p.i] == '0' {
		p.i++
	} else {
		for p.i < len(p.in) && p.in[p.i] >= '0' && p.in[p.i] <= '9' {
			p.i++
		}
	}
	if p.i < len(p.in) {
		switch p.in[p.i] {
		case '.', 'e', 'E':
			return false
		}
	}
	if n := p.in[start:p.i]; string(n) == "-0" {
		p.out = append(p.out, '0')
	} else {
		p.out = append(p.out, n...)
	}
	return true
}

// str reads a string at p.i (its opening quote) and returns its value.
func (p *fastCanon) str() (string, bool) {
	p.i++
	start := p.i
	for p.i < len(p.in) {
		c := p.in[p.i]
		switch {
		case c == '"':
			s := string(p.in[start:p.i])
			p.i++
			return s, true
		case c == '\\':
			return p.escapedStr(start)
		case c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

func (p *fastCanon) escapedStr(start int) (string, bool) {
	b := append([]byte(nil), p.in[start:p.i]...)
	for p.i < len(p.in) {
		c := p.in[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b = append(b, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.in) {
			return "", false
		}
		switch e := p.in[p.i+1]; e {
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
			if p.i+6 > len(p.in) {
				return "", false
			}
			var r rune
			for _, h := range p.in[p.i+2 : p.i+6] {
				switch {
				case h >= '0' && h <= '9':
					r = r<<4 | rune(h-'0')
				case h >= 'a' && h <= 'f':
					r = r<<4 | rune(h-'a'+10)
				case h >= 'A' && h <= 'F':
					r = r<<4 | rune(h-'A'+10)
				default:
					return "", false
				}
			}
			if r >= 0xD800 && r < 0xE000 { // surrogates: Canonicalize decides
				return "", false
			}
			b = utf8.AppendRune(b, r)
			p.i += 6
			continue
		default:
			return "", false
		}
		p.i += 2
	}
	return "", false
}

type fastMember struct {
	key        string
	start, end int // the value's bytes in the scratch copy
}

func (p *fastCanon) object(depth int) bool {
	p.i++
	base := len(p.out) // the members are written here first, then ordered
	var members []fastMember
	p.space()
	if p.i < len(p.in) && p.in[p.i] == '}' {
		p.i++
		p.out = append(p.out, '{', '}')
		return true
	}
	for {
		p.space()
		if p.i >= len(p.in) || p.in[p.i] != '"' {
			return false
		}
		key, ok := p.str()
		if !ok {
			return false
		}
		p.space()
		if p.i >= len(p.in) || p.in[p.i] != ':' {
			return false
		}
		p.i++
		start := len(p.out)
		if !p.value(depth + 1) {
			return false
		}
		members = append(members, fastMember{key, start - base, len(p.out) - base})
		p.space()
		if p.i >= len(p.in) {
			return false
		}
		if p.in[p.i] == '}' {
			p.i++
			break
		}
		if p.in[p.i] != ',' {
			return false
		}
		p.i++
	}
	slices.SortStableFunc(members, func(a, b fastMember) int {
		switch {
		case lessUTF16(a.key, b.key):
			return -1
		case lessUTF16(b.key, a.key):
			return 1
		}
		return 0
	})
	for k := 1; k < len(members); k++ {
		if members[k].key == members[k-1].key {
			return false // a duplicate key: Canonicalize refuses it
		}
	}
	vals := append([]byte(nil), p.out[base:]...)
	p.out = append(p.out[:base], '{')
	for k, m := range members {
		if k > 0 {
			p.out = append(p.out, ',')
		}
		p.out = AppendJSONString(p.out, m.key)
		p.out = append(p.out, ':')
		p.out = append(p.out, vals[m.start:m.end]...)
	}
	p.out = append(p.out, '}')
	return true
}
