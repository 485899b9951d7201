package meter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"testing"
	"unicode/utf8"

	"github.com/feval/feval/bundle"
)

// The reference canonicaliser: the first implementation, on encoding/json's
// tokenizer. The scanner in canonical.go must agree with it on every input.

func canonicalReference(raw []byte) ([]byte, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := refValue(dec, &buf, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return buf.Bytes(), nil
}

func refValue(dec *json.Decoder, w *bytes.Buffer, depth int) error {
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
			return refObject(dec, w, depth)
		case '[':
			w.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					w.WriteByte(',')
				}
				if err := refValue(dec, w, depth+1); err != nil {
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

func refObject(dec *json.Decoder, w *bytes.Buffer, depth int) error {
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
		if err := refValue(dec, &v, depth+1); err != nil {
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

// FuzzCanonicalMatchesReference: the scanner and the reference accept the same
// inputs and give the same bytes.
func FuzzCanonicalMatchesReference(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.50,-0,1e3,"x\u00e9\ud83d\ude00\n"],"b":{"c":null,"d":true}}`, `"\ud800"`, `[ ]`, `{"a":1,"a":2}`, `01`, `1.`, `-`, `"\u12"`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := canonicalReference(b)
		got, gerr := CanonicalRequest(b)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q:\n scanner   %q %v\n reference %q %v", b, got, gerr, want, werr)
		}
	})
}

func writeString(w *bytes.Buffer, s string) { w.Write(bundle.AppendJSONString(nil, s)) }

// BenchmarkParseChatRequest is the meter's whole per-request parsing cost.
func BenchmarkParseChatRequest(b *testing.B) {
	body := []byte(`{"max_tokens":64,"messages":[{"content":"Summarise the parser module in one paragraph.","role":"user"}],"model":"gpt-oss-120b","temperature":0.2}`)
	for b.Loop() {
		if _, err := parseChatRequest(body, 4096); err != nil {
			b.Fatal(err)
		}
	}
}
