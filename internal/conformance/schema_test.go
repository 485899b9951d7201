package conformance_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/conformance"
	"github.com/feval/feval/internal/jsonschema"
	"github.com/feval/feval/protocol"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

var schemaDir = filepath.Join("..", "..", "docs", "schemas")

// loadSchemas loads docs/schemas with the production validator.
func loadSchemas(t *testing.T) *jsonschema.Set {
	t.Helper()
	s, err := jsonschema.Load(os.DirFS(schemaDir))
	if err != nil {
		t.Fatal(err)
	}
	return s
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
				val, err := jsonschema.Decode(b)
				if err != nil {
					t.Fatalf("%s %s: %v", v.Name, schema, err)
				}
				if err := s.Validate(schema, val); err != nil {
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
		val, err := jsonschema.Decode([]byte(c.doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(c.schema, val); err == nil {
			t.Errorf("%s: %s accepts %s", name, c.schema, c.doc)
		}
	}
}
