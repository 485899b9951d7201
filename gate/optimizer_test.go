package gate

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
)

// minEvasions is the least number of gate-evading optimizers the fixture set
// must hold.
const minEvasions = 15

func TestOptimizerFixtures(t *testing.T) {
	cases := loadFixtures(t, "../fixtures/optimizer", minEvasions+1)
	evasions := 0
	for _, c := range cases {
		if strings.HasPrefix(c.name, "evade-") {
			evasions++
			if c.expect.Verdict != "reject" {
				t.Errorf("%s: an evasion must be rejected", c.name)
			}
		}
		t.Run(c.name, func(t *testing.T) {
			got, err := Optimizer(c.tree, OptimizerLimits{})
			if err != nil {
				t.Fatal(err)
			}
			checkExpectation(t, c.expect, got)
		})
	}
	if evasions < minEvasions {
		t.Fatalf("%d evasion fixtures, want at least %d", evasions, minEvasions)
	}
}

// TestOptimizerFixturesParseAsCPython checks, when a python3 is available,
// that every fixture CPython rejects is rejected by the gate too, and that
// every fixture the gate reports as a syntax error is rejected by CPython. It
// compiles the sources in one python3 process and never runs them.
func TestOptimizerFixturesParseAsCPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not available")
	}
	files, err := filepath.Glob("../fixtures/optimizer/*/optimizer.py")
	if err != nil || len(files) == 0 {
		t.Fatalf("no optimizer fixtures found (%v)", err)
	}
	const script = `import ast, sys
for f in sys.argv[1:]:
    try:
        ast.parse(open(f, "rb").read())
        print("ok")
    except SyntaxError:
        print("syntax-error")
`
	out, err := exec.Command(py, append([]string{"-I", "-c", script}, files...)...).Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	verdicts := strings.Fields(string(out))
	if len(verdicts) != len(files) {
		t.Fatalf("python3 returned %d verdicts for %d files", len(verdicts), len(files))
	}
	for i, f := range files {
		dir := filepath.Base(filepath.Dir(f))
		vs, err := Optimizer(fstest.MapFS{"optimizer.py": mapFile(t, f)}, OptimizerLimits{})
		if err != nil {
			t.Fatal(err)
		}
		gateSyntax := false
		for _, v := range vs {
			if v.Rule == RuleSyntax {
				gateSyntax = true
			}
		}
		cpythonRejects := verdicts[i] == "syntax-error"
		switch {
		case gateSyntax && !cpythonRejects:
			t.Errorf("%s: gate reports a syntax error, CPython parses it", dir)
		case cpythonRejects && len(vs) == 0:
			t.Errorf("%s: CPython rejects it but the gate passes it", dir)
		}
	}
}

func mapFile(t *testing.T, path string) *fstest.MapFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return &fstest.MapFile{Data: data, Mode: 0o644}
}

// stepPrefix is a valid optimizer up to the body of step, which starts on
// line stepLine.
const stepPrefix = `import math

import torch
from torch.optim import Optimizer


class Opt(Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
`

const stepLine = 13

// inStep builds an optimizer whose step body is lines (each indented by the
// caller relative to the body).
func inStep(lines ...string) string {
	var b strings.Builder
	b.WriteString(stepPrefix)
	for _, l := range lines {
		b.WriteString("        " + l + "\n")
	}
	b.WriteString("        return None\n")
	return b.String()
}

