package jsonschema

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/feval/feval/docs/schemas"
)

func set(t *testing.T, files map[string]string) (*Set, error) {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, text := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(text)}
	}
	return Load(fsys)
}

// TestLoadRefuses: a schema is refused at load when it uses a keyword outside
// the subset (a rule that would be ignored), a bad pattern or a dangling $ref.
func TestLoadRefuses(t *testing.T) {
	for name, text := range map[string]string{
		"unknown keyword": `{"type": "object", "properties": {"a": {"type": "string", "format": "email"}}}`,
		"bad pattern":     `{"type": "string", "pattern": "("}`,
		"dangling $ref":   `{"$ref": "other.json#/$defs/x"}`,
		"missing $def":    `{"$ref": "#/$defs/x", "$defs": {}}`,
	} {
		if _, err := set(t, map[string]string{"s.json": text}); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

// TestValidate: each keyword of the subset refuses what it forbids and
// accepts what it allows, with the path of the first failure.
func TestValidate(t *testing.T) {
	s, err := set(t, map[string]string{
		"defs.json": `{"$defs": {"hex": {"type": "string", "pattern": "^[0-9a-f]+$"}}}`,
		"s.json": `{"type": "object", "additionalProperties": false, "required": ["n", "h"],
			"properties": {
				"n": {"type": "integer", "minimum": 0, "maximum": 10},
				"h": {"$ref": "defs.json#/$defs/hex"},
				"e": {"enum": ["a", "b"]},
				"c": {"const": 3},
				"s": {"type": "string", "minLength": 2},
				"l": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "boolean"}},
				"o": {"type": "object", "properties": {"x": {"type": "integer"}}}
			}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string]string{
		`{"n": 3, "h": "ab"}`:                               "",
		`{"n": 3, "h": "ab", "e": "b", "c": 3, "s": "xy"}`:  "",
		`{"n": 3, "h": "ab", "l": [true], "o": {"y": "z"}}`: "",
		`{"n": 3}`:                                      `member "h" is required`,
		`{"n": 3, "h": "AB"}`:                           "h: \"AB\" does not match",
		`{"n": -1, "h": "ab"}`:                          "n: -1 is below the minimum",
		`{"n": 11, "h": "ab"}`:                          "n: 11 is above the maximum",
		`{"n": 1.5, "h": "ab"}`:                         "n: 1.5 is not of type integer",
		`{"n": null, "h": "ab"}`:                        "n: null is not of type integer",
		`{"n": 1, "h": "ab", "x": 1}`:                   `member "x" is not in the schema`,
		`{"n": 1, "h": "ab", "e": "c"}`:                 `e: "c" is not one of`,
		`{"n": 1, "h": "ab", "c": 4}`:                   "c: 4 is not 3",
		`{"n": 1, "h": "ab", "s": "é"}`:                 "s: shorter than 2",
		`{"n": 1, "h": "ab", "l": []}`:                  "l: fewer than 1 items",
		`{"n": 1, "h": "ab", "l": [true, true, false]}`: "l: more than 2 items",
		`{"n": 1, "h": "ab", "l": [true, 1]}`:           "l[1]: 1 is not of type boolean",
		`{"n": 1, "h": "ab", "o": {"x": "1"}}`:          `o.x: "1" is not of type integer`,
		`[]`:                                            "(record): [] is not of type object",
	} {
		v, err := Decode([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		err = s.Validate("s.json", v)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", doc, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: error %v, want one containing %q", doc, err, want)
		}
	}
}

// TestDocsSchemasLoad: every schema of docs/schemas is in the subset.
func TestDocsSchemasLoad(t *testing.T) {
	s, err := Load(schemas.FS)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"verdict-head.schema.json", "verdict-rollouts.schema.json", "verdict-scenarios.schema.json", "verdict-optimizer.schema.json"} {
		if !s.Has(name) {
			t.Errorf("%s is not embedded", name)
		}
	}
}

// FuzzValidate: no document makes Decode or Validate panic or hang, against
// every verdict schema.
func FuzzValidate(f *testing.F) {
	s, err := Load(schemas.FS)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{`{}`, `{"protocol":"rollouts","status":"passed","sequence":1}`, `[1,2,{"a":null}]`,
		`{"inputs":{"reveal":"sha256:00"},"traces":null,"audit":{"rows":[{"claimed":"3/2"}]}}`, `"x"`, `1e999`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Decode(b)
		if err != nil {
			return
		}
		for _, name := range []string{"verdict-head.schema.json", "verdict-rollouts.schema.json", "verdict-scenarios.schema.json", "verdict-optimizer.schema.json"} {
			_ = s.Validate(name, v)
		}
	})
}
