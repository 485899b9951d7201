package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/feval/feval/internal/strictjson"
)

// JSONError is a JSON document that is not strict JSON or does not decode
// into its schema. Line is the 1-based line of the offending byte when known,
// else 0.
type JSONError struct {
	Line   int
	Schema bool // false: not strict JSON; true: valid JSON that breaks the schema
	Msg    string
}

func (e *JSONError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// strictJSONDepth bounds nesting in every JSON document the gates read.
const strictJSONDepth = 16

// decodeStrict decodes data into v under the strict JSON profile shared by
// the gates' JSON files:
//
//   - exactly one JSON value, valid UTF-8, nothing after it but whitespace;
//   - object keys are lower-case ASCII snake_case ([a-z][a-z0-9_]*) and
//     unique within their object;
//   - no null, and numbers are integers that fit in 64 bits (no fraction,
//     no exponent);
//   - nesting at most strictJSONDepth;
//   - every key is exactly the name of a field of v (strictjson.Decode, the
//     decoder of every feval record: names match case-sensitively and unknown
//     fields are rejected).
func decodeStrict(data []byte, v any) *JSONError {
	if !utf8.Valid(data) {
		return &JSONError{Msg: "not valid UTF-8"}
	}
	if err := checkStrictJSON(data); err != nil {
		return err
	}
	if err := strictjson.Decode(data, v); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			line := 0
			if se.Offset > 0 {
				line = lineAt(data, se.Offset)
			}
			msg := se.Error()
			if se.Path != "" {
				msg = "field " + msg
			}
			return &JSONError{Schema: true, Line: line, Msg: msg}
		}
		return &JSONError{Schema: true, Msg: err.Error()}
	}
	return nil
}

// checkStrictJSON checks the strict profile without a schema.
func checkStrictJSON(data []byte) *JSONError {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object    bool
		expectKey bool
		keys      map[string]bool
	}
	var stack []*frame
	fail := func(format string, args ...any) *JSONError {
		return &JSONError{Line: lineAt(data, dec.InputOffset()), Msg: fmt.Sprintf(format, args...)}
	}
	// afterValue flips an enclosing object back to expecting a key.
	afterValue := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expectKey = true
		}
	}
	started := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			switch {
			case !started:
				return &JSONError{Line: 1, Msg: "empty document"}
			case len(stack) > 0:
				return &JSONError{Line: lineAt(data, int64(len(data))), Msg: "unexpected end of JSON"}
			}
			return nil
		}
		if err != nil {
			return fail("invalid JSON: %v", err)
		}
		if started && len(stack) == 0 {
			return fail("data after the JSON value")
		}
		started = true
		top := (*frame)(nil)
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		if top != nil && top.object && top.expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				afterValue()
				continue
			}
			key, ok := tok.(string)
			if !ok {
				return fail("object key expected")
			}
			if !isSnakeKey(key) {
				return fail("key %q is not lower-case snake_case ASCII", key)
			}
			if top.keys[key] {
				return fail("duplicate key %q", key)
			}
			top.keys[key] = true
			top.expectKey = false
			continue
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= strictJSONDepth {
					return fail("nesting deeper than %d", strictJSONDepth)
				}
				stack = append(stack, &frame{object: t == '{', expectKey: t == '{', keys: map[string]bool{}})
			case '}', ']':
				stack = stack[:len(stack)-1]
				afterValue()
			}
		case nil:
			return fail("null is not allowed")
		case json.Number:
			if _, err := strconv.ParseInt(t.String(), 10, 64); err != nil {
				return fail("number %s is not a 64-bit integer", t)
			}
			afterValue()
		default:
			afterValue()
		}
	}
}

// isSnakeKey reports whether k matches [a-z][a-z0-9_]*.
func isSnakeKey(k string) bool {
	if k == "" || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// lineAt returns the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}
