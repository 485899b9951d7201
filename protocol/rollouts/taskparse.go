package rollouts

import (
	"encoding/json"
	"unicode/utf8"
)

// parseItem decodes one line of tasks.jsonl in a single pass, without
// reflection, when the line has the plain form task files have: one object
// whose members are Item's fields, each once; strings (with any escape but a
// UTF-16 surrogate), lists of strings, and kwargs objects whose values are
// strings, numbers, booleans or lists of those. It reports false for anything
// else, valid or not (null, nesting, another escape, a duplicate or unknown
// name, trailing data, invalid UTF-8 or JSON), and the caller decodes that
// line with strictjson, which gives the value or the error it always gave.
// When it reports true the Item is the one strictjson.Decode gives
// (FuzzParseItem checks the two against each other).
func parseItem(line []byte) (Item, bool) {
	it, ok := parsePlainItem(line)
	if !ok {
		return Item{}, false
	}
	return it, true
}

func parsePlainItem(line []byte) (Item, bool) {
	p := itemParser{b: line}
	for _, c := range line {
		if c >= utf8.RuneSelf {
			if !utf8.Valid(line) {
				return Item{}, false
			}
			break
		}
	}
	var it Item
	if !p.byte('{') {
		return it, false
	}
	var seen uint8
	for empty := p.byte('}'); !empty; {
		name, ok := p.str()
		if !ok || !p.byte(':') {
			return it, false
		}
		var bit uint8
		switch name {
		case "task_id":
			bit = 1
			it.TaskID, ok = p.str()
		case "kind":
			bit = 2
			it.Kind, ok = p.str()
		case "prompt":
			bit = 4
			it.Prompt, ok = p.str()
		case "answer":
			bit = 8
			it.Answer, ok = p.str()
		case "instruction_id_list":
			bit = 16
			it.InstructionIDs, ok = list(&p, p.str) // strings
		case "kwargs":
			bit = 32
			it.Kwargs, ok = list(&p, p.object) // objects of scalars and lists of scalars
		default:
			return it, false
		}
		if !ok || seen&bit != 0 {
			return it, false
		}
		seen |= bit
		if p.byte('}') {
			break
		}
		if !p.byte(',') {
			return it, false
		}
	}
	p.space()
	return it, p.i == len(p.b)
}

type itemParser struct {
	b []byte
	i int
}

func (p *itemParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte consumes c (after whitespace) if it is next.
func (p *itemParser) byte(c byte) bool {
	p.space()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *itemParser) peek() byte {
	p.space()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// str reads a string.
func (p *itemParser) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	// The common case: no escape.
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// escaped reads the rest of a string that has escapes, from start.
func (p *itemParser) escaped(start int) (string, bool) {
	out := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if p.i+4 > len(p.b) {
				return "", false
			}
			var r rune
			for _, h := range p.b[p.i : p.i+4] {
				switch {
				case '0' <= h && h <= '9':
					r = r<<4 | rune(h-'0')
				case 'a' <= h && h <= 'f':
					r = r<<4 | rune(h-'a'+10)
				case 'A' <= h && h <= 'F':
					r = r<<4 | rune(h-'A'+10)
				default:
					return "", false
				}
			}
			if 0xD800 <= r && r < 0xE000 {
				return "", false // surrogates: left to encoding/json
			}
			out = utf8.AppendRune(out, r)
			p.i += 4
		default:
			return "", false
		}
	}
	return "", false
}

// list reads a JSON array whose elements elem reads (an empty array is a
// non-nil empty slice).
func list[T any](p *itemParser, elem func() (T, bool)) ([]T, bool) {
	if !p.byte('[') {
		return nil, false
	}
	out := []T{}
	if p.byte(']') {
		return out, true
	}
	for {
		v, ok := elem()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if p.byte(']') {
			return out, true
		}
		if !p.byte(',') {
			return nil, false
		}
	}
}

func (p *itemParser) object() (map[string]any, bool) {
	if !p.byte('{') {
		return nil, false
	}
	m := map[string]any{}
	if p.byte('}') {
		return m, true
	}
	for {
		k, ok := p.str()
		if !ok || !p.byte(':') {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		var v any
		if p.peek() == '[' {
			p.byte('[')
			list := []any{}
			if !p.byte(']') {
				for {
					x, ok := p.scalar()
					if !ok {
						return nil, false
					}
					list = append(list, x)
					if p.byte(']') {
						break
					}
					if !p.byte(',') {
						return nil, false
					}
				}
			}
			v = list
		} else if v, ok = p.scalar(); !ok {
			return nil, false
		}
		m[k] = v
		if p.byte('}') {
			return m, true
		}
		if !p.byte(',') {
			return nil, false
		}
	}
}

// scalar reads a string, a number (as json.Number) or a boolean.
func (p *itemParser) scalar() (any, bool) {
	switch c := p.peek(); {
	case c == '"':
		return p.str()
	case c == 't' || c == 'f':
		for _, w := range []string{"true", "false"} {
			if len(p.b)-p.i >= len(w) && string(p.b[p.i:p.i+len(w)]) == w {
				p.i += len(w)
				if p.i < len(p.b) && !delimiter(p.b[p.i]) {
					return nil, false
				}
				return w == "true", true
			}
		}
		return nil, false
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	}
	return nil, false
}

func delimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ']', '}':
		return true
	}
	return false
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *itemParser) number() (any, bool) {
	start, b := p.i, p.b
	digits := func() int {
		n := 0
		for p.i < len(b) && '0' <= b[p.i] && b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(b) && b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(b) && b[p.i] == '0':
		p.i++
	case digits() == 0:
		return nil, false
	}
	if p.i < len(b) && b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if p.i < len(b) && (b[p.i] == 'e' || b[p.i] == 'E') {
		p.i++
		if p.i < len(b) && (b[p.i] == '+' || b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	if p.i < len(b) && !delimiter(b[p.i]) {
		return nil, false
	}
	return json.Number(b[start:p.i]), true
}
