package conformance_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/conformance"
	"github.com/feval/feval/protocol"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

var schemaDir = filepath.Join("..", "..", "docs", "schemas")

// schemas validates JSON values against the schemas of docs/schemas, in the
// subset of JSON Schema they use: type, const, enum, pattern, minLength,
// minimum, minItems, maxItems, items, properties, required,
// additionalProperties false and $ref (within a file or to another file's
// $defs).
type schemas struct {
	files map[string]map[string]any
}

func loadSchemas(t *testing.T) *schemas {
	t.Helper()
	ents, err := os.ReadDir(schemaDir)
	if err != nil {
		t.Fatal(err)
	}
	s := &schemas{files: map[string]map[string]any{}}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(schemaDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		s.files[e.Name()] = v
	}
	return s
}

func (s *schemas) validate(file string, v any) error {
	root, ok := s.files[file]
	if !ok {
		return fmt.Errorf("no schema %s", file)
	}
	return s.check(file, root, v, "")
}

var knownKeywords = []string{"$schema", "$id", "title", "$defs", "type", "const", "enum", "pattern", "minLength",
	"minimum", "minItems", "maxItems", "items", "properties", "required", "additionalProperties", "$ref"}

func (s *schemas) check(file string, sch map[string]any, v any, path string) error {
	for k := range sch {
		if !slices.Contains(knownKeywords, k) {
			return fmt.Errorf("%s: schema keyword %q is not supported by this check", file, k)
		}
	}
	if ref, ok := sch["$ref"].(string); ok {
		f, frag, _ := strings.Cut(ref, "#")
		if f == "" {
			f = file
		}
		target := any(s.files[f])
		for _, p := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			target = target.(map[string]any)[p]
		}
		return s.check(f, target.(map[string]any), v, path)
	}
	if c, ok := sch["const"]; ok && !jsonEqual(c, v) {
		return fmt.Errorf("%s: %v is not %v", path, v, c)
	}
	if e, ok := sch["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return jsonEqual(x, v) }) {
		return fmt.Errorf("%s: %v is not one of %v", path, v, e)
	}
	switch sch["type"] {
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return fmt.Errorf("%s: not an object", path)
		}
	case "array":
		if _, ok := v.([]any); !ok {
			return fmt.Errorf("%s: not an array", path)
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: not a string", path)
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok || strings.ContainsAny(string(n), ".eE") {
			return fmt.Errorf("%s: not an integer", path)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: not a boolean", path)
		}
	}
	if p, ok := sch["pattern"].(string); ok {
		if str, _ := v.(string); !regexp.MustCompile(p).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", path, str, p)
		}
	}
	if m, ok := sch["minLength"].(float64); ok {
		if str, _ := v.(string); len([]rune(str)) < int(m) {
			return fmt.Errorf("%s: shorter than %v", path, m)
		}
	}
	if m, ok := sch["minimum"].(float64); ok {
		num, isNum := v.(json.Number)
		if !isNum {
			return fmt.Errorf("%s: not a number", path)
		}
		var n int64
		fmt.Sscan(string(num), &n)
		if n < int64(m) {
			return fmt.Errorf("%s: %d is below %v", path, n, m)
		}
	}
	if arr, ok := v.([]any); ok {
		if m, ok := sch["minItems"].(float64); ok && len(arr) < int(m) {
			return fmt.Errorf("%s: fewer than %v items", path, m)
		}
		if m, ok := sch["maxItems"].(float64); ok && len(arr) > int(m) {
			return fmt.Errorf("%s: more than %v items", path, m)
		}
		if it, ok := sch["items"].(map[string]any); ok {
			for i, x := range arr {
				if err := s.check(file, it, x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := sch["properties"].(map[string]any)
		for _, r := range asStrings(sch["required"]) {
			if _, ok := obj[r]; !ok {
				return fmt.Errorf("%s: member %q is required", path, r)
			}
		}
		for k, x := range obj {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if sch["additionalProperties"] == false {
					return fmt.Errorf("%s: member %q is not in the schema", path, k)
				}
				continue
			}
			if err := s.check(file, ps, x, path+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

func asStrings(v any) []string {
	var out []string
	xs, _ := v.([]any)
	for _, x := range xs {
		out = append(out, x.(string))
	}
	return out
}

func jsonEqual(a, b any) bool {
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return bytes.Equal(ab, bb)
}

func decodeNumbers(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// TestSchemas: every record, signature bundle, statement and rollouts file in
// the good vectors matches its schema in docs/schemas, and the schemas refuse
// what the records must not hold.
func TestSchemas(t *testing.T) {
	ctx := context.Background()
	s := loadSchemas(t)
	kindSchema := map[string]string{"task": "task.schema.json", "round": "round.schema.json", "commitment": "commitment.schema.json",
		"reveal": "reveal.schema.json", "submission": "pack.schema.json", "verdict": "verdict-rollouts.schema.json"}
	checked := map[string]int{}
	for _, v := range vectors(t) {
		if !strings.HasPrefix(v.Name, "rollouts-") && v.Name != "sampling-all-rows" {
			continue
		}
		l, err := cas.OpenLayout(filepath.Join(vectorsDir, v.Name, conformance.StoreDir))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range l.Manifests() {
			mb, err := cas.ReadAll(ctx, l, d, cas.MaxManifestSize)
			if err != nil {
				t.Fatal(err)
			}
			var m ocispec.Manifest
			if err := json.Unmarshal(mb, &m); err != nil {
				t.Fatal(err)
			}
			layer, err := cas.ReadAll(ctx, l, m.Layers[0], bundle.MaxRecordSize)
			if err != nil {
				t.Fatal(err)
			}
			check := func(schema string, b []byte) {
				t.Helper()
				val, err := decodeNumbers(b)
				if err != nil {
					t.Fatalf("%s %s: %v", v.Name, schema, err)
				}
				if err := s.validate(schema, val); err != nil {
					t.Errorf("%s: %s of %s: %v", v.Name, schema, d.Digest, err)
				}
				checked[schema]++
			}
			if m.ArtifactType == bundle.MediaTypeSigstoreBundle {
				check("signature-bundle.schema.json", layer)
				var sb struct {
					DSSEEnvelope struct{ Payload string } `json:"dsseEnvelope"`
				}
				if err := json.Unmarshal(layer, &sb); err != nil {
					t.Fatal(err)
				}
				p, err := base64.StdEncoding.DecodeString(sb.DSSEEnvelope.Payload)
				if err != nil {
					t.Fatal(err)
				}
				check("signature-statement.schema.json", p)
				continue
			}
			kind := bundle.KindOf(m.ArtifactType)
			if schema, ok := kindSchema[kind]; ok {
				check(schema, layer)
			}
			if kind != "task" && kind != "submission" {
				continue
			}
			art, err := bundle.Load(ctx, l, d)
			if err != nil {
				t.Fatal(err)
			}
			fsys, err := protocol.LoadSubmissionFS(ctx, l, art) // a task's tree too
			if err != nil {
				t.Fatal(err)
			}
			file := func(name, schema string, perLine bool) {
				b, err := fs.ReadFile(fsys, name)
				if err != nil {
					t.Fatal(err)
				}
				if !perLine {
					check(schema, b)
					return
				}
				for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
					check(schema, []byte(line))
				}
			}
			if kind == "task" {
				file("task.json", "rollouts-task.schema.json", false)
				file("tasks.jsonl", "rollouts-item.schema.json", true)
			} else {
				file("submission.json", "rollouts-submission.schema.json", false)
				file("rows.jsonl", "rollouts-row.schema.json", true)
			}
		}
	}
	for _, sc := range []string{"task.schema.json", "round.schema.json", "commitment.schema.json", "reveal.schema.json", "pack.schema.json",
		"verdict-rollouts.schema.json", "signature-bundle.schema.json", "signature-statement.schema.json",
		"rollouts-task.schema.json", "rollouts-item.schema.json", "rollouts-submission.schema.json", "rollouts-row.schema.json"} {
		if checked[sc] == 0 {
			t.Errorf("no record checked against %s", sc)
		}
	}

	// The schemas refuse what records must not hold.
	for name, c := range map[string]struct{ schema, doc string }{
		"unknown member":       {"commitment.schema.json", `{"commitment":"sha256:` + strings.Repeat("0", 64) + `","miner":"` + strings.Repeat("a", 64) + `","round":"sha256:` + strings.Repeat("1", 64) + `","x":1}`},
		"upper-case hex":       {"reveal.schema.json", `{"commitment":"sha256:` + strings.Repeat("0", 64) + `","miner":"` + strings.Repeat("A", 64) + `","round":"sha256:` + strings.Repeat("1", 64) + `","salt":"` + strings.Repeat("0", 64) + `","submission":"sha256:` + strings.Repeat("2", 64) + `"}`},
		"leading zero":         {"rollouts-row.schema.json", `{"response":"","reward_claimed":"01/2","task_id":"a"}`},
		"reward above one":     {"rollouts-row.schema.json", `{"response":"","reward_claimed":"2","task_id":"a"}`},
		"missing audit member": {"verdict-rollouts.schema.json", `{"checkers":{"if":"a","math":"b"},"inputs":{},"protocol":"rollouts","reveal_check":{},"rows":0,"sequence":1,"status":"passed","submission":"x","traces":[]}`},
	} {
		val, err := decodeNumbers([]byte(c.doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.validate(c.schema, val); err == nil {
			t.Errorf("%s: %s accepts %s", name, c.schema, c.doc)
		}
	}
}
