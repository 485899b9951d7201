package gate

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
)

// expectation is a fixture's expect.json: the verdict and the exact set of
// (path, line, rule) triples the gate must report.
type expectation struct {
	Description string `json:"description"`
	Verdict     string `json:"verdict"`
	Violations  []struct {
		Rule string `json:"rule"`
		Line int    `json:"line"`
		Path string `json:"path"`
	} `json:"violations"`
}

// fixtureCase is one fixture directory: its submission tree (every file but
// expect.json) and its expectation.
type fixtureCase struct {
	name   string
	tree   fs.FS
	expect expectation
}

// loadFixtures reads every directory under root. It fails the test when a
// directory lacks expect.json or the directory holds fewer than min cases.
func loadFixtures(t *testing.T, root string, min int) []fixtureCase {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatalf("reading fixtures: %v", err)
	}
	var cases []fixtureCase
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		raw, err := os.ReadFile(filepath.Join(dir, "expect.json"))
		if err != nil {
			t.Fatalf("fixture %s: %v", e.Name(), err)
		}
		var exp expectation
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&exp); err != nil {
			t.Fatalf("fixture %s: expect.json: %v", e.Name(), err)
		}
		if exp.Verdict != "pass" && exp.Verdict != "reject" {
			t.Fatalf("fixture %s: verdict %q", e.Name(), exp.Verdict)
		}
		if (exp.Verdict == "pass") != (len(exp.Violations) == 0) {
			t.Fatalf("fixture %s: verdict %s contradicts %d expected violations", e.Name(), exp.Verdict, len(exp.Violations))
		}
		tree := fstest.MapFS{}
		err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			rel = filepath.ToSlash(rel)
			switch {
			case rel == "." || rel == "expect.json":
				return nil
			case d.IsDir():
				tree[rel] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tree[rel] = &fstest.MapFile{Data: data, Mode: 0o644}
			return nil
		})
		if err != nil {
			t.Fatalf("fixture %s: %v", e.Name(), err)
		}
		cases = append(cases, fixtureCase{name: e.Name(), tree: tree, expect: exp})
	}
	if len(cases) < min {
		t.Fatalf("%s holds %d fixtures, want at least %d", root, len(cases), min)
	}
	return cases
}

// checkExpectation compares the gate's violations with the fixture's
// expectation as sets of "path:line:rule".
func checkExpectation(t *testing.T, exp expectation, got []Violation) {
	t.Helper()
	want := map[string]bool{}
	for _, v := range exp.Violations {
		want[fmt.Sprintf("%s:%d:%s", v.Path, v.Line, v.Rule)] = true
	}
	have := map[string]bool{}
	for _, v := range got {
		have[fmt.Sprintf("%s:%d:%s", v.Path, v.Line, v.Rule)] = true
	}
	var missing, extra []string
	for k := range want {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	for k := range have {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) > 0 {
		var all []string
		for _, v := range got {
			all = append(all, v.String())
		}
		t.Errorf("%s\nmissing: %v\nunexpected: %v\ngate reported:\n  %s", exp.Description, missing, extra, strings.Join(all, "\n  "))
	}
	if (exp.Verdict == "pass") != (len(got) == 0) {
		t.Errorf("verdict %s, gate reported %d violations", exp.Verdict, len(got))
	}
}
