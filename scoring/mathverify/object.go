package mathverify

import (
	"math/big"
	"strings"
)

// objKind is the shape of a parsed answer.
type objKind uint8

const (
	oScalar   objKind = iota // one value (pct marks a percentage)
	oInfinity                // ±∞ as an answer
	oList                    // a bare list: 1, 2, 3 (no brackets)
	oTuple                   // (a, b, c) or [a, b, c] with three or more entries
	oPair                    // (a, b): an ordered pair or an open interval
	oSet                     // \{a, b\}, or the values of a ± expression
	oInterval                // [a, b), (a, b], [a, b], or an inequality
	oUnion                   // intervals and sets joined by \cup
	oEquation                // lhs = rhs that is not "variable = value"
	oAssign                  // x = 1, y = 2: values named by distinct variables
	oText                    // prose
)

var kindNames = [...]string{"scalar", "infinity", "list", "tuple", "pair", "set", "interval", "union", "equation", "assignment", "text"}

func (k objKind) String() string { return kindNames[k] }

type end struct {
	inf int // -1, +1 for ±∞; 0 for a finite end
	v   value
}

type obj struct {
	kind   objKind
	v      value // oScalar; oEquation: lhs - rhs
	pct    bool  // oScalar written as a percentage; v is already divided by 100
	raw    value // oScalar percentage: the number before the % sign
	inf    int   // oInfinity
	elems  []obj
	names  []string // oAssign
	lo, hi end      // oInterval
	loC    bool     // closed at lo
	hiC    bool     // closed at hi
	fromPM bool     // oSet made from a ± expression
	text   string   // oText
	rhs    *obj     // oEquation: its right-hand side when that is a constant scalar
	eqn    *value   // oScalar from "v = rhs" with a non-constant rhs: v - rhs
}

type builder struct {
	m *meter
}

func (b *builder) ev() *evaluator { return &evaluator{m: b.m, sign: 1} }

// answer parses a whole answer string into an object.
func (b *builder) answer(s string) obj {
	s = strings.TrimSpace(s)
	s = strings.TrimRight(s, " .")
	s = strings.TrimSpace(s)
	if s == "" {
		fail("syntax: empty answer")
	}
	toks := lex(s, b.m)
	for _, t := range toks {
		if t.kind == tWord {
			return obj{kind: oText, text: normText(s)}
		}
	}
	n := parseTokens(toks, b.m)
	return b.top(n)
}

