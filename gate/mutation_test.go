package gate

import (
	"sort"
	"strings"
	"testing"
)

// gateCase is one source and the rule@line violations it must give.
type gateCase struct {
	name string
	src  string
	want []string
}

func runGateCases(t *testing.T, cases []gateCase) {
	t.Helper()
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

// withHeader puts header (whole lines) before an optimizer whose step body is
// lines, and returns the source with the line of the first body line.
func withHeader(header string, lines ...string) (string, int) {
	return header + inStep(lines...), stepLine + strings.Count(header, "\n")
}

// TestMutationForms enumerates the forms of assigning, augmenting and
// deleting something outside the submission's own objects: whatever the root
// of the target (an import, an alias of one, a parenthesized or subscripted
// expression, a call result, a parameter), only self.NAME attributes and
// items of local objects may change.
func TestMutationForms(t *testing.T) {
	s := stepLine
	helper := "def helper(x):\n    return x\n\n\nLIMITS = (1, 2)\n"
	hs := s + strings.Count(helper, "\n")
	withHelper := func(lines ...string) string { src, _ := withHeader(helper, lines...); return src }
	runGateCases(t, []gateCase{
		// Own objects: allowed.
		{"self attribute", inStep("self.count = 1", "self.count += 1", "del self.count"), nil},
		{"self loop target", inStep("for self.i in range(3):", "    pass"), nil},
		{"item of self.state", inStep("p = self.param_groups[0]['params'][0]", "self.state[p]['step'] = 1", "self.state[p]['step'] += 1"), nil},
		{"item of a local", inStep("state = {}", "state['k'] = 1", "del state['k']", "buf = torch.zeros(3)", "buf[0] = 1.0", "buf[1:] += 2.0"), nil},
		{"item of a parameter's gradient", inStep("p = self.param_groups[0]['params'][0]", "p.grad[0] = 0.0"), nil},

		// Imported names, through any root.
		{"import alias", "import torch as t\n" + inStep("t.optim = None"), []string{at(RuleForbiddenImport, 1), at(RuleForeignMutation, s+1)}},
		{"alias of torch.optim", inStep("o = torch.optim", "o.SGD.step = None"), []string{at(RuleModuleAttribute, s), at(RuleForeignMutation, s+1)}},
		{"alias of the base class", inStep("o = torch.optim.Optimizer", "o.zero_grad = None"), []string{at(RuleModuleReference, s), at(RuleForeignMutation, s+1)}},
		{"alias of imported Optimizer", inStep("o = Optimizer", "o.zero_grad = None"), []string{at(RuleModuleReference, s), at(RuleForeignMutation, s+1)}},
		{"alias of Tensor", "from torch import Tensor\n" + inStep("T = Tensor", "T.add_ = None"), []string{at(RuleModuleReference, s+1), at(RuleForeignMutation, s+2)}},
		{"class in a list", inStep("cs = [torch.Tensor]", "cs[0].add_ = None"), []string{at(RuleModuleReference, s), at(RuleForeignMutation, s+1)}},
		{"class as argument", inStep("n = repr(torch.Size)"), []string{at(RuleModuleReference, s)}},
		{"parenthesized base class", inStep("(torch.optim.Optimizer).zero_grad = None"), []string{at(RuleModuleMutation, s)}},
		{"parenthesized import", inStep("(Optimizer).zero_grad = None"), []string{at(RuleModuleMutation, s)}},
		{"getattr of torch", inStep("getattr(torch, 'optim').SGD = None"), []string{at(RuleModuleMutation, s)}},
		{"getattr of the base class", inStep("getattr(torch.optim, 'Optimizer').step = None"), []string{at(RuleModuleMutation, s)}},
		{"getattr item", inStep("getattr(Optimizer, 'defaults')['lr'] = 1"), []string{at(RuleModuleMutation, s)}},
		{"setattr", inStep("setattr(torch.optim.Optimizer, 'step', None)"), []string{at(RuleForbiddenBuiltin, s), at(RuleModuleReference, s)}},
		{"delattr", inStep("delattr(Optimizer, 'step')"), []string{at(RuleForbiddenBuiltin, s), at(RuleModuleReference, s)}},
		{"del base class method", inStep("del Optimizer.zero_grad"), []string{at(RuleModuleMutation, s)}},
		{"del parenthesized", inStep("del (torch.optim.Optimizer).zero_grad"), []string{at(RuleModuleMutation, s)}},
		{"augmented on the base class", inStep("Optimizer.x += 1"), []string{at(RuleModuleMutation, s)}},
		{"augmented on math", inStep("math.pi += 1"), []string{at(RuleModuleMutation, s)}},
		{"subscripted module attribute", inStep("torch.optim.Optimizer.hooks[0] = None"), []string{at(RuleModuleMutation, s)}},
		{"module loop target", inStep("for torch.x in range(3):", "    pass"), []string{at(RuleModuleMutation, s)}},
		{"module with target", inStep("with torch.no_grad() as (Optimizer).x:", "    pass"), []string{at(RuleModuleMutation, s)}},
		{"module tuple target", inStep("a, torch.y = 1, 2"), []string{at(RuleModuleMutation, s)}},

		// Other objects that are not the submission's own.
		{"call result attribute", inStep("torch.zeros(1).x = 1"), []string{at(RuleForeignMutation, s)}},
		{"call result item", inStep("self.param_groups.copy()[0] = None"), []string{at(RuleForeignMutation, s)}},
		{"super attribute", inStep("super().zero_grad = None"), []string{at(RuleForeignMutation, s)}},
		{"vars of self", inStep("vars(self)['x'] = 1"), []string{at(RuleForeignMutation, s)}},
		{"class of self", inStep("self.__class__.x = 1"), []string{at(RuleForeignMutation, s)}},
		{"chain below self", inStep("self.step.calls = 1"), []string{at(RuleForeignMutation, s)}},
		{"parenthesized self", inStep("(self).x = 1"), []string{at(RuleForeignMutation, s)}},
		{"subscripted expression attribute", inStep("self.param_groups[0].x = 1"), []string{at(RuleForeignMutation, s)}},
		{"parameter attribute", inStep("p = self.param_groups[0]['params'][0]", "p.grad = None"), []string{at(RuleForeignMutation, s+1)}},
		{"parameter attribute deleted", inStep("p = self.param_groups[0]['params'][0]", "del p.grad"), []string{at(RuleForeignMutation, s+1)}},
		{"closure attribute", inStep("closure.calls = 1"), []string{at(RuleForeignMutation, s)}},
		{"lambda attribute", inStep("f = lambda: 0", "f.calls = 1"), []string{at(RuleForeignMutation, s+1)}},
		{"literal item", inStep("[1, 2][0] = 3"), []string{at(RuleForeignMutation, s)}},

		// Module-level names: state that outlives the instance.
		{"helper attribute", withHelper("helper.calls = 1"), []string{at(RuleSharedState, hs)}},
		{"helper attribute augmented", withHelper("helper.calls += 1"), []string{at(RuleSharedState, hs)}},
		{"helper attribute item", withHelper("helper.cache['k'] = 1"), []string{at(RuleSharedState, hs)}},
		{"module constant item", withHelper("LIMITS[0] = 3"), []string{at(RuleSharedState, hs)}},
		{"class attribute", inStep("Opt.calls = 1"), []string{at(RuleSharedState, s)}},
		{"del class attribute", inStep("del Opt.step"), []string{at(RuleSharedState, s)}},

		// Uses of classes that stay allowed.
		{"classes where they belong", "from torch import Tensor\n" + inStep(
			"p = self.param_groups[0]['params'][0]",
			"a = isinstance(p, torch.Tensor) and isinstance(p, (Tensor, float))",
			"e = torch.finfo(p.dtype).eps",
			"g = torch.Generator()",
			"x: Tensor = p",
			"with torch.enable_grad():",
			"    pass",
		), nil},
	})
}

// TestNoSharedState checks the rule that nothing survives from one optimizer
// instance, or one run, to the next: attributes of functions, classes and
// modules cannot be set, and a def's defaults (evaluated once) cannot be
// mutable objects.
func TestNoSharedState(t *testing.T) {
	s := stepLine
	runGateCases(t, []gateCase{
		{"mutable default list", inStep("def h(acc=[]):", "    acc.append(1)", "    return acc"), []string{at(RuleNonConstant, s)}},
		{"mutable default dict", inStep("def h(acc={}):", "    return acc"), []string{at(RuleNonConstant, s)}},
		{"mutable module constant as default", "CACHE = []\n" + inStep("def h(acc=CACHE):", "    return acc"), []string{at(RuleNonConstant, 1), at(RuleNonConstant, s+1)}},
		{"method attribute through self", inStep("self.step.calls = 1"), []string{at(RuleForeignMutation, s)}},
		{"base class attribute", inStep("torch.optim.Optimizer.calls = 1"), []string{at(RuleModuleMutation, s)}},
		{"base class through super", inStep("super().calls = 1"), []string{at(RuleForeignMutation, s)}},
		{"module attribute", inStep("torch.calls = 1"), []string{at(RuleModuleMutation, s)}},
		{"function attribute", "def h():\n    return 1\n\n\n" + inStep("h.calls = 1"), []string{at(RuleSharedState, s+4)}},
		{"nested function attribute", inStep("def h():", "    return 1", "h.calls = 1"), []string{at(RuleForeignMutation, s+2)}},
		{"class constant", "import torch\n\n\nclass A(torch.optim.Optimizer):\n    N = 0\n\n    def step(self, closure=None):\n        A.N += 1\n        return None\n",
			[]string{at(RuleSharedState, 8)}},
		{"instance state is fine", inStep("self.calls = getattr(self, 'calls', 0) + 1"), nil},
	})
}

// TestModuleConstantDefaults: a def default may name a module-level constant
// bound once to a literal (immutable), which is the common idiom.
func TestModuleConstantDefaults(t *testing.T) {
	const cls = "\n\nclass A(Optimizer):\n"
	const step = "    def step(self, closure=None):\n        return None\n"
	const head = "import torch\nfrom torch.optim import Optimizer\n\n"
	runGateCases(t, []gateCase{
		{"tuple and number constants", head + "LR = 1e-3\nBETAS = (0.9, (0.99, 0.999))\nEPS: float = -1e-8\n" + cls +
			"    def __init__(self, params, lr=LR, betas=BETAS, eps: float = EPS):\n        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))\n\n" + step, nil},
		{"helper default", head + "SCALE = 2\n\n\ndef h(x, s=SCALE):\n    return x * s\n" + cls + step, nil},
		{"tuple of constants", head + "B1 = 0.9\nB2 = 0.999\n\n\ndef h(x, b=(B1, (B2, 1e-8))):\n    return x\n" + cls + step, nil},
		{"tuple with a helper", head + "B1 = 0.9\n\n\ndef h(x, b=(B1, h)):\n    return x\n" + cls + step, []string{at(RuleNonConstant, 7)}},
		{"constant bound twice", head + "LR = 1e-3\nLR = 1e-2\n" + cls + "    def __init__(self, params, lr=LR):\n        pass\n\n" + step,
			[]string{at(RuleNonConstant, 9)}},
		{"constant rebound by a def", head + "LR = 1e-3\n\n\ndef LR():\n    return 1\n" + cls + "    def __init__(self, params, lr=LR):\n        pass\n\n" + step,
			[]string{at(RuleNonConstant, 12)}},
		{"constant shadowed in the class body", head + "LR = 1e-3\n" + cls + "    def LR(self):\n        return 1\n\n    def __init__(self, params, lr=LR):\n        pass\n\n" + step,
			[]string{at(RuleNonConstant, 11)}},
		{"constant shadowed in the enclosing function", head + "LR = 1e-3\n" + cls + "    def step(self, closure=None):\n        LR = []\n\n        def h(lr=LR):\n            return lr\n        return None\n",
			[]string{at(RuleNonConstant, 11)}},
		{"non-literal constant", head + "LR = [1e-3]\n" + cls + "    def __init__(self, params, lr=LR):\n        pass\n\n" + step,
			[]string{at(RuleNonConstant, 4), at(RuleNonConstant, 8)}},
		{"helper function as default", head + "def h():\n    return 1\n" + cls + "    def __init__(self, params, lr=h):\n        pass\n\n" + step,
			[]string{at(RuleNonConstant, 9)}},
		{"import as default", head + cls + "    def __init__(self, params, lr=torch):\n        pass\n\n" + step,
			[]string{at(RuleNonConstant, 7)}},
		{"annotation only", head + "LR: float\n" + cls + "    def __init__(self, params, lr=LR):\n        pass\n\n" + step,
			[]string{at(RuleNonConstant, 8)}},
	})
}
