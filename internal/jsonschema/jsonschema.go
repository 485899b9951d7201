// Package jsonschema checks JSON values against the record schemas of
// docs/schemas (FORMAT.md §7.6), in the subset of JSON Schema (draft 2020-12)
// those schemas use: type, const, enum, pattern, minLength, minimum, maximum,
// minItems, maxItems, items, properties, required, additionalProperties false
// and $ref (within a file or to another file's $defs); $schema, $id, title,
// $comment and $defs carry no rule.
//
// A schema using any other keyword is refused when the set is loaded, so a rule
// written in a schema is never silently ignored.
package jsonschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Set is a loaded set of schema files, addressed by file name.
type Set struct {
	files    map[string]map[string]any
	patterns map[string]*regexp.Regexp
}

var keywords = []string{"$schema", "$id", "title", "$comment", "$defs", "type", "const", "enum", "pattern", "minLength",
	"minimum", "maximum", "minItems", "maxItems", "items", "properties", "required", "additionalProperties", "$ref"}

// Load reads every *.json file at the top of fsys as a schema. It fails on a
// file that is not JSON, a keyword outside the subset, a pattern that does not
// compile or a $ref that names nothing.
func Load(fsys fs.FS) (*Set, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	s := &Set{files: map[string]map[string]any{}, patterns: map[string]*regexp.Regexp{}}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("schema %s: %v", name, err)
		}
		s.files[name] = v
	}
	for _, name := range names {
		if err := s.prepare(name, s.files[name], ""); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// prepare checks one schema object (and everything under it) for keywords
// and compiles its patterns.
func (s *Set) prepare(file string, sch map[string]any, at string) error {
	for k, v := range sch {
		if !slices.Contains(keywords, k) {
			return fmt.Errorf("schema %s%s: keyword %q is not in the supported subset", file, at, k)
		}
		switch k {
		case "pattern":
			p, _ := v.(string)
			re, err := regexp.Compile(p)
			if err != nil {
				return fmt.Errorf("schema %s%s: pattern: %v", file, at, err)
			}
			s.patterns[p] = re
		case "$ref":
			if _, _, err := s.resolve(file, v.(string)); err != nil {
				return err
			}
		case "items":
			if sub, ok := v.(map[string]any); ok {
				if err := s.prepare(file, sub, at+"/items"); err != nil {
					return err
				}
			}
		case "properties", "$defs":
			m, _ := v.(map[string]any)
			for name, x := range m {
				sub, ok := x.(map[string]any)
				if !ok {
					return fmt.Errorf("schema %s%s/%s/%s is not an object", file, at, k, name)
				}
				if err := s.prepare(file, sub, at+"/"+k+"/"+name); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// resolve follows a $ref written in file.
func (s *Set) resolve(file, ref string) (string, map[string]any, error) {
	f, frag, _ := strings.Cut(ref, "#")
	if f == "" {
		f = file
	}
	f = path.Clean(f)
	target, ok := any(s.files[f]).(map[string]any)
	if !ok || target == nil {
		return "", nil, fmt.Errorf("schema %s: $ref %q names no loaded file", file, ref)
	}
	for _, p := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if p == "" {
			continue
		}
		next, ok := target[p].(map[string]any)
		if !ok {
			return "", nil, fmt.Errorf("schema %s: $ref %q names nothing", file, ref)
		}
		target = next
	}
	return f, target, nil
}

// Has reports whether the set holds a schema file of that name.
func (s *Set) Has(file string) bool { _, ok := s.files[file]; return ok }

// Validate checks v, a value as Decode returns it, against the schema file
// named file. The error names the first path that breaks a rule
// ("audit.rows[2].outcome: ...").
func (s *Set) Validate(file string, v any) error {
	root, ok := s.files[file]
	if !ok {
		return fmt.Errorf("no schema %s", file)
	}
	return s.check(file, root, v, "")
}

// Decode reads one JSON value with numbers kept as json.Number, the form
// Validate expects.
func Decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the JSON value")
	}
	return v, nil
}

func (s *Set) check(file string, sch map[string]any, v any, at string) error {
	if ref, ok := sch["$ref"].(string); ok {
		f, target, err := s.resolve(file, ref)
		if err != nil {
			return err
		}
		if err := s.check(f, target, v, at); err != nil {
			return err
		}
	}
	name := at
	if name == "" {
		name = "(record)"
	}
	if c, ok := sch["const"]; ok && !equal(c, v) {
		return fmt.Errorf("%s: %s is not %s", name, show(v), show(c))
	}
	if e, ok := sch["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return equal(x, v) }) {
		return fmt.Errorf("%s: %s is not one of %s", name, show(v), show(e))
	}
	if t, ok := sch["type"].(string); ok && !hasType(t, v) {
		return fmt.Errorf("%s: %s is not of type %s", name, show(v), t)
	}
	if str, ok := v.(string); ok {
		if p, ok := sch["pattern"].(string); ok && !s.patterns[p].MatchString(str) {
			return fmt.Errorf("%s: %s does not match %s", name, show(v), p)
		}
		if m, ok := sch["minLength"].(float64); ok && float64(utf8.RuneCountInString(str)) < m {
			return fmt.Errorf("%s: shorter than %v characters", name, m)
		}
	}
	if n, ok := v.(json.Number); ok {
		if m, ok := sch["minimum"].(float64); ok && compare(n, m) < 0 {
			return fmt.Errorf("%s: %s is below the minimum %v", name, show(n), m)
		}
		if m, ok := sch["maximum"].(float64); ok && compare(n, m) > 0 {
			return fmt.Errorf("%s: %s is above the maximum %v", name, show(n), m)
		}
	}
	if arr, ok := v.([]any); ok {
		if m, ok := sch["minItems"].(float64); ok && float64(len(arr)) < m {
			return fmt.Errorf("%s: fewer than %v items", name, m)
		}
		if m, ok := sch["maxItems"].(float64); ok && float64(len(arr)) > m {
			return fmt.Errorf("%s: more than %v items", name, m)
		}
		if it, ok := sch["items"].(map[string]any); ok {
			for i, x := range arr {
				if err := s.check(file, it, x, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		return s.checkObject(file, sch, obj, at, name)
	}
	return nil
}

func (s *Set) checkObject(file string, sch map[string]any, obj map[string]any, at, name string) error {
	req, _ := sch["required"].([]any)
	for _, r := range req {
		if _, ok := obj[r.(string)]; !ok {
			return fmt.Errorf("%s: member %q is required", name, r)
		}
	}
	props, _ := sch["properties"].(map[string]any)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first error is the same in every run
	for _, k := range keys {
		sub := k
		if at != "" {
			sub = at + "." + k
		}
		ps, ok := props[k].(map[string]any)
		if !ok {
			if sch["additionalProperties"] == false {
				return fmt.Errorf("%s: member %q is not in the schema", name, k)
			}
			continue
		}
		if err := s.check(file, ps, obj[k], sub); err != nil {
			return err
		}
	}
	return nil
}

func hasType(t string, v any) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		return ok && !strings.ContainsAny(string(n), ".eE")
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	}
	return false
}

func equal(a, b any) bool {
	// Schema constants are decoded as float64, values as json.Number.
	if n, ok := b.(json.Number); ok {
		f, ok := a.(float64)
		return ok && compare(n, f) == 0
	}
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return bytes.Equal(ab, bb)
}

// compare orders a JSON number against a schema's bound without ever
// converting a long digit string (a hostile record can hold a million
// digits): an integer of more than 24 digits is beyond every bound a schema
// can write exactly, so its sign decides.
func compare(n json.Number, bound float64) int {
	s := string(n)
	if strings.ContainsAny(s, ".eE") {
		f, _ := strconv.ParseFloat(s, 64) // overflow gives ±Inf, which still orders
		return big.NewFloat(f).Cmp(big.NewFloat(bound))
	}
	if len(strings.TrimPrefix(s, "-")) > 24 {
		if strings.HasPrefix(s, "-") {
			return -1
		}
		return 1
	}
	x, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return 1
	}
	return new(big.Float).SetInt(x).Cmp(big.NewFloat(bound))
}

// show renders a value for an error message, cut to a readable length.
func show(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}