// normText normalizes prose for comparison: lower case, no LaTeX markup, single
// spaces.
func normText(s string) string {
	r := strings.NewReplacer(`\text`, " ", `\textbf`, " ", `\mathrm`, " ", `\mbox`, " ",
		"{", " ", "}", " ", "$", " ", `\`, " ", "~", " ")
	s = strings.ToLower(r.Replace(s))
	return strings.Join(strings.Fields(s), " ")
}

// lhsVar returns the variable and right-hand side of "x = rhs" or "x \in rhs",
// also when the left-hand side is a tuple of distinct variables: "(p, q) = rhs"
// (named "(p,q)").
func lhsVar(n *node) (string, *node, bool) {
	if n.kind != nRel || len(n.ops) != 1 || (n.ops[0] != tEq && n.ops[0] != tIn) {
		return "", nil, false
	}
	l := n.kids[0]
	if l.kind == nIdent {
		return l.text, n.kids[1], true
	}
	if l.kind != nBracket || l.open != tLParen || l.close != tRParen {
		return "", nil, false
	}
	names := make([]string, len(l.kids))
	seen := map[string]bool{}
	for i, k := range l.kids {
		if k.kind != nIdent || seen[k.text] {
			return "", nil, false
		}
		seen[k.text] = true
		names[i] = k.text
	}
	return "(" + strings.Join(names, ",") + ")", n.kids[1], true
}

// lastOfChain turns a chain of equalities a = b = … = z into a = z: the last
// member is the value the chain arrives at ("x = 5 + 6 = 11" answers 11).
func lastOfChain(n *node) *node {
	if n.kind != nRel || len(n.ops) < 2 {
		return n
	}
	for _, op := range n.ops {
		if op != tEq {
			return n
		}
	}
	return &node{kind: nRel, ops: n.ops[:1], kids: []*node{n.kids[0], n.kids[len(n.kids)-1]}}
}

func (b *builder) top(n *node) obj {
	if n.kind != nList {
		return b.elem(n)
	}
	var names []string
	named, distinct := 0, map[string]bool{}
	rhs := make([]*node, len(n.kids))
	for i, k := range n.kids {
		b.m.spend(1)
		k = lastOfChain(k)
		if name, r, ok := lhsVar(k); ok {
			named++
			distinct[name] = true
			names = append(names, name)
			rhs[i] = r
		} else {
			rhs[i] = k
		}
	}
	if named == len(n.kids) && len(distinct) == named && named > 1 {
		o := obj{kind: oAssign, names: names}
		for _, r := range rhs {
			o.elems = append(o.elems, b.elem(r))
		}
		return o
	}
	return b.listOf(oList, rhs)
}

// listOf builds the elements of a list or set, splicing in the values of ±.
func (b *builder) listOf(kind objKind, kids []*node) obj {
	o := obj{kind: kind}
	for _, k := range kids {
		if _, r, ok := lhsVar(k); ok {
			k = r
		}
		e := b.elem(k)
		if e.kind == oSet && e.fromPM {
			o.elems = append(o.elems, e.elems...)
			continue
		}
		o.elems = append(o.elems, e)
	}
	return o
}

// infSign reports whether n is ∞, +∞ or -∞.
func infSign(n *node) int {
	switch {
	case n.kind == nInf:
		return 1
	case n.kind == nSum && len(n.kids) == 1 && n.kids[0].kind == nInf:
		switch n.signs[0] {
		case sPlus:
			return 1
		case sMinus:
			return -1
		}
	}
	return 0
}

func (b *builder) elem(n *node) obj {
	b.m.spend(1)
	switch n.kind {
	case nList:
		return b.top(n)
	case nRel:
		return b.relation(n)
	case nBracket:
		return b.bracket(n)
	case nSet:
		return b.listOf(oSet, n.kids)
	case nEmpty:
		return obj{kind: oSet}
	case nReals:
		return obj{kind: oInterval, lo: end{inf: -1}, hi: end{inf: 1}}
	case nUnion:
		o := obj{kind: oUnion}
		for _, k := range n.kids {
			e := b.elem(k)
			switch e.kind {
			case oInterval, oPair, oSet, oUnion:
				o.elems = append(o.elems, e)
			default:
				fail("unsupported: union of %s", e.kind)
			}
		}
		return o
	}
	if s := infSign(n); s != 0 {
		return obj{kind: oInfinity, inf: s}
	}
	// a percentage, possibly signed: 25\%, -5\%
	pn, negated := n, false
	if n.kind == nSum && len(n.kids) == 1 && (n.signs[0] == sMinus || n.signs[0] == sPlus) {
		pn, negated = n.kids[0], n.signs[0] == sMinus
	}
	if pn.kind == nPct && !hasPM(pn) {
		raw := b.ev().eval(pn.kids[0])
		if negated {
			raw = neg(raw)
		}
		return obj{kind: oScalar, pct: true, raw: raw, v: b.m.div(raw, valInt(100))}
	}
	if hasPM(n) {
		plus := b.ev()
		minus := b.ev()
		minus.sign = -1
		return obj{kind: oSet, fromPM: true, elems: []obj{
			{kind: oScalar, v: plus.eval(n)},
			{kind: oScalar, v: minus.eval(n)},
		}}
	}
	return obj{kind: oScalar, v: b.ev().eval(n)}
}

func (b *builder) endOf(n *node) end {
	if s := infSign(n); s != 0 {
		return end{inf: s}
	}
	if hasPM(n) {
		fail("unsupported: ± in an interval end")
	}
	return end{v: b.ev().eval(n)}
}

func (b *builder) bracket(n *node) obj {
	interval := n.open == tLBrack || n.close == tRBrack
	if len(n.kids) == 2 && interval {
		o := obj{kind: oInterval, lo: b.endOf(n.kids[0]), hi: b.endOf(n.kids[1]),
			loC: n.open == tLBrack, hiC: n.close == tRBrack}
		return o.fixInf()
	}
	if interval && !(n.open == tLBrack && n.close == tRBrack) {
		fail("syntax: mismatched brackets around %d entries", len(n.kids))
	}
	kind := oTuple
	if len(n.kids) == 2 && n.open == tLParen {
		kind = oPair
	}
	o := obj{kind: kind}
	for _, k := range n.kids {
		o.elems = append(o.elems, b.elem(k))
	}
	return o
}

// fixInf makes infinite ends open: [-∞, 3] is (-∞, 3].
func (o obj) fixInf() obj {
	if o.lo.inf != 0 {
		o.loC = false
	}
	if o.hi.inf != 0 {
		o.hiC = false
	}
	return o
}

func (b *builder) relation(n *node) obj {
	n = lastOfChain(n)
	if _, r, ok := lhsVar(n); ok {
		o := b.elem(r)
		// y = -x/2 + 3/4 is the value of y, and also the equation it states
		if n.ops[0] == tEq && n.kids[0].kind == nIdent && o.kind == oScalar && !o.pct && !o.v.isConst() {
			eqn := b.m.add(b.ev().eval(n.kids[0]), o.v, true)
			o.eqn = &eqn
		}
		return o
	}
	if len(n.ops) == 1 && n.ops[0] == tEq {
		l, r := b.ev().eval(n.kids[0]), b.ev().eval(n.kids[1])
		if hasPM(n) {
			fail("unsupported: ± in an equation")
		}
		o := obj{kind: oEquation, v: b.m.add(l, r, true)}
		if r.isConst() && namesAQuantity(n.kids[0]) {
			o.rhs = &obj{kind: oScalar, v: r}
		}
		return o
	}
	return b.inequality(n)
}

// inequality turns x < a, a \le x, a < x \le b, x \ne a into intervals.
func (b *builder) inequality(n *node) obj {
	vi := -1
	for i, k := range n.kids {
		if k.kind == nIdent {
			if vi >= 0 {
				fail("unsupported: relation between variables")
			}
			vi = i
		}
	}
	if vi < 0 {
		if len(n.ops) == 1 {
			if o, ok := b.linearInequality(n); ok {
				return o
			}
		}
		fail("unsupported: relation without a variable")
	}
	less := func(op tokKind) (bool, bool, bool) { // isLess, closed, ok
		switch op {
		case tLT:
			return true, false, true
		case tLE:
			return true, true, true
		case tGT:
			return false, false, true
		case tGE:
			return false, true, true
		}
		return false, false, false
	}
	if len(n.ops) == 1 && n.ops[0] == tNE {
		a := b.endOf(n.kids[1-vi])
		return obj{kind: oUnion, elems: []obj{
			{kind: oInterval, lo: end{inf: -1}, hi: a},
			{kind: oInterval, lo: a, hi: end{inf: 1}},
		}}
	}
	o := obj{kind: oInterval, lo: end{inf: -1}, hi: end{inf: 1}}
	switch {
	case len(n.ops) == 1:
		isLess, closed, ok := less(n.ops[0])
		if !ok {
			fail("unsupported: relation")
		}
		other := b.endOf(n.kids[1-vi])
		// x < a or a > x: upper bound
		if isLess == (vi == 0) {
			o.hi, o.hiC = other, closed
		} else {
			o.lo, o.loC = other, closed
		}
	case len(n.ops) == 2 && vi == 1:
		l1, c1, ok1 := less(n.ops[0])
		l2, c2, ok2 := less(n.ops[1])
		if !ok1 || !ok2 || l1 != l2 {
			fail("unsupported: relation chain")
		}
		a, z := b.endOf(n.kids[0]), b.endOf(n.kids[2])
		if l1 {
			o.lo, o.loC, o.hi, o.hiC = a, c1, z, c2
		} else {
			o.lo, o.loC, o.hi, o.hiC = z, c2, a, c1
		}
	default:
		fail("unsupported: relation chain")
	}
	return o.fixInf()
}

// namesAQuantity reports whether the left-hand side of an equation names the
// quantity its right-hand side gives: a single term without numbers, such as
// f(x), |AB| or \frac{NO}{BO} (not a + 3z or 2x).
func namesAQuantity(n *node) bool {
	if n.kind == nSum && len(n.kids) > 1 {
		return false
	}
	var hasNum func(*node) bool
	hasNum = func(n *node) bool {
		if n.kind == nNum {
			return true
		}
		for _, k := range n.kids {
			if hasNum(k) {
				return true
			}
		}
		return false
	}
	return !hasNum(n)
}

// linearInequality solves a single relation that is linear in one variable
// with a rational coefficient: -x > -1 is x < 1, 2x + 1 \le 5 is x \le 2.
func (b *builder) linearInequality(n *node) (obj, bool) {
	d := b.m.add(b.ev().eval(n.kids[0]), b.ev().eval(n.kids[1]), true) // lhs - rhs
	r, ok := d.den.constRat()
	if !ok || r.Sign() <= 0 {
		return obj{}, false
	}
	var a *big.Rat
	var rest poly
	for _, t := range d.num {
		vars := 0
		for _, at := range t.m.atoms {
			if at.opaque || at.name != piName {
				vars++
			}
		}
		switch {
		case vars == 0:
			rest = append(rest, t)
		case vars == 1 && a == nil && len(t.m.atoms) == 1 && len(t.m.rads) == 0 && t.m.atoms[0].exp == 1 && !t.m.atoms[0].opaque:
			a = t.c
		default:
			return obj{}, false
		}
	}
	if a == nil {
		return obj{}, false
	}
	// a·x + rest op 0, so x op' -rest/a (op flips when a < 0)
	bound := end{v: value{num: b.m.polyScale(rest, new(big.Rat).Neg(new(big.Rat).Inv(a))), den: polyInt(1)}}
	op := n.ops[0]
	if a.Sign() < 0 {
		switch op {
		case tLT:
			op = tGT
		case tLE:
			op = tGE
		case tGT:
			op = tLT
		case tGE:
			op = tLE
		}
	}
	switch op {
	case tNE:
		return obj{kind: oUnion, elems: []obj{
			{kind: oInterval, lo: end{inf: -1}, hi: bound},
			{kind: oInterval, lo: bound, hi: end{inf: 1}},
		}}, true
	case tLT, tLE:
		return obj{kind: oInterval, lo: end{inf: -1}, hi: bound, hiC: op == tLE}, true
	case tGT, tGE:
		return obj{kind: oInterval, lo: bound, hi: end{inf: 1}, loC: op == tGE}, true
	}
	return obj{}, false
}
