package gate

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	sitter "github.com/tree-sitter/go-tree-sitter"
	python "github.com/tree-sitter/tree-sitter-python/bindings/go"
)

// Rule names of the optimizer gate's Python checks.
const (
	RuleSourceEncoding      = "source-encoding"
	RuleEncodingDeclaration = "encoding-declaration"
	RuleSyntax              = "syntax"
	RuleNestingDepth        = "nesting-depth"
	RuleLiteralData         = "literal-data"
	RuleNonASCIIIdentifier  = "non-ascii-identifier"
	RuleForbiddenSyntax     = "forbidden-syntax"
	RuleForbiddenImport     = "forbidden-import"
	RuleModuleStatement     = "module-statement"
	RuleClassCount          = "class-count"
	RuleClassBase           = "class-base"
	RuleClassKeyword        = "class-keyword"
	RuleClassStatement      = "class-statement"
	RuleNestedClass         = "nested-class"
	RuleMissingStep         = "missing-step"
	RuleStepSignature       = "step-signature"
	RuleDecorator           = "decorator"
	RuleNonConstant         = "non-constant"
	RuleForbiddenBuiltin    = "forbidden-builtin"
	RuleUnknownName         = "unknown-name"
	RuleShadowedName        = "shadowed-name"
	RuleDunderName          = "dunder-name"
	RuleDunderAttribute     = "dunder-attribute"
	RulePrivateAttribute    = "private-attribute"
	RuleForbiddenAttribute  = "forbidden-attribute"
	RuleModuleAttribute     = "module-attribute"
	RuleModuleReference     = "module-reference"
	RuleModuleMutation      = "module-mutation"
	RuleForeignMutation     = "foreign-mutation"
	RuleSharedState         = "shared-state"
	RuleDynamicAttribute    = "dynamic-attribute"
	RuleClassReference      = "class-reference"
	RuleUninitialized       = "uninitialized-memory"
)

// maxSyntaxReports bounds the syntax violations reported for one file.
const maxSyntaxReports = 5

// optimizerBase is the canonical dotted path of the only accepted base class.
const optimizerBase = "torch.optim.Optimizer"

// allowedImports maps each accepted "import X" module to the name it binds.
var allowedImports = map[string]string{"torch": "torch", "math": "math", "torch.optim": "torch"}

// allowedFromImports maps each accepted "from M import N" pair to the
// canonical dotted path the bound name N stands for.
var allowedFromImports = map[[2]string]string{
	{"torch.optim", "Optimizer"}:           optimizerBase,
	{"torch.optim.optimizer", "Optimizer"}: optimizerBase,
	{"torch", "Tensor"}:                    "torch.Tensor",
}

// scope is one Python name scope (a function, lambda or comprehension).
// instance marks the scope of a method of the submission's class whose first
// parameter is self and whose body never rebinds self: there, self is an
// instance of that class.
type scope struct {
	names    map[string]bool
	parent   *scope
	instance bool
}

func newScope(parent *scope) *scope { return &scope{names: map[string]bool{}, parent: parent} }

// isInstance reports whether self, read in s, is the instance of the
// submission's class.
func (s *scope) isInstance() bool {
	for ; s != nil; s = s.parent {
		if s.names["self"] {
			return s.instance
		}
	}
	return false
}

// local reports whether name is bound in this scope or an enclosing
// function-like scope (the module scope is not part of the chain).
func (s *scope) local(name string) bool {
	for ; s != nil; s = s.parent {
		if s.names[name] {
			return true
		}
	}
	return false
}

// pyChecker walks one parsed source file. It never evaluates anything.
type pyChecker struct {
	src    []byte
	path   string
	limits OptimizerLimits
	vs     []Violation

	imports     map[string]string // bound name -> canonical dotted path
	moduleNames map[string]bool   // helpers, the class, constants
	className   string            // the submission's optimizer class
	classNames  map[string]bool   // names the class defines (methods, constants, self.X)
	classBody   map[string]bool   // names bound directly in the class body
	// moduleBinds counts the module-level bindings of each name (imports,
	// defs, the class, assignments); moduleLiteral marks names assigned a
	// literal at module level.
	moduleBinds   map[string]int
	moduleLiteral map[string]bool
	// classOK marks the nodes where an imported class (Tensor, Optimizer,
	// torch.Size ...) may appear: called, as isinstance's or issubclass's
	// second argument, or in an annotation.
	classOK map[uintptr]bool
	// inMethodDefaults is set while the defaults of a method (a def directly
	// in the class body) are checked: they are evaluated in the class body.
	inMethodDefaults bool

	depth         int
	depthReported bool
}

func (c *pyChecker) report(rule string, n *sitter.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = int(n.StartPosition().Row) + 1
	}
	c.vs = append(c.vs, Violation{Rule: rule, Line: line, Path: c.path, Detail: fmt.Sprintf(format, args...)})
}

func (c *pyChecker) text(n *sitter.Node) string { return n.Utf8Text(c.src) }

// kids returns the named children of n, without comments and line
// continuations (tree-sitter places those anywhere).
func kids(n *sitter.Node) []*sitter.Node {
	var out []*sitter.Node
	for i := uint(0); i < n.NamedChildCount(); i++ {
		k := n.NamedChild(i)
		if k == nil || k.Kind() == "comment" || k.Kind() == "line_continuation" {
			continue
		}
		out = append(out, k)
	}
	return out
}

// hasToken reports whether n has an anonymous child token tok (such as
// "async").
func hasToken(n *sitter.Node, tok string) bool {
	for i := uint(0); i < n.ChildCount(); i++ {
		k := n.Child(i)
		if !k.IsNamed() && k.Kind() == tok {
			return true
		}
	}
	return false
}

// checkPythonSource checks src and returns the violations, unsorted. With
// strict set it runs every check of the optimizer gate: raw-byte checks run
// first, and a file that fails them is not parsed, because a parser and
// CPython could then read it differently. Without strict it only checks that
// src is UTF-8 and parses.
func checkPythonSource(path string, src []byte, limits OptimizerLimits, strict bool) ([]Violation, error) {
	c := &pyChecker{src: src, path: path, limits: limits,
		imports: map[string]string{}, moduleNames: map[string]bool{}, classNames: map[string]bool{},
		classBody: map[string]bool{}, moduleBinds: map[string]int{}, moduleLiteral: map[string]bool{}, classOK: map[uintptr]bool{}}
	if strict && !c.checkBytes() {
		return c.vs, nil
	}
	if !strict && !utf8.Valid(src) {
		c.vs = append(c.vs, Violation{Rule: RuleSourceEncoding, Path: path, Detail: "source is not valid UTF-8"})
		return c.vs, nil
	}
	parser := sitter.NewParser()
	defer parser.Close()
	if err := parser.SetLanguage(sitter.NewLanguage(python.Language())); err != nil {
		return nil, fmt.Errorf("loading python grammar: %w", err)
	}
	tree := parser.Parse(src, nil)
	if tree == nil {
		return nil, fmt.Errorf("parsing %s: parser returned no tree", path)
	}
	defer tree.Close()
	root := tree.RootNode()
	if root.HasError() {
		c.reportSyntax(root)
		return c.vs, nil
	}
	if strict {
		before := len(c.vs)
		c.checkTokens(root)
		c.checkCodingCookie(root)
		if len(c.vs) > before {
			// Tabs, stray characters or a foreign encoding: CPython may read
			// this file differently from the tree, so the tree is not judged.
			return c.vs, nil
		}
		c.checkModule(root)
		c.checkLiterals(root)
	}
	return c.vs, nil
}

