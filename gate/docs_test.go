package gate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// ruleNames collects the values of every exported Rule* constant of the
// package, from its source.
func ruleNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Rule") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s is not a string literal", n.Name)
					}
					v, _ := strconv.Unquote(lit.Value)
					names = append(names, v)
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

// TestGatesDoc keeps docs/GATES.md in step with the code: every rule name
// and every allowlist entry must be documented.
func TestGatesDoc(t *testing.T) {
	raw, err := os.ReadFile("../docs/GATES.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	rules := ruleNames(t)
	if len(rules) < 50 {
		t.Fatalf("found only %d rule names", len(rules))
	}
	seen := map[string]bool{}
	for _, r := range rules {
		if seen[r] {
			t.Errorf("rule name %s defined twice", r)
		}
		seen[r] = true
		if !strings.Contains(doc, "| `"+r+"`") && !strings.Contains(doc, "`"+r+"` /") && !strings.Contains(doc, "| `"+r+"`,") {
			t.Errorf("rule %s is not in a rule table of docs/GATES.md", r)
		}
	}
	lists := map[string]map[string]bool{"builtin": allowedBuiltins, "math": mathAttrs, "denied attribute": deniedAttrs, "graph attribute": graphAttrs, "process attribute": processAttrs, "uninitialized-memory method": uninitializedAttrs, "uninitialized-memory function": uninitializedTorch, "dunder method": allowedDunderMethods}
	for what, set := range lists {
		for name := range set {
			if !strings.Contains(doc, "`"+name+"`") {
				t.Errorf("%s %s is not in docs/GATES.md", what, name)
			}
		}
	}
	for name := range torchAttrs {
		if !strings.Contains(doc, "`torch."+name+"`") {
			t.Errorf("torch.%s is not in docs/GATES.md", name)
		}
	}
}