// rulesAt renders violations as "rule@line", sorted.
func rulesAt(vs []Violation) []string {
	out := make([]string, 0, len(vs))
	seen := map[string]bool{}
	for _, v := range vs {
		k := fmt.Sprintf("%s@%d", v.Rule, v.Line)
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func at(rule string, line int) string { return fmt.Sprintf("%s@%d", rule, line) }

func TestOptimizerSource(t *testing.T) {
	s := stepLine
	cases := []struct {
		name string
		src  string
		want []string
	}{
		{"plain step", inStep("x = 1"), nil},
		{"foreach family", inStep(`torch._foreach_mul_([], 0.5)`), nil},
		{"foreach without name", inStep(`torch._foreach_([], 0.5)`), []string{at(RuleModuleAttribute, s)}},
		{"math function", inStep("y = math.sqrt(2.0) + math.pi"), nil},
		{"math non-function", inStep("y = math.sys"), []string{at(RuleModuleAttribute, s)}},
		{"torch linalg", inStep("n = torch.linalg.vector_norm(torch.ones(3))"), nil},
		{"torch module value", inStep("m = torch.linalg"), []string{at(RuleModuleAttribute, s)}},
		{"torch as value", inStep("m = [torch]"), []string{at(RuleModuleReference, s)}},
		{"math as value", inStep("m = math"), []string{at(RuleModuleReference, s)}},
		{"getattr literal safe", inStep(`g = getattr(self, "param_groups")`), nil},
		{"getattr literal default", inStep(`g = getattr(self, "defaults", None)`), nil},
		{"getattr private literal", inStep(`g = getattr(self, "_step_hooks")`), []string{at(RulePrivateAttribute, s)}},
		{"getattr torch chain literal", inStep(`g = getattr(torch.linalg, "norm")`), nil},
		{"getattr four args", inStep(`g = getattr(self, "a", 1, 2)`), []string{at(RuleDynamicAttribute, s)}},
		{"getattr keyword", inStep(`g = getattr(self, name="a")`), []string{at(RuleDynamicAttribute, s)}},
		{"getattr f-string", inStep(`g = getattr(self, f"state")`), []string{at(RuleDynamicAttribute, s)}},
		{"getattr bytes", inStep(`g = getattr(self, b"state")`), []string{at(RuleDynamicAttribute, s)}},
		{"hasattr literal", inStep(`h = hasattr(self, "state")`), nil},
		{"setattr", inStep(`setattr(self, "x", 1)`), []string{at(RuleForbiddenBuiltin, s)}},
		{"delattr", inStep(`delattr(self, "x")`), []string{at(RuleForbiddenBuiltin, s)}},
		{"vars", inStep(`v = vars(self)`), []string{at(RuleForbiddenBuiltin, s)}},
		{"globals", inStep(`g = globals()`), []string{at(RuleForbiddenBuiltin, s)}},
		{"locals", inStep(`g = locals()`), []string{at(RuleForbiddenBuiltin, s)}},
		{"compile", inStep(`c = compile("1", "f", "eval")`), []string{at(RuleForbiddenBuiltin, s)}},
		{"print", inStep(`print("step")`), []string{at(RuleForbiddenBuiltin, s)}},
		{"input", inStep(`x = input()`), []string{at(RuleForbiddenBuiltin, s)}},
		{"breakpoint", inStep(`breakpoint()`), []string{at(RuleForbiddenBuiltin, s)}},
		{"hash is nondeterministic", inStep(`h = hash("a")`), []string{at(RuleForbiddenBuiltin, s)}},
		{"eval in f-string", inStep(`s = f"{eval('1')}"`), []string{at(RuleForbiddenBuiltin, s)}},
		{"eval in format spec", inStep(`s = f"{1:{eval('1')}}"`), []string{at(RuleForbiddenBuiltin, s)}},
		{"dunder name", inStep(`n = __name__`), []string{at(RuleDunderName, s)}},
		{"dunder builtins", inStep(`b = __builtins__`), []string{at(RuleDunderName, s)}},
		{"traceback", inStep("try:", "    pass", "except Exception as e:", "    tb = e.__traceback__"), []string{at(RuleDunderAttribute, s+3)}},
		{"shadow torch", inStep("for torch in range(3):", "    pass"), []string{at(RuleShadowedName, s)}},
		{"shadow builtin parameter", inStep("f = lambda len: len"), []string{at(RuleShadowedName, s)}},
		{"unknown name", inStep("x = os"), []string{at(RuleUnknownName, s)}},
		{"comprehension scope", inStep("x = [i * 2 for i in range(3) if i]"), nil},
		{"dict comprehension", inStep("x = {k: v for k, v in self.state.items()}"), nil},
		{"lambda parameter", inStep("f = lambda q, w=2: q * w"), nil},
		{"nested function", inStep("def helper(v):", "    return v + 1", "y = helper(1)"), nil},
		{"nested function default", inStep("def helper(v=open):", "    return v"), []string{at(RuleNonConstant, s)}},
		{"async def", inStep("async def helper():", "    pass"), []string{at(RuleForbiddenSyntax, s)}},
		{"await", inStep("x = await closure()"), []string{at(RuleForbiddenSyntax, s)}},
		{"nonlocal", inStep("def h():", "    nonlocal x"), []string{at(RuleForbiddenSyntax, s+1)}},
		{"import in function", inStep("import math"), []string{at(RuleForbiddenImport, s)}},
		{"del module attribute", inStep("del torch.load"), []string{at(RuleModuleMutation, s)}},
		{"augmented module attribute", inStep("math.pi += 1"), []string{at(RuleModuleMutation, s)}},
		{"self private assigned", inStep("self._count = 1", "c = self._count"), nil},
		{"self private not defined", inStep("c = self._step_count"), []string{at(RulePrivateAttribute, s)}},
		{"self rebound loses instance", inStep("self._x = 1", "self = closure", "c = self._x"), []string{at(RuleForeignMutation, s), at(RulePrivateAttribute, s+2)}},
		{"private on other object", inStep("v = closure._x"), []string{at(RulePrivateAttribute, s)}},
		{"super dunder init allowed", inStep("super().__setstate__({})"), nil},
		{"super with class", inStep("super(Opt, self).__init__([], {})"), nil},
		{"class name elsewhere", inStep("o = Opt"), []string{at(RuleClassReference, s)}},
		{"tensor import chain", "from torch import Tensor\n" + inStep("t = Tensor.numpy"), []string{at(RuleModuleAttribute, s+1)}},
		{"storage", inStep("st = closure.untyped_storage()"), []string{at(RuleForbiddenAttribute, s)}},
		{"code object", inStep("c = closure.co_code"), []string{at(RuleForbiddenAttribute, s)}},
		{"match statement", inStep("match closure:", "    case _:", "        pass"), []string{at(RuleForbiddenSyntax, s)}},
		{"star args call", inStep("a = (1, 2)", "m = max(*a)", "d = dict(**{})"), nil},
		{"conditional and slices", inStep("x = [1, 2, 3][1:2] if closure else None"), nil},
		{"tab indentation", strings.Replace(inStep("x = 1"), "        x = 1", "\t\tx = 1", 1), []string{at(RuleSourceEncoding, s)}},
		{"tab in string", inStep("x = \"a\tb\""), nil},
		{"non-ASCII in comment and string", inStep("x = \"\u03b2\"  # \u03b2\u2081 coefficient"), nil},
		{"no-break space between tokens", inStep("x =\u00a01"), []string{at(RuleSyntax, s)}},
		{"zero-width space between tokens", inStep("x = 1\u200b"), []string{at(RuleSyntax, s)}},
		{"zero-width space inside a line", inStep("x =\u200b1"), []string{at(RuleSourceEncoding, s)}},
		{"word joiner inside a line", inStep("x\u2060= 1"), []string{at(RuleSourceEncoding, s)}},
		{"utf-8 cookie", "# -*- coding: utf-8 -*-\n" + inStep("x = 1"), nil},
		{"latin-1 cookie", "# vim: set fileencoding=latin-1 :\n" + inStep("x = 1"), []string{at(RuleEncodingDeclaration, 1)}},
		{"byte-order mark", "\ufeff" + inStep("x = 1"), []string{at(RuleSourceEncoding, 1)}},
		{"invalid UTF-8", inStep("x = \"\xff\""), []string{at(RuleSourceEncoding, s)}},
		{"NUL byte", inStep("x = \"\x00\""), []string{at(RuleSourceEncoding, s)}},
		{"form feed", inStep("x = 1\f"), []string{at(RuleSourceEncoding, s)}},
		{"CRLF", strings.ReplaceAll(inStep("x = 1"), "\n", "\r\n"), []string{at(RuleSourceEncoding, 1)}},
		{"deep nesting", inStep("x = " + strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100)), []string{at(RuleNestingDepth, s)}},
		{"long attribute chain", inStep("x = self" + strings.Repeat(".real", 50)), nil},
		{"deep attribute chain", inStep("x = self" + strings.Repeat(".real", 64)), []string{at(RuleNestingDepth, s)}},
		{"30,000-level attribute chain", inStep("x = self" + strings.Repeat(".a", 30000)), []string{at(RuleNestingDepth, s)}},
		{"deep attribute target", inStep("self" + strings.Repeat(".a", 100) + " = 1"), []string{at(RuleNestingDepth, s)}},
		{"grad_fn", inStep("g = closure.grad_fn"), []string{at(RuleForbiddenAttribute, s)}},
		{"graph hook", inStep("with torch.enable_grad():", "    n = closure.expand_as(closure).grad_fn.next_functions[0][0].register_hook(len)"), []string{at(RuleForbiddenAttribute, s+1)}},
		{"getattr grad_fn", inStep(`g = getattr(closure, "grad_fn")`), []string{at(RuleForbiddenAttribute, s)}},
		{"tensor hook", inStep("closure.register_hook(len)"), []string{at(RuleForbiddenAttribute, s)}},
		{"optimizer hook", inStep("self.register_step_pre_hook(len)"), []string{at(RuleForbiddenAttribute, s)}},
		{"post-accumulate hook", inStep("closure.register_post_accumulate_grad_hook(len)"), []string{at(RuleForbiddenAttribute, s)}},
		{"data_ptr", inStep("a = closure.data_ptr()"), []string{at(RuleForbiddenAttribute, s)}},
		{"backward", inStep("closure.sum().backward()"), []string{at(RuleForbiddenAttribute, s)}},
		{"requires_grad_", inStep("closure.requires_grad_(True)"), []string{at(RuleForbiddenAttribute, s)}},
		{"requires_grad read", inStep("r = closure.requires_grad"), nil},
		{"generator from OS entropy", inStep("s = torch.Generator().seed()"), []string{at(RuleForbiddenAttribute, s)}},
		{"torch.empty", inStep("x = torch.empty(3)"), []string{at(RuleUninitialized, s)}},
		{"torch.empty_like", inStep("x = torch.empty_like(closure)"), []string{at(RuleUninitialized, s)}},
		{"Tensor called", "from torch import Tensor\n" + inStep("x = Tensor(3)"), []string{at(RuleUninitialized, s+1)}},
		{"torch.Tensor called", inStep("x = torch.Tensor(3)"), []string{at(RuleUninitialized, s)}},
		{"torch.Tensor in isinstance", inStep("x = isinstance(closure, torch.Tensor)"), nil},
		{"new_empty", inStep("x = closure.new_empty(3)"), []string{at(RuleUninitialized, s)}},
		{"resize_", inStep("closure.resize_(1000)"), []string{at(RuleUninitialized, s)}},
		{"getattr new", inStep(`x = getattr(closure, "new")(3)`), []string{at(RuleUninitialized, s)}},
		{"new_zeros", inStep("x = closure.new_zeros(3)"), nil},
		{"module constants", "X = (1, -2.5, 'a', None, True)\nY: int = 3\n" + inStep("x = X"), nil},
		{"module list constant", "X = [1]\n" + inStep("x = X"), []string{at(RuleNonConstant, 1)}},
		{"module power constant", "X = 10 ** 10\n" + inStep("x = X"), []string{at(RuleNonConstant, 1)}},
		{"module expression", "torch.manual_seed(0)\n" + inStep("x = 1"), []string{at(RuleModuleStatement, 1)}},
		{"module dunder", "__all__ = ('Opt',)\n" + inStep("x = 1"), []string{at(RuleDunderName, 1)}},
		{"future annotations", "from __future__ import annotations\n" + inStep("x = 1"), nil},
		{"future other", "from __future__ import braces\n" + inStep("x = 1"), []string{at(RuleForbiddenImport, 1)}},
		{"relative import", "from . import x\n" + inStep("y = 1"), []string{at(RuleForbiddenImport, 1)}},
		{"import torch.optim", "import torch.optim\n" + inStep("y = 1"), nil},
		{"import torch.utils", "import torch.utils\n" + inStep("y = 1"), []string{at(RuleForbiddenImport, 1)}},
		{"from import alias", "from torch.optim import Optimizer as O\n" + inStep("y = 1"), []string{at(RuleForbiddenImport, 1)}},
		{"no class", "import torch\n", []string{at(RuleClassCount, 0)}},
		{"class without base", "import torch\n\n\nclass A:\n    def step(self, closure=None):\n        return None\n", []string{at(RuleClassBase, 4)}},
		{"class via attribute chain", "import torch\n\n\nclass A(torch.optim.Optimizer):\n    def step(self, closure=None):\n        return None\n", nil},
		{"class via wrong chain", "import torch\n\n\nclass A(torch.nn.Module):\n    def step(self, closure=None):\n        return None\n", []string{at(RuleClassBase, 4), at(RuleModuleAttribute, 4)}},
		{"class decorator", "import torch\n\n\n@torch.no_grad()\nclass A(torch.optim.Optimizer):\n    def step(self, closure=None):\n        return None\n", []string{at(RuleDecorator, 4)}},
		{"missing step", "import torch\n\n\nclass A(torch.optim.Optimizer):\n    pass\n", []string{at(RuleMissingStep, 4)}},
		{"step signature", "import torch\n\n\nclass A(torch.optim.Optimizer):\n    def step(self):\n        return None\n", []string{at(RuleStepSignature, 5)}},
		{"step typed closure", "import torch\n\n\nclass A(torch.optim.Optimizer):\n    def step(self, closure: object = None) -> None:\n        return None\n", []string{at(RuleForbiddenBuiltin, 5)}},
		{"class statement", "import torch\n\n\nclass A(torch.optim.Optimizer):\n    if True:\n        pass\n\n    def step(self, closure=None):\n        return None\n", []string{at(RuleClassStatement, 5)}},
		{"bare no_grad decorator", "import torch\n\n\nclass A(torch.optim.Optimizer):\n    @torch.no_grad\n    def step(self, closure=None):\n        return None\n", []string{at(RuleDecorator, 5)}},
		{"static step", "import torch\n\n\nclass A(torch.optim.Optimizer):\n    @staticmethod\n    def step(self, closure=None):\n        return None\n", []string{at(RuleStepSignature, 5)}},
		{"staticmethod helper", "import torch\n\n\nclass A(torch.optim.Optimizer):\n    @staticmethod\n    def h(x):\n        return x\n\n    def step(self, closure=None):\n        return None\n", nil},
		{"staticmethod at module level", "import torch\n\n\n@staticmethod\ndef h(x):\n    return x\n\n\nclass A(torch.optim.Optimizer):\n    def step(self, closure=None):\n        return None\n", []string{at(RuleDecorator, 4)}},
		{"dunder method", "import torch\n\n\nclass A(torch.optim.Optimizer):\n    def __del__(self):\n        pass\n\n    def step(self, closure=None):\n        return None\n", []string{at(RuleDunderName, 5)}},
		{"syntax error", "def f(:\n", []string{at(RuleSyntax, 1)}},
		{"annotations", "from torch import Tensor\n" + inStep("x: list[Tensor] | None = None", "y: dict[str, tuple[int, ...]] = {}", "z: 'Opt' = None"), nil},
		{"annotation call", "X: torch.zeros(3) = 1\n" + inStep("x = 1"), []string{at(RuleForbiddenSyntax, 1)}},
		{"parameter annotation call", "import torch\n\n\ndef h(v: torch.zeros(10) = 1):\n    return v\n\n\nclass A(torch.optim.Optimizer):\n    def step(self, closure=None):\n        return None\n", []string{at(RuleForbiddenSyntax, 4)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs, err := OptimizerSource("optimizer.py", []byte(c.src), OptimizerLimits{})
			if err != nil {
				t.Fatal(err)
			}
			got := rulesAt(vs)
			want := append([]string(nil), c.want...)
			sort.Strings(want)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("got %v, want %v\n%v", got, want, vs)
			}
		})
	}
}