// checkLiterals caps the literal data of the source: the bytes of every
// string, integer and float literal as written (quotes, prefixes and escapes
// included) count, and together they may not pass MaxLiteralBytes. An
// optimizer needs a few constants and docstrings; no useful data or weights
// fit in the cap.
func (c *pyChecker) checkLiterals(root *sitter.Node) {
	var total uint
	var first *sitter.Node
	var walk func(n *sitter.Node)
	walk = func(n *sitter.Node) {
		switch n.Kind() {
		case "string", "integer", "float":
			total += n.EndByte() - n.StartByte()
			if first == nil && total > uint(c.limits.MaxLiteralBytes) {
				first = n
			}
			return
		}
		for i := uint(0); i < n.ChildCount(); i++ {
			walk(n.Child(i))
		}
	}
	walk(root)
	if first != nil {
		c.report(RuleLiteralData, first, "the literals hold %d bytes, more than the %d an optimizer may carry: data and weights do not belong in an update rule", total, c.limits.MaxLiteralBytes)
	}
}

// checkBytes checks the raw bytes: valid UTF-8, no byte-order mark, and no
// control characters other than tab and line feed. It reports whether the
// source may be parsed.
func (c *pyChecker) checkBytes() bool {
	ok := true
	if !utf8.Valid(c.src) {
		line := 1
		for i := 0; i < len(c.src); {
			r, size := utf8.DecodeRune(c.src[i:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			if c.src[i] == '\n' {
				line++
			}
			i += size
		}
		c.vs = append(c.vs, Violation{Rule: RuleSourceEncoding, Line: line, Path: c.path, Detail: "source is not valid UTF-8"})
		return false
	}
	if bytes.HasPrefix(c.src, []byte("\xef\xbb\xbf")) {
		c.vs = append(c.vs, Violation{Rule: RuleSourceEncoding, Line: 1, Path: c.path, Detail: "byte-order mark"})
		ok = false
	}
	seen := map[byte]bool{}
	line := 1
	for _, b := range c.src {
		if b == '\n' {
			line++
			continue
		}
		if (b < 0x20 && b != '\t') || b == 0x7f {
			if !seen[b] {
				seen[b] = true
				c.vs = append(c.vs, Violation{Rule: RuleSourceEncoding, Line: line, Path: c.path,
					Detail: fmt.Sprintf("control character %#02x (only tab and line feed are allowed; use LF line endings)", b)})
			}
			ok = false
		}
	}
	return ok
}

// reportSyntax reports the first few ERROR and MISSING nodes of a tree that
// failed to parse.
func (c *pyChecker) reportSyntax(root *sitter.Node) {
	n := 0
	var walk func(x *sitter.Node)
	walk = func(x *sitter.Node) {
		if n >= maxSyntaxReports || !x.HasError() && !x.IsMissing() {
			return
		}
		switch {
		case x.IsMissing():
			c.report(RuleSyntax, x, "missing %q", x.Kind())
			n++
			return
		case x.IsError():
			snippet := c.text(x)
			if len(snippet) > 40 {
				snippet = snippet[:40] + "..."
			}
			c.report(RuleSyntax, x, "invalid syntax near %q", snippet)
			n++
			return
		}
		inner := false
		for i := uint(0); i < x.ChildCount(); i++ {
			k := x.Child(i)
			if k.HasError() || k.IsMissing() {
				inner = true
				walk(k)
			}
		}
		if !inner {
			// The error sits in a token the tree does not expose (such as a
			// missing newline): report the innermost node that holds it.
			c.report(RuleSyntax, x, "invalid syntax in %s", x.Kind())
			n++
		}
	}
	walk(root)
}

// checkTokens checks every leaf token: identifiers must be ASCII (Python
// folds non-ASCII identifiers with NFKC, so a look-alike can name a
// builtin), and outside string contents, comments and identifiers the source
// must be printable ASCII without tabs.
func (c *pyChecker) checkTokens(root *sitter.Node) {
	type span struct{ start, end uint }
	var free []span // byte ranges where any valid UTF-8 is allowed
	var walk func(n *sitter.Node)
	walk = func(n *sitter.Node) {
		switch n.Kind() {
		case "comment", "string_content":
			free = append(free, span{n.StartByte(), n.EndByte()})
			return
		case "identifier":
			if !isASCIIIdent(c.text(n)) {
				c.report(RuleNonASCIIIdentifier, n, "identifier %q is not ASCII", c.text(n))
			}
			free = append(free, span{n.StartByte(), n.EndByte()})
			return
		}
		for i := uint(0); i < n.ChildCount(); i++ {
			walk(n.Child(i))
		}
	}
	walk(root)
	line := 1
	j := 0
	reported := map[string]bool{}
	for i := uint(0); i < uint(len(c.src)); i++ {
		for j < len(free) && free[j].end <= i {
			j++
		}
		b := c.src[i]
		if b == '\n' {
			line++
			continue
		}
		if j < len(free) && free[j].start <= i {
			continue
		}
		what := ""
		switch {
		case b == '\t':
			what = "tab outside a string or comment"
		case b >= 0x80:
			what = "non-ASCII character outside a string, comment or identifier"
		}
		if what != "" && !reported[what] {
			reported[what] = true
			c.vs = append(c.vs, Violation{Rule: RuleSourceEncoding, Line: line, Path: c.path, Detail: what})
		}
	}
}

// checkCodingCookie rejects a PEP 263 encoding declaration naming anything
// but UTF-8: CPython decodes the file with it (utf-7 can hide code in a
// comment), while the gate reads UTF-8. Every comment on line 1 or 2 is
// examined, which is stricter than CPython.
func (c *pyChecker) checkCodingCookie(root *sitter.Node) {
	var walk func(n *sitter.Node)
	walk = func(n *sitter.Node) {
		if n.StartPosition().Row > 1 {
			return
		}
		if n.Kind() == "comment" {
			if name, ok := codingName(c.text(n)); ok {
				norm := strings.ReplaceAll(strings.ToLower(name), "_", "-")
				if norm != "utf-8" && norm != "utf8" && !strings.HasPrefix(norm, "utf-8-") {
					c.report(RuleEncodingDeclaration, n, "encoding declaration %q (only utf-8 is accepted)", name)
				}
			}
			return
		}
		for i := uint(0); i < n.ChildCount(); i++ {
			walk(n.Child(i))
		}
	}
	walk(root)
}

// codingName extracts the encoding name of a "coding[:=] name" declaration
// from a comment, following PEP 263.
func codingName(comment string) (string, bool) {
	for i := 0; ; {
		k := strings.Index(comment[i:], "coding")
		if k < 0 {
			return "", false
		}
		i += k + len("coding")
		if i >= len(comment) || comment[i] != ':' && comment[i] != '=' {
			continue
		}
		rest := strings.TrimLeft(comment[i+1:], " \t")
		end := 0
		for end < len(rest) {
			ch := rest[end]
			if ch == '-' || ch == '_' || ch == '.' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch >= 0x80 {
				end++
				continue
			}
			break
		}
		if end == 0 {
			continue
		}
		return rest[:end], true
	}
}

// enter tracks nesting depth; it reports false (once) when the limit is
// passed, and the caller must then not descend. Either way the caller ends
// the level with leave.
func (c *pyChecker) enter(n *sitter.Node) bool { return c.deepen(n, 1) }

// deepen adds levels to the nesting depth, as enter adds one. An attribute
// chain a.b.c is one node here but nests as deeply as a(b(c)) for CPython,
// so each attribute after the first is a level; the caller takes them off
// again whatever deepen reports.
func (c *pyChecker) deepen(n *sitter.Node, levels int) bool {
	c.depth += levels
	if c.depth > c.limits.MaxNestingDepth {
		if !c.depthReported {
			c.depthReported = true
			c.report(RuleNestingDepth, n, "nesting deeper than %d", c.limits.MaxNestingDepth)
		}
		return false
	}
	return true
}

func (c *pyChecker) leave() { c.depth-- }

// ---- module level ----

func (c *pyChecker) checkModule(root *sitter.Node) {
	stmts := kids(root)
	// First pass: bindings visible module-wide.
	var classes []*sitter.Node
	for _, s := range stmts {
		switch s.Kind() {
		case "import_statement", "import_from_statement", "future_import_statement":
			c.checkImport(s)
		case "function_definition":
			c.bindModule(c.text(s.ChildByFieldName("name")))
		case "class_definition":
			classes = append(classes, s)
			c.bindModule(c.text(s.ChildByFieldName("name")))
		case "decorated_definition":
			if d := s.ChildByFieldName("definition"); d != nil {
				c.bindModule(c.text(d.ChildByFieldName("name")))
				if d.Kind() == "class_definition" {
					classes = append(classes, d)
				}
			}
		case "expression_statement":
			for _, k := range kids(s) {
				if k.Kind() != "assignment" {
					continue
				}
				l, r := k.ChildByFieldName("left"), k.ChildByFieldName("right")
				if l == nil || l.Kind() != "identifier" {
					continue
				}
				if r == nil {
					c.moduleNames[c.text(l)] = true // an annotation alone binds nothing
					continue
				}
				c.bindModule(c.text(l))
				if c.isConst(r) {
					c.moduleLiteral[c.text(l)] = true
				}
			}
		}
	}
	switch len(classes) {
	case 0:
		c.vs = append(c.vs, Violation{Rule: RuleClassCount, Path: c.path, Detail: "no class deriving from torch.optim.Optimizer"})
	case 1:
		c.className = c.text(classes[0].ChildByFieldName("name"))
	default:
		for _, k := range classes[1:] {
			c.report(RuleClassCount, k, "more than one class (exactly one optimizer class is allowed)")
		}
	}
	for _, cl := range classes {
		c.collectClassNames(cl)
	}
	module := (*scope)(nil)
	for _, s := range stmts {
		switch s.Kind() {
		case "import_statement", "import_from_statement", "future_import_statement":
			// checked in the first pass
		case "expression_statement":
			c.checkConstStatement(s, RuleModuleStatement, "module")
		case "function_definition":
			c.checkFunction(s, nil, module, false)
		case "class_definition":
			c.checkClass(s)
		case "decorated_definition":
			d := s.ChildByFieldName("definition")
			if d == nil {
				c.report(RuleModuleStatement, s, "unexpected decorated statement")
				continue
			}
			if d.Kind() == "class_definition" {
				for _, dec := range decorators(s) {
					c.report(RuleDecorator, dec, "decorators on the class are not allowed")
				}
				c.checkClass(d)
				continue
			}
			c.checkFunction(d, decorators(s), module, false)
		default:
			c.report(RuleModuleStatement, s, "%s is not allowed at module level (only imports, the class, helper functions, constants and docstrings)", s.Kind())
		}
	}
}

// bindModule records a module-level binding of name.
func (c *pyChecker) bindModule(name string) {
	c.moduleNames[name] = true
	c.moduleBinds[name]++
}

// isModuleConstant reports whether name, read where a default value of a def
// is evaluated (scope sc), is a module-level constant: bound exactly once at
// module level, to a literal, and not bound in any enclosing function or, for
// a method's defaults, in the class body. Literals are immutable, so such a
// default cannot carry state from one call or instance to the next.
func (c *pyChecker) isModuleConstant(name string, sc *scope) bool {
	if c.moduleBinds[name] != 1 || !c.moduleLiteral[name] || sc.local(name) || c.imports[name] != "" {
		return false
	}
	return !(c.inMethodDefaults && c.classBody[name])
}

// isDefault reports whether v may be a def parameter's default: a literal, a
// module-level constant (isModuleConstant), or a tuple of those.
func (c *pyChecker) isDefault(v *sitter.Node, sc *scope) bool {
	switch v.Kind() {
	case "identifier":
		return c.isModuleConstant(c.text(v), sc)
	case "tuple", "parenthesized_expression":
		for _, k := range kids(v) {
			if !c.isDefault(k, sc) {
				return false
			}
		}
		return true
	}
	return c.isConst(v)
}

func decorators(n *sitter.Node) []*sitter.Node {
	var out []*sitter.Node
	for _, k := range kids(n) {
		if k.Kind() == "decorator" {
			out = append(out, k)
		}
	}
	return out
}

// checkImport validates one import statement and records the names it
// binds. Imports are only checked here, at module level.
func (c *pyChecker) checkImport(s *sitter.Node) {
	switch s.Kind() {
	case "future_import_statement":
		for _, k := range kids(s) {
			if k.Kind() != "dotted_name" || c.text(k) != "annotations" {
				c.report(RuleForbiddenImport, s, "only \"from __future__ import annotations\" is allowed")
			}
		}
	case "import_statement":
		for _, k := range kids(s) {
			if k.Kind() != "dotted_name" {
				c.report(RuleForbiddenImport, k, "import aliases are not allowed (%s)", c.text(k))
				continue
			}
			name := c.text(k)
			bound, ok := allowedImports[name]
			if !ok {
				c.report(RuleForbiddenImport, k, "import of %q (only torch and math)", name)
				continue
			}
			c.imports[bound] = bound
		}
	case "import_from_statement":
		mod := s.ChildByFieldName("module_name")
		if mod == nil || mod.Kind() != "dotted_name" {
			c.report(RuleForbiddenImport, s, "relative imports are not allowed")
			return
		}
		for _, k := range kids(s) {
			if k.Id() == mod.Id() {
				continue
			}
			switch k.Kind() {
			case "wildcard_import":
				c.report(RuleForbiddenImport, k, "wildcard import from %q", c.text(mod))
			case "dotted_name":
				canon, ok := allowedFromImports[[2]string{c.text(mod), c.text(k)}]
				if !ok {
					c.report(RuleForbiddenImport, k, "from %s import %s is not allowed", c.text(mod), c.text(k))
					continue
				}
				c.imports[c.text(k)] = canon
			default:
				c.report(RuleForbiddenImport, k, "import aliases are not allowed (%s)", c.text(k))
			}
		}
	}
}

// checkConstStatement checks a module- or class-level expression statement:
// a docstring (a plain string) or NAME [: annotation] [= constant].
func (c *pyChecker) checkConstStatement(s *sitter.Node, rule, where string) {
	ks := kids(s)
	if len(ks) != 1 {
		c.report(rule, s, "only docstrings and NAME = constant are allowed at %s level", where)
		return
	}
	k := ks[0]
	switch k.Kind() {
	case "string", "concatenated_string":
		if !c.isConst(k) {
			c.report(rule, k, "formatted string statement at %s level", where)
		}
		return
	case "assignment":
	default:
		c.report(rule, k, "%s is not allowed at %s level (only docstrings and NAME = constant)", k.Kind(), where)
		return
	}
	left := k.ChildByFieldName("left")
	if left == nil || left.Kind() != "identifier" {
		c.report(rule, k, "only NAME = constant assignments are allowed at %s level", where)
		return
	}
	c.checkBind(left)
	if t := k.ChildByFieldName("type"); t != nil {
		c.checkType(t, nil)
	}
	right := k.ChildByFieldName("right")
	if right == nil {
		return
	}
	if !c.isConst(right) {
		c.report(RuleNonConstant, right, "%s-level value of %s must be a literal constant", where, c.text(left))
	}
}

// isConst reports whether n is a literal constant: a number, a string
// without interpolation, True, False, None, a unary sign on a number, or a
// tuple of constants.
func (c *pyChecker) isConst(n *sitter.Node) bool {
	switch n.Kind() {
	case "integer", "float", "true", "false", "none":
		return true
	case "string":
		for _, k := range kids(n) {
			if k.Kind() == "interpolation" {
				return false
			}
		}
		return true
	case "concatenated_string":
		for _, k := range kids(n) {
			if !c.isConst(k) {
				return false
			}
		}
		return true
	case "unary_operator":
		a := n.ChildByFieldName("argument")
		op := n.ChildByFieldName("operator")
		return a != nil && op != nil && (c.text(op) == "-" || c.text(op) == "+") &&
			(a.Kind() == "integer" || a.Kind() == "float")
	case "tuple", "parenthesized_expression":
		for _, k := range kids(n) {
			if !c.isConst(k) {
				return false
			}
		}
		return true
	}
	return false
}

// checkBind checks a name being bound (assigned, a parameter, a loop target,
// a def or class name).
func (c *pyChecker) checkBind(id *sitter.Node) {
	name := c.text(id)
	switch {
	case !isASCIIIdent(name):
		// reported by checkTokens
	case isDunder(name):
		c.report(RuleDunderName, id, "binding the dunder name %s", name)
	case pythonBuiltins[name]:
		c.report(RuleShadowedName, id, "%s shadows a Python builtin", name)
	case c.imports[name] != "":
		c.report(RuleShadowedName, id, "%s shadows an imported name", name)
	}
}

// ---- class ----

// collectClassNames records the names the class defines: its methods, its
// constants and every self.NAME assignment target in its methods. A private
// (single underscore) attribute is accepted only as self.NAME inside a method
// of the class, and only for these names.
func (c *pyChecker) collectClassNames(cl *sitter.Node) {
	body := cl.ChildByFieldName("body")
	if body == nil {
		return
	}
	var walk func(n *sitter.Node)
	walk = func(n *sitter.Node) {
		switch n.Kind() {
		case "function_definition":
			if p := n.Parent(); p != nil && (p.Id() == body.Id() || p.Kind() == "decorated_definition" && p.Parent() != nil && p.Parent().Id() == body.Id()) {
				c.classNames[c.text(n.ChildByFieldName("name"))] = true
				c.classBody[c.text(n.ChildByFieldName("name"))] = true
			}
		case "assignment", "augmented_assignment":
			if l := n.ChildByFieldName("left"); l != nil {
				if l.Kind() == "identifier" && n.Parent() != nil && n.Parent().Parent() != nil && n.Parent().Parent().Id() == body.Id() {
					c.classNames[c.text(l)] = true
					c.classBody[c.text(l)] = true
				}
				c.collectSelfTargets(l)
			}
		}
		for i := uint(0); i < n.ChildCount(); i++ {
			walk(n.Child(i))
		}
	}
	walk(body)
}

func (c *pyChecker) collectSelfTargets(t *sitter.Node) {
	switch t.Kind() {
	case "attribute":
		if o := t.ChildByFieldName("object"); o != nil && o.Kind() == "identifier" && c.text(o) == "self" {
			c.classNames[c.text(t.ChildByFieldName("attribute"))] = true
		}
	case "pattern_list", "tuple_pattern", "list_pattern", "tuple", "list", "expression_list", "parenthesized_expression":
		for _, k := range kids(t) {
			c.collectSelfTargets(k)
		}
	}
}

func (c *pyChecker) checkClass(cl *sitter.Node) {
	name := cl.ChildByFieldName("name")
	c.checkBind(name)
	if tp := cl.ChildByFieldName("type_parameters"); tp != nil {
		c.report(RuleForbiddenSyntax, tp, "class type parameters")
	}
	c.checkClassBases(cl)
	body := cl.ChildByFieldName("body")
	var step *sitter.Node
	var stepDecorators []*sitter.Node
	for _, s := range kids(body) {
		switch s.Kind() {
		case "expression_statement":
			c.checkConstStatement(s, RuleClassStatement, "class")
		case "pass_statement":
		case "function_definition":
			c.checkFunction(s, nil, nil, true)
			if c.text(s.ChildByFieldName("name")) == "step" {
				step = s
			}
		case "decorated_definition":
			d := s.ChildByFieldName("definition")
			if d != nil && d.Kind() == "function_definition" {
				c.checkFunction(d, decorators(s), nil, true)
				if c.text(d.ChildByFieldName("name")) == "step" {
					step, stepDecorators = d, decorators(s)
				}
				continue
			}
			c.report(RuleNestedClass, s, "classes inside the class are not allowed")
		case "class_definition":
			c.report(RuleNestedClass, s, "classes inside the class are not allowed")
		default:
			c.report(RuleClassStatement, s, "%s is not allowed in the class body (only methods, docstrings and NAME = constant)", s.Kind())
		}
	}
	if step == nil {
		c.report(RuleMissingStep, cl, "the class defines no step(self, closure=None) method")
		return
	}
	c.checkStepSignature(step, stepDecorators)
}

// checkClassBases requires exactly one base, torch.optim.Optimizer, and no
// class keywords (metaclass=...).
func (c *pyChecker) checkClassBases(cl *sitter.Node) {
	sup := cl.ChildByFieldName("superclasses")
	if sup == nil {
		c.report(RuleClassBase, cl, "the class must derive from torch.optim.Optimizer")
		return
	}
	var bases []*sitter.Node
	for _, k := range kids(sup) {
		switch k.Kind() {
		case "keyword_argument":
			c.report(RuleClassKeyword, k, "class keyword %s is not allowed", c.text(k))
		case "list_splat", "dictionary_splat", "parenthesized_list_splat":
			c.report(RuleClassBase, k, "unpacked class bases are not allowed")
		default:
			bases = append(bases, k)
		}
	}
	if len(bases) != 1 {
		c.report(RuleClassBase, sup, "the class must have exactly one base, torch.optim.Optimizer (has %d)", len(bases))
		for _, b := range bases {
			c.checkExpr(b, nil)
		}
		return
	}
	b := bases[0]
	canon := ""
	switch b.Kind() {
	case "identifier":
		canon = c.imports[c.text(b)]
	case "attribute":
		names, root := flattenAttr(c, b)
		if root.Kind() == "identifier" && c.imports[c.text(root)] == "torch" {
			canon = "torch." + strings.Join(names, ".")
			if canon == "torch.optim.optimizer.Optimizer" {
				canon = optimizerBase
			}
		}
	}
	if canon != optimizerBase {
		c.report(RuleClassBase, b, "base %s is not torch.optim.Optimizer", c.text(b))
		c.checkExpr(b, nil)
	}
}

// checkStepSignature requires def step(self, closure=None), optionally
// annotated; its decorators are checked like any method's, and staticmethod
// is refused.
func (c *pyChecker) checkStepSignature(step *sitter.Node, decs []*sitter.Node) {
	for _, d := range decs {
		if ks := kids(d); len(ks) == 1 && ks[0].Kind() == "identifier" && c.text(ks[0]) == "staticmethod" {
			c.report(RuleStepSignature, d, "step must be an instance method")
		}
	}
	params := kids(step.ChildByFieldName("parameters"))
	ok := len(params) == 2 && params[0].Kind() == "identifier" && c.text(params[0]) == "self"
	if ok {
		p := params[1]
		switch p.Kind() {
		case "default_parameter", "typed_default_parameter":
			n, v := p.ChildByFieldName("name"), p.ChildByFieldName("value")
			ok = n != nil && c.text(n) == "closure" && v != nil && v.Kind() == "none"
		default:
			ok = false
		}
	}
	if !ok {
		c.report(RuleStepSignature, step, "step must be declared as def step(self, closure=None)")
	}
}

// ---- functions ----

// isNoGradDecorator reports whether decorator d is exactly @torch.no_grad().
func (c *pyChecker) isNoGradDecorator(d *sitter.Node) bool {
	ks := kids(d)
	if len(ks) != 1 || ks[0].Kind() != "call" {
		return false
	}
	call := ks[0]
	fn := call.ChildByFieldName("function")
	args := call.ChildByFieldName("arguments")
	if fn == nil || fn.Kind() != "attribute" || args == nil || args.Kind() != "argument_list" || len(kids(args)) != 0 {
		return false
	}
	names, root := flattenAttr(c, fn)
	return root.Kind() == "identifier" && c.imports[c.text(root)] == "torch" && len(names) == 1 && names[0] == "no_grad"
}

// checkFunction checks a def (a helper at module level, a method, or a
// nested function). enclosing is the enclosing function scope (nil at module
// and class level).
func (c *pyChecker) checkFunction(fn *sitter.Node, decs []*sitter.Node, enclosing *scope, method bool) {
	if !c.enter(fn) {
		c.leave()
		return
	}
	defer c.leave()
	if hasToken(fn, "async") {
		c.report(RuleForbiddenSyntax, fn, "async functions are not allowed")
	}
	name := fn.ChildByFieldName("name")
	if method && allowedDunderMethods[c.text(name)] {
		// __init__ and __setstate__ may be defined.
	} else {
		c.checkBind(name)
	}
	isStatic := false
	for _, d := range decs {
		ks := kids(d)
		static := len(ks) == 1 && ks[0].Kind() == "identifier" && c.text(ks[0]) == "staticmethod" && !enclosing.local("staticmethod")
		isStatic = isStatic || static
		if !(static && method) && !c.isNoGradDecorator(d) {
			c.report(RuleDecorator, d, "decorator %s is not allowed (only @torch.no_grad() and, on methods, @staticmethod)", strings.TrimSpace(c.text(d)))
		}
	}
	if tp := fn.ChildByFieldName("type_parameters"); tp != nil {
		c.report(RuleForbiddenSyntax, tp, "function type parameters")
	}
	sc := newScope(enclosing)
	params := fn.ChildByFieldName("parameters")
	c.inMethodDefaults = method
	c.checkParameters(params, sc, enclosing, true)
	c.inMethodDefaults = false
	if rt := fn.ChildByFieldName("return_type"); rt != nil {
		c.checkType(rt, enclosing)
	}
	body := fn.ChildByFieldName("body")
	bodyNames := newScope(nil)
	c.collectBindings(body, bodyNames)
	for n := range bodyNames.names {
		sc.names[n] = true
	}
	if method && !isStatic && params != nil {
		if ps := kids(params); len(ps) > 0 && ps[0].Kind() == "identifier" && c.text(ps[0]) == "self" && !bodyNames.names["self"] {
			sc.instance = true
		}
	}
	c.checkBlock(body, sc)
}

// checkParameters checks a parameter list and binds its names in sc.
// Defaults of def parameters are evaluated once, at definition time, so they
// must be literal constants; lambda defaults are ordinary expressions.
func (c *pyChecker) checkParameters(params *sitter.Node, sc, enclosing *scope, isDef bool) {
	if params == nil {
		return
	}
	for _, p := range kids(params) {
		switch p.Kind() {
		case "identifier":
			c.checkBind(p)
			sc.names[c.text(p)] = true
		case "default_parameter", "typed_default_parameter":
			n := p.ChildByFieldName("name")
			c.checkBind(n)
			sc.names[c.text(n)] = true
			if t := p.ChildByFieldName("type"); t != nil {
				c.checkType(t, enclosing)
			}
			v := p.ChildByFieldName("value")
			if isDef {
				if !c.isDefault(v, enclosing) {
					c.report(RuleNonConstant, v, "default value of %s must be a literal or a module-level constant bound once to a literal", c.text(n))
				}
			} else {
				c.checkExpr(v, enclosing)
			}
		case "typed_parameter":
			for _, k := range kids(p) {
				switch k.Kind() {
				case "identifier":
					c.checkBind(k)
					sc.names[c.text(k)] = true
				case "list_splat_pattern", "dictionary_splat_pattern":
					c.bindSplat(k, sc)
				case "type":
					c.checkType(k, enclosing)
				default:
					c.report(RuleForbiddenSyntax, k, "unexpected parameter form %s", k.Kind())
				}
			}
		case "list_splat_pattern", "dictionary_splat_pattern":
			c.bindSplat(p, sc)
		case "keyword_separator", "positional_separator":
		default:
			c.report(RuleForbiddenSyntax, p, "parameter form %s is not allowed", p.Kind())
		}
	}
}

func (c *pyChecker) bindSplat(p *sitter.Node, sc *scope) {
	for _, k := range kids(p) {
		if k.Kind() == "identifier" {
			c.checkBind(k)
			sc.names[c.text(k)] = true
		} else {
			c.report(RuleForbiddenSyntax, k, "unexpected parameter form %s", k.Kind())
		}
	}
}

// collectBindings adds to sc every name bound in a function body, without
// descending into nested functions, lambdas, classes or comprehensions.
func (c *pyChecker) collectBindings(n *sitter.Node, sc *scope) {
	if n == nil {
		return
	}
	switch n.Kind() {
	case "lambda", "list_comprehension", "set_comprehension", "dictionary_comprehension", "generator_expression", "class_definition":
		return
	case "function_definition":
		if nm := n.ChildByFieldName("name"); nm != nil {
			sc.names[c.text(nm)] = true
		}
		return
	case "assignment", "augmented_assignment", "for_statement":
		c.collectTargets(n.ChildByFieldName("left"), sc)
	case "as_pattern_target":
		c.collectTargets(n, sc)
	case "named_expression":
		c.collectTargets(n.ChildByFieldName("name"), sc)
	case "delete_statement":
		for _, k := range kids(n) {
			c.collectTargets(k, sc)
		}
	}
	for i := uint(0); i < n.ChildCount(); i++ {
		c.collectBindings(n.Child(i), sc)
	}
}

func (c *pyChecker) collectTargets(t *sitter.Node, sc *scope) {
	if t == nil {
		return
	}
	switch t.Kind() {
	case "identifier":
		sc.names[c.text(t)] = true
	case "pattern_list", "tuple_pattern", "list_pattern", "tuple", "list", "expression_list",
		"parenthesized_expression", "list_splat_pattern", "list_splat", "as_pattern_target":
		for _, k := range kids(t) {
			c.collectTargets(k, sc)
		}
	}
}

// ---- statements ----

func (c *pyChecker) checkBlock(b *sitter.Node, sc *scope) {
	if b == nil {
		return
	}
	for _, s := range kids(b) {
		c.checkStmt(s, sc)
	}
}

func (c *pyChecker) checkStmt(s *sitter.Node, sc *scope) {
	if !c.enter(s) {
		c.leave()
		return
	}
	defer c.leave()
	switch s.Kind() {
	case "expression_statement":
		for _, k := range kids(s) {
			switch k.Kind() {
			case "assignment":
				c.checkAssignment(k, sc)
			case "augmented_assignment":
				c.checkTarget(k.ChildByFieldName("left"), sc)
				c.checkExpr(k.ChildByFieldName("right"), sc)
			default:
				c.checkExpr(k, sc)
			}
		}
	case "return_statement", "assert_statement":
		for _, k := range kids(s) {
			c.checkExpr(k, sc)
		}
	case "raise_statement":
		for _, k := range kids(s) {
			c.checkExpr(k, sc)
		}
	case "pass_statement", "break_statement", "continue_statement":
	case "if_statement":
		c.checkExpr(s.ChildByFieldName("condition"), sc)
		c.checkBlock(s.ChildByFieldName("consequence"), sc)
		for _, k := range kids(s) {
			switch k.Kind() {
			case "elif_clause":
				c.checkExpr(k.ChildByFieldName("condition"), sc)
				c.checkBlock(k.ChildByFieldName("consequence"), sc)
			case "else_clause":
				c.checkBlock(k.ChildByFieldName("body"), sc)
			}
		}
	case "for_statement":
		if hasToken(s, "async") {
			c.report(RuleForbiddenSyntax, s, "async for is not allowed")
		}
		c.checkTarget(s.ChildByFieldName("left"), sc)
		c.checkExpr(s.ChildByFieldName("right"), sc)
		c.checkBlock(s.ChildByFieldName("body"), sc)
		if e := s.ChildByFieldName("alternative"); e != nil {
			c.checkBlock(e.ChildByFieldName("body"), sc)
		}
	case "while_statement":
		c.checkExpr(s.ChildByFieldName("condition"), sc)
		c.checkBlock(s.ChildByFieldName("body"), sc)
		if e := s.ChildByFieldName("alternative"); e != nil {
			c.checkBlock(e.ChildByFieldName("body"), sc)
		}
	case "try_statement":
		c.checkBlock(s.ChildByFieldName("body"), sc)
		for _, k := range kids(s) {
			switch k.Kind() {
			case "except_clause", "except_group_clause":
				for _, e := range kids(k) {
					switch e.Kind() {
					case "block":
						c.checkBlock(e, sc)
					case "as_pattern":
						c.checkAsPattern(e, sc)
					default:
						c.checkExpr(e, sc)
					}
				}
			case "else_clause":
				c.checkBlock(k.ChildByFieldName("body"), sc)
			case "finally_clause":
				for _, e := range kids(k) {
					c.checkBlock(e, sc)
				}
			}
		}
	case "with_statement":
		if hasToken(s, "async") {
			c.report(RuleForbiddenSyntax, s, "async with is not allowed")
		}
		for _, k := range kids(s) {
			switch k.Kind() {
			case "with_clause":
				for _, item := range kids(k) {
					v := item.ChildByFieldName("value")
					if v != nil && v.Kind() == "as_pattern" {
						c.checkAsPattern(v, sc)
					} else if v != nil {
						c.checkExpr(v, sc)
					}
				}
			case "block":
				c.checkBlock(k, sc)
			}
		}
	case "delete_statement":
		for _, k := range kids(s) {
			c.checkTarget(k, sc)
		}
	case "function_definition":
		c.checkFunction(s, nil, sc, false)
	case "decorated_definition":
		d := s.ChildByFieldName("definition")
		if d != nil && d.Kind() == "function_definition" {
			c.checkFunction(d, decorators(s), sc, false)
			return
		}
		c.report(RuleNestedClass, s, "classes inside functions are not allowed")
	case "class_definition":
		c.report(RuleNestedClass, s, "classes inside functions are not allowed")
	case "import_statement", "import_from_statement", "future_import_statement":
		c.report(RuleForbiddenImport, s, "imports are only allowed at module level")
	case "print_statement":
		c.report(RuleForbiddenBuiltin, s, "print is not allowed")
	case "exec_statement":
		c.report(RuleForbiddenBuiltin, s, "exec is not allowed")
	case "global_statement", "nonlocal_statement":
		c.report(RuleForbiddenSyntax, s, "%s is not allowed (helpers must be pure)", strings.TrimSuffix(s.Kind(), "_statement"))
	default:
		c.report(RuleForbiddenSyntax, s, "%s is not allowed", s.Kind())
	}
}

// checkAsPattern checks "expr as target" in with and except clauses.
func (c *pyChecker) checkAsPattern(n *sitter.Node, sc *scope) {
	for _, k := range kids(n) {
		if k.Kind() == "as_pattern_target" {
			for _, t := range kids(k) {
				c.checkTarget(t, sc)
			}
			continue
		}
		c.checkExpr(k, sc)
	}
}

func (c *pyChecker) checkAssignment(a *sitter.Node, sc *scope) {
	c.checkTarget(a.ChildByFieldName("left"), sc)
	if t := a.ChildByFieldName("type"); t != nil {
		c.checkType(t, sc)
	}
	r := a.ChildByFieldName("right")
	if r == nil {
		return
	}
	if r.Kind() == "assignment" {
		c.checkAssignment(r, sc)
		return
	}
	c.checkExpr(r, sc)
}

// checkTarget checks an assignment, loop or del target.
func (c *pyChecker) checkTarget(t *sitter.Node, sc *scope) {
	if t == nil {
		return
	}
	switch t.Kind() {
	case "identifier":
		c.checkBind(t)
	case "attribute":
		names, root := flattenAttr(c, t)
		if c.deepen(t, len(names)-1) && c.checkMutation(t, sc) {
			c.checkObjectAttrs(root, names, t, sc)
			c.checkExpr(root, sc)
		}
		c.depth -= len(names) - 1
	case "subscript":
		if c.checkMutation(t, sc) {
			c.checkExpr(t, sc)
		}
	case "pattern_list", "tuple_pattern", "list_pattern", "tuple", "list", "expression_list",
		"parenthesized_expression", "list_splat_pattern", "list_splat":
		for _, k := range kids(t) {
			c.checkTarget(k, sc)
		}
	default:
		c.report(RuleForbiddenSyntax, t, "assignment target %s is not allowed", t.Kind())
	}
}

// mutationRoot returns the object at the root of a store or delete target:
// attributes, subscripts and parentheses are stripped, and getattr(x, ...)
// stands for x, so the root is found whatever the form of the expression.
func (c *pyChecker) mutationRoot(t *sitter.Node) *sitter.Node {
	for {
		switch t.Kind() {
		case "attribute":
			t = t.ChildByFieldName("object")
		case "subscript":
			t = t.ChildByFieldName("value")
		case "parenthesized_expression":
			ks := kids(t)
			if len(ks) != 1 {
				return t
			}
			t = ks[0]
		case "call":
			fn, args := t.ChildByFieldName("function"), t.ChildByFieldName("arguments")
			if fn == nil || fn.Kind() != "identifier" || c.text(fn) != "getattr" || args == nil || args.Kind() != "argument_list" || len(kids(args)) == 0 {
				return t
			}
			t = kids(args)[0]
		default:
			return t
		}
		if t == nil {
			return nil
		}
	}
}

// checkMutation checks an attribute or subscript being assigned (plainly or
// augmented), deleted or bound as a loop or with target. A submission may
// only change its own objects:
//   - an attribute only as self.NAME, on the instance, in a method of the
//     class (attributes of functions, classes, modules and every other
//     object would outlive the instance or reach into the trainer);
//   - an item only of an object named by a local variable or by self.
//
// Anything rooted at an imported name is module-mutation, at a module-level
// name (a helper, the class, a constant) shared-state, and every other form
// (call results, parenthesized expressions, parameters' attributes, chains
// below self) foreign-mutation. It reports whether the target passed, so the
// caller checks the expression further only then.
func (c *pyChecker) checkMutation(t *sitter.Node, sc *scope) bool {
	what := "item"
	if t.Kind() == "attribute" {
		what = "attribute"
	}
	root := c.mutationRoot(t)
	if root != nil && root.Kind() == "identifier" {
		name := c.text(root)
		switch {
		case c.isImport(name, sc):
			c.report(RuleModuleMutation, t, "changing an %s of the imported name %s (%s)", what, name, c.snippet(t))
			return false
		case !sc.local(name) && c.moduleNames[name]:
			c.report(RuleSharedState, t, "changing an %s of the module-level %s outlives the optimizer instance (%s)", what, name, c.snippet(t))
			return false
		}
	}
	if what == "attribute" {
		obj := t.ChildByFieldName("object")
		if obj != nil && obj.Kind() == "identifier" && c.text(obj) == "self" && sc.isInstance() {
			return true
		}
		c.report(RuleForeignMutation, t, "only self.NAME may be assigned or deleted, in a method of the class (%s)", c.snippet(t))
		return false
	}
	if root != nil && root.Kind() == "identifier" && sc.local(c.text(root)) {
		return true
	}
	c.report(RuleForeignMutation, t, "items may only be changed on objects named by a local variable or self (%s)", c.snippet(t))
	return false
}

// snippet returns n's source text for a violation's detail, shortened.
func (c *pyChecker) snippet(n *sitter.Node) string {
	s := []rune(strings.Join(strings.Fields(c.text(n)), " "))
	if len(s) > 60 {
		return string(s[:60]) + "..."
	}
	return string(s)
}

// ---- expressions ----

// isImport reports whether name, referenced in scope sc, is an imported
// name (torch, math, Optimizer, Tensor).
func (c *pyChecker) isImport(name string, sc *scope) bool {
	return c.imports[name] != "" && !sc.local(name)
}

func (c *pyChecker) importChain(root *sitter.Node, names []string) string {
	return strings.Join(append([]string{c.imports[c.text(root)]}, names...), ".")
}

// canonical returns the dotted path an imported name or a chain below one
// stands for (Tensor -> torch.Tensor), or "" for any other expression.
func (c *pyChecker) canonical(n *sitter.Node, sc *scope) string {
	switch n.Kind() {
	case "identifier":
		if c.isImport(c.text(n), sc) {
			return c.imports[c.text(n)]
		}
	case "attribute":
		if names, root := flattenAttr(c, n); root.Kind() == "identifier" && c.isImport(c.text(root), sc) {
			return c.importChain(root, names)
		}
	}
	return ""
}

// flattenAttr turns a.b.c into (["b", "c"], a).
func flattenAttr(c *pyChecker, n *sitter.Node) ([]string, *sitter.Node) {
	var rev []string
	for n.Kind() == "attribute" {
		rev = append(rev, c.text(n.ChildByFieldName("attribute")))
		n = n.ChildByFieldName("object")
	}
	names := make([]string, len(rev))
	for i, s := range rev {
		names[len(rev)-1-i] = s
	}
	return names, n
}

func (c *pyChecker) checkExpr(n *sitter.Node, sc *scope) {
	if n == nil {
		return
	}
	if !c.enter(n) {
		c.leave()
		return
	}
	defer c.leave()
	switch n.Kind() {
	case "comment", "line_continuation", "integer", "float", "true", "false", "none", "ellipsis":
	case "identifier":
		c.checkName(n, sc)
	case "attribute":
		names, root := flattenAttr(c, n)
		if c.deepen(n, len(names)-1) {
			c.checkChain(root, names, n, sc)
		}
		c.depth -= len(names) - 1
	case "call":
		c.checkCall(n, sc)
	case "string":
		c.checkString(n, sc)
	case "concatenated_string", "binary_operator", "boolean_operator", "comparison_operator",
		"not_operator", "unary_operator", "conditional_expression", "parenthesized_expression",
		"tuple", "list", "set", "expression_list", "subscript", "slice", "list_splat", "dictionary_splat",
		"dictionary", "pair":
		for _, k := range kids(n) {
			c.checkExpr(k, sc)
		}
	case "list_comprehension", "set_comprehension", "dictionary_comprehension", "generator_expression":
		c.checkComprehension(n, sc)
	case "lambda":
		ls := newScope(sc)
		c.checkParameters(n.ChildByFieldName("parameters"), ls, sc, false)
		c.checkExpr(n.ChildByFieldName("body"), ls)
	case "named_expression":
		c.report(RuleForbiddenSyntax, n, "assignment expressions (:=) are not allowed")
	case "yield", "await":
		c.report(RuleForbiddenSyntax, n, "%s is not allowed", n.Kind())
	default:
		c.report(RuleForbiddenSyntax, n, "%s is not allowed", n.Kind())
	}
}

// checkName checks a name being read. A module name (torch, math) may only
// head an attribute chain, so reading it anywhere else is a violation.
func (c *pyChecker) checkName(id *sitter.Node, sc *scope) {
	name := c.text(id)
	switch {
	case !isASCIIIdent(name):
		// reported by checkTokens
	case isDunder(name):
		c.report(RuleDunderName, id, "reference to %s", name)
	case sc.local(name):
	case c.imports[name] != "":
		if canon := c.imports[name]; canon == "torch" || canon == "math" {
			c.report(RuleModuleReference, id, "module %s may only be used as torch.NAME / math.NAME", name)
		} else if torchClass(canon) && !c.classOK[id.Id()] {
			c.report(RuleModuleReference, id, "class %s may only be called, used in isinstance/issubclass or in an annotation", name)
		}
	case name == c.className:
		c.report(RuleClassReference, id, "the optimizer class may only be named in super(%s, self)", name)
	case c.moduleNames[name]:
	case pythonBuiltins[name]:
		if !allowedBuiltins[name] {
			c.report(RuleForbiddenBuiltin, id, "builtin %s is not allowed", name)
		} else if name == "getattr" || name == "hasattr" {
			c.report(RuleForbiddenBuiltin, id, "%s is only allowed as a direct call with a literal attribute name", name)
		}
	default:
		c.report(RuleUnknownName, id, "name %s is not defined", name)
	}
}

// checkChain checks root.names[0].names[1]... as one attribute chain.
func (c *pyChecker) checkChain(root *sitter.Node, names []string, at *sitter.Node, sc *scope) {
	if root.Kind() == "identifier" && c.isImport(c.text(root), sc) {
		full := c.importChain(root, names)
		for _, nm := range names {
			if isDunder(nm) {
				c.report(RuleDunderAttribute, at, "dunder attribute in %s", full)
				return
			}
		}
		if uninitializedTorch[full] {
			c.report(RuleUninitialized, at, "%s returns uninitialized memory, which differs from one process to the next; use torch.zeros or torch.zeros_like", full)
			return
		}
		canon := c.imports[c.text(root)]
		allowed := false
		switch {
		case canon == "math":
			allowed = len(names) == 1 && mathAttrs[names[0]]
		case strings.HasPrefix(full, "torch."):
			allowed = torchAllowed(strings.TrimPrefix(full, "torch."))
		}
		if !allowed {
			c.report(RuleModuleAttribute, at, "%s is not an allowed %s attribute", full, strings.SplitN(canon, ".", 2)[0])
		} else if torchClass(full) && !c.classOK[at.Id()] {
			c.report(RuleModuleReference, at, "class %s may only be called, used in isinstance/issubclass or in an annotation", full)
		}
		return
	}
	if root.Kind() == "call" && len(names) == 1 && allowedDunderMethods[names[0]] {
		if fn := root.ChildByFieldName("function"); fn != nil && fn.Kind() == "identifier" && c.text(fn) == "super" && !sc.local("super") {
			c.checkExpr(root, sc)
			return
		}
	}
	c.checkObjectAttrs(root, names, at, sc)
	c.checkExpr(root, sc)
}

// checkObjectAttrs checks attribute names read or written on a value that is
// not an imported module or class.
func (c *pyChecker) checkObjectAttrs(root *sitter.Node, names []string, at *sitter.Node, sc *scope) {
	for i, nm := range names {
		switch {
		case isDunder(nm):
			c.report(RuleDunderAttribute, at, "dunder attribute %s", nm)
		case strings.HasPrefix(nm, "_"):
			own := i == 0 && root.Kind() == "identifier" && c.text(root) == "self" && sc.isInstance() && c.classNames[nm]
			if !own {
				c.report(RulePrivateAttribute, at, "private attribute %s (allowed only as self.NAME in a method, for names the class defines)", nm)
			}
		case uninitializedAttrs[nm]:
			c.report(RuleUninitialized, at, "%s can return uninitialized memory, which differs from one process to the next; use new_zeros, zeros_like or copy_", nm)
		default:
			if why := attrDenied(nm); why != "" {
				c.report(RuleForbiddenAttribute, at, "attribute %s is not allowed: %s", nm, why)
			}
		}
	}
}

func (c *pyChecker) checkCall(n *sitter.Node, sc *scope) {
	fn := n.ChildByFieldName("function")
	args := n.ChildByFieldName("arguments")
	if fn != nil && fn.Kind() == "identifier" && (c.text(fn) == "getattr" || c.text(fn) == "hasattr") &&
		!sc.local(c.text(fn)) && !c.moduleNames[c.text(fn)] {
		c.checkGetattr(n, c.text(fn), args, sc)
		return
	}
	if fn != nil {
		c.classOK[fn.Id()] = true
		if c.canonical(fn, sc) == "torch.Tensor" {
			c.report(RuleUninitialized, n, "calling torch.Tensor can return uninitialized memory, which differs from one process to the next; use torch.tensor or torch.zeros")
		}
	}
	if fn != nil && fn.Kind() == "identifier" && (c.text(fn) == "isinstance" || c.text(fn) == "issubclass") &&
		!sc.local(c.text(fn)) && args != nil && args.Kind() == "argument_list" {
		if as := kids(args); len(as) == 2 {
			c.markClassOK(as[1])
		}
	}
	c.checkExpr(fn, sc)
	if fn != nil && fn.Kind() == "identifier" && c.text(fn) == "super" && !sc.local("super") && args != nil && args.Kind() == "argument_list" {
		// super(Class, self): the class name is allowed as the first argument.
		as := kids(args)
		if len(as) == 2 && as[0].Kind() == "identifier" && c.text(as[0]) == c.className && !sc.local(c.className) {
			c.checkExpr(as[1], sc)
			return
		}
	}
	c.checkArgs(args, sc)
}

// markClassOK marks a class operand of isinstance or issubclass (a name, a
// chain, or a tuple of them) as a place where an imported class may appear.
func (c *pyChecker) markClassOK(n *sitter.Node) {
	switch n.Kind() {
	case "identifier", "attribute":
		c.classOK[n.Id()] = true
	case "tuple", "parenthesized_expression":
		for _, k := range kids(n) {
			c.markClassOK(k)
		}
	}
}

func (c *pyChecker) checkArgs(args *sitter.Node, sc *scope) {
	if args == nil {
		return
	}
	if args.Kind() == "generator_expression" {
		c.checkExpr(args, sc)
		return
	}
	for _, a := range kids(args) {
		switch a.Kind() {
		case "keyword_argument":
			c.checkExpr(a.ChildByFieldName("value"), sc)
		case "parenthesized_list_splat":
			c.report(RuleForbiddenSyntax, a, "parenthesized unpacking is not allowed")
		default:
			c.checkExpr(a, sc)
		}
	}
}

// checkGetattr checks getattr(obj, "name"[, default]) and hasattr(obj,
// "name"): the name must be a plain string literal, and the access is then
// checked exactly as obj.name.
func (c *pyChecker) checkGetattr(call *sitter.Node, fname string, args *sitter.Node, sc *scope) {
	var as []*sitter.Node
	plain := args != nil && args.Kind() == "argument_list"
	if plain {
		as = kids(args)
		for _, a := range as {
			if a.Kind() == "keyword_argument" || a.Kind() == "list_splat" || a.Kind() == "dictionary_splat" {
				plain = false
			}
		}
	}
	max := 3
	if fname == "hasattr" {
		max = 2
	}
	if !plain || len(as) < 2 || len(as) > max {
		c.report(RuleDynamicAttribute, call, "%s needs an object and a literal attribute name", fname)
		c.checkArgs(args, sc)
		return
	}
	obj, lit := as[0], as[1]
	for _, extra := range as[2:] {
		c.checkExpr(extra, sc)
	}
	name, ok := c.literalName(lit)
	if !ok {
		c.report(RuleDynamicAttribute, call, "%s with a computed attribute name", fname)
		if obj.Kind() == "identifier" && c.isImport(c.text(obj), sc) {
			return
		}
		c.checkExpr(obj, sc)
		return
	}
	var names []string
	root := obj
	if obj.Kind() == "attribute" {
		names, root = flattenAttr(c, obj)
	}
	c.checkChain(root, append(names, name), call, sc)
}

// literalName returns the value of a plain string literal holding an ASCII
// identifier: no prefix other than r or u, no escapes, no interpolation.
func (c *pyChecker) literalName(n *sitter.Node) (string, bool) {
	if n.Kind() != "string" {
		return "", false
	}
	var content strings.Builder
	for i := uint(0); i < n.ChildCount(); i++ {
		k := n.Child(i)
		switch k.Kind() {
		case "string_start":
			prefix := strings.TrimRight(c.text(k), `"'`)
			if strings.Trim(strings.ToLower(prefix), "ru") != "" {
				return "", false
			}
		case "string_content":
			if len(kids(k)) != 0 {
				return "", false
			}
			content.WriteString(c.text(k))
		case "string_end":
		default:
			return "", false
		}
	}
	s := content.String()
	return s, isASCIIIdent(s)
}

func (c *pyChecker) checkString(n *sitter.Node, sc *scope) {
	for _, k := range kids(n) {
		if k.Kind() != "interpolation" {
			continue
		}
		c.checkExpr(k.ChildByFieldName("expression"), sc)
		if fs := k.ChildByFieldName("format_specifier"); fs != nil {
			for _, fe := range kids(fs) {
				if fe.Kind() == "format_expression" {
					c.checkExpr(fe.ChildByFieldName("expression"), sc)
				}
			}
		}
	}
}

func (c *pyChecker) checkComprehension(n *sitter.Node, sc *scope) {
	cs := newScope(sc)
	var body *sitter.Node
	for _, k := range kids(n) {
		switch k.Kind() {
		case "for_in_clause":
			if hasToken(k, "async") {
				c.report(RuleForbiddenSyntax, k, "async comprehensions are not allowed")
			}
			c.checkExpr(k.ChildByFieldName("right"), cs)
			left := k.ChildByFieldName("left")
			c.collectTargets(left, cs)
			c.checkTarget(left, cs)
		case "if_clause":
			for _, e := range kids(k) {
				c.checkExpr(e, cs)
			}
		default:
			if b := n.ChildByFieldName("body"); b != nil && b.Id() == k.Id() {
				body = k
				continue
			}
			c.checkExpr(k, cs)
		}
	}
	c.checkExpr(body, cs)
}

// checkType checks an annotation. Annotations are evaluated when the def or
// assignment runs (unless postponed), so they may only name types: names,
// attribute chains, subscripts of those, X | Y unions, None, strings and
// tuples or lists inside subscripts. Calls and other expressions are
// refused, so nothing runs while a class or function is being defined.
func (c *pyChecker) checkType(t *sitter.Node, sc *scope) {
	if t == nil {
		return
	}
	if !c.enter(t) {
		c.leave()
		return
	}
	defer c.leave()
	switch t.Kind() {
	case "type", "type_parameter", "union_type", "generic_type", "tuple", "list", "subscript", "parenthesized_expression":
		for _, k := range kids(t) {
			c.checkType(k, sc)
		}
	case "binary_operator":
		if op := t.ChildByFieldName("operator"); op == nil || c.text(op) != "|" {
			c.report(RuleForbiddenSyntax, t, "annotations may only name types")
			return
		}
		for _, k := range kids(t) {
			c.checkType(k, sc)
		}
	case "identifier", "attribute", "none", "ellipsis":
		c.classOK[t.Id()] = true
		c.checkExpr(t, sc)
	case "string", "concatenated_string":
		if !c.isConst(t) {
			c.report(RuleForbiddenSyntax, t, "annotations may only name types")
		}
	default:
		c.report(RuleForbiddenSyntax, t, "annotations may only name types (%s)", t.Kind())
	}
}
