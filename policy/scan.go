package policy

import (
	"bytes"
	"encoding/json"
)

// The scanners below walk JSON that encoding/json has already validated
// (parseAgentRequest validates the whole body first), so that the messages of
// a request are split and their roles read in one cheap pass instead of one
// full decode per message.

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at i.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		i++
		for i < len(b) {
			switch b[i] {
			case '\\':
				i += 2
				continue
			case '"':
				return i + 1
			}
			i++
		}
		return i
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipValue(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // a number, true, false or null
		for i < len(b) && !bytes.ContainsRune([]byte(",]} \t\n\r"), rune(b[i])) {
			i++
		}
		return i
	}
}

// arrayElements splits a valid JSON array into its elements.
func arrayElements(b []byte) []json.RawMessage {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil
	}
	var out []json.RawMessage
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != ']' {
		end := skipValue(b, i)
		out = append(out, b[i:end:end])
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return out
}

// objectField returns the raw value of key in a valid JSON object (the last
// one if repeated, as encoding/json decodes it), or nil.
func objectField(b []byte, key string) json.RawMessage {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	var found json.RawMessage
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		kend := skipValue(b, i)
		k := b[i:kend]
		i = skipSpace(b, kend)
		if i < len(b) && b[i] == ':' {
			i = skipSpace(b, i+1)
		}
		vend := skipValue(b, i)
		if keyIs(k, key) {
			found = b[i:vend:vend]
		}
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return found
}

// keyIs compares a raw JSON string with key, decoding it only when it holds
// an escape. Like encoding/json, it matches exactly first; the meter matches
// keys exactly, so the sidecar does too.
func keyIs(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return len(raw) == len(key)+2 && string(raw[1:len(raw)-1]) == key
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == key
}

// objectFields splits a valid JSON object into its fields (a repeated key
// keeps its last value, as encoding/json decodes it); nil if b is not an
// object.
func objectFields(b []byte) map[string]json.RawMessage {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	out := map[string]json.RawMessage{}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		kend := skipValue(b, i)
		k := b[i:kend]
		i = skipSpace(b, kend)
		if i < len(b) && b[i] == ':' {
			i = skipSpace(b, i+1)
		}
		vend := skipValue(b, i)
		var key string
		if bytes.IndexByte(k, '\\') < 0 {
			key = string(k[1 : len(k)-1])
		} else if json.Unmarshal(k, &key) != nil {
			return nil
		}
		out[key] = b[i:vend:vend]
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return out
}