func TestOptimizerTree(t *testing.T) {
	good, err := os.ReadFile("../fixtures/optimizer/honest/optimizer.py")
	if err != nil {
		t.Fatal(err)
	}
	big := append([]byte("# "+strings.Repeat("x", 70<<10)+"\n"), good...)
	cases := []struct {
		name string
		tree fstest.MapFS
		want []string
	}{
		{"honest", fstest.MapFS{"optimizer.py": {Data: good}}, nil},
		{"missing", fstest.MapFS{"other.py": {Data: good}}, []string{"missing-file optimizer.py", "extra-file other.py"}},
		{"subdirectory", fstest.MapFS{"optimizer.py": {Data: good}, "lib/x.py": {Data: good}},
			[]string{"extra-file lib", "extra-file lib/x.py"}},
		{"symlink", fstest.MapFS{"optimizer.py": {Data: []byte("/etc/passwd"), Mode: fs.ModeSymlink}},
			[]string{"missing-file optimizer.py", "symlink optimizer.py"}},
		{"named pipe", fstest.MapFS{"optimizer.py": {Data: good}, "fifo": {Mode: fs.ModeNamedPipe}},
			[]string{"special-file fifo"}},
		{"too large", fstest.MapFS{"optimizer.py": {Data: big}}, []string{"file-too-large optimizer.py"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs, err := Optimizer(c.tree, OptimizerLimits{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range vs {
				got = append(got, v.Rule+" "+v.Path)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestOptimizerViolationCap(t *testing.T) {
	src := strings.Repeat("x = 1 + 2\nprint(x)\n", 500)
	vs, err := OptimizerSource("optimizer.py", []byte(src), OptimizerLimits{MaxViolationsPerRule: 7})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	summary := ""
	for _, v := range vs {
		counts[v.Rule]++
		if v.Line == 0 && v.Rule == RuleModuleStatement {
			summary = v.Detail
		}
	}
	if counts[RuleModuleStatement] != 8 || counts[RuleNonConstant] != 8 || summary != "493 more module-statement violations not listed" {
		t.Fatalf("counts %v, summary %q", counts, summary)
	}
}

func TestOptimizerDeterministic(t *testing.T) {
	src, err := os.ReadFile("../fixtures/optimizer/evade-26-metaclass/optimizer.py")
	if err != nil {
		t.Fatal(err)
	}
	first, err := OptimizerSource("optimizer.py", src, OptimizerLimits{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		again, _ := OptimizerSource("optimizer.py", src, OptimizerLimits{})
		if fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("run %d differs:\n%v\n%v", i, again, first)
		}
	}
}

func FuzzOptimizerSource(f *testing.F) {
	seeds, err := filepath.Glob("../fixtures/optimizer/*/optimizer.py")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no fuzz seeds (%v)", err)
	}
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		vs, err := OptimizerSource("optimizer.py", src, OptimizerLimits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if v.Rule == "" || v.Path != "optimizer.py" || v.Line < 0 || v.Line > strings.Count(string(src), "\n")+1 {
				t.Fatalf("malformed violation %+v", v)
			}
		}
	})
}
