package mathverify

// maxDepth bounds the nesting of the parse tree (and so the recursion of every
// walk over it).
const maxDepth = 1024

type nodeKind uint8

const (
	nNum     nodeKind = iota // text: literal
	nIdent                   // text: name
	nPi                      // π
	nInf                     // ∞
	nEmpty                   // ∅
	nReals                   // ℝ
	nSum                     // kids with signs
	nProd                    // kids, divs[i] marks a divisor
	nPow                     // kids[0] ^ kids[1]
	nFact                    // kids[0]!
	nDFact                   // kids[0]!!
	nRoot                    // kids[0] radicand, kids[1] index or absent
	nBinom                   // binom(kids[0], kids[1])
	nFunc                    // text: name; kids: arguments; base: log base
	nAbs                     // |kids[0]|
	nFloor                   // floor(kids[0])
	nCeil                    // ceil(kids[0])
	nPct                     // kids[0] percent
	nDeg                     // kids[0] degrees
	nMixed                   // kids[0] + kids[1]/kids[2], a mixed number
	nBracket                 // open, close; kids: elements (two or more)
	nSet                     // \{ kids \}
	nList                    // kids separated by commas, "or", "and"
	nUnion                   // kids joined by \cup
	nRel                     // kids joined by ops (=, <, >, \le, \ge, \ne, \in)
)

type sgn uint8

const (
	sPlus sgn = iota
	sMinus
	sPM
	sMP
)

type node struct {
	kind        nodeKind
	text        string
	kids        []*node
	signs       []sgn     // nSum
	divs        []bool    // nProd
	ops         []tokKind // nRel
	open, close tokKind   // nBracket
	base        *node     // nFunc: logarithm base
}

type parser struct {
	toks  []token
	pos   int
	m     *meter
	depth int
	abs   int
}

// parseTokens parses a whole answer.
func parseTokens(toks []token, m *meter) *node {
	p := &parser{toks: toks, m: m}
	n := p.list(tEOF)
	if p.peek().kind != tEOF {
		p.syntax("unexpected token")
	}
	return n
}

func (p *parser) peek() token {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return token{kind: tEOF}
}

func (p *parser) peekAt(k int) token {
	if p.pos+k < len(p.toks) {
		return p.toks[p.pos+k]
	}
	return token{kind: tEOF}
}

func (p *parser) next() token {
	t := p.peek()
	if p.pos < len(p.toks) {
		p.pos++
	}
	p.m.spend(1)
	return t
}

func (p *parser) expect(k tokKind, what string) {
	if p.peek().kind != k {
		p.syntax("expected " + what)
	}
	p.next()
}

func (p *parser) syntax(msg string) {
	fail("syntax: %s at token %d", msg, p.pos)
}

func (p *parser) enter() {
	p.depth++
	if p.depth > maxDepth {
		fail("unsupported: nesting deeper than %d", maxDepth)
	}
}

func (p *parser) leave() { p.depth-- }

func isSep(k tokKind) bool { return k == tComma || k == tSemi || k == tSep }

// list: union { sep union } up to end (not consumed).
func (p *parser) list(end tokKind) *node {
	p.enter()
	defer p.leave()
	var kids []*node
	for {
		for isSep(p.peek().kind) { // leading or doubled separators ("x = 1, and 2")
			p.next()
		}
		if p.peek().kind == end {
			break
		}
		kids = append(kids, p.union())
		if !isSep(p.peek().kind) {
			break
		}
	}
	switch len(kids) {
	case 0:
		p.syntax("empty")
	case 1:
		return kids[0]
	}
	return &node{kind: nList, kids: kids}
}

func (p *parser) union() *node {
	first := p.rel()
	if p.peek().kind != tCup {
		return first
	}
	kids := []*node{first}
	for p.peek().kind == tCup {
		p.next()
		kids = append(kids, p.rel())
	}
	return &node{kind: nUnion, kids: kids}
}

func isRelOp(k tokKind) bool {
	switch k {
	case tEq, tLT, tGT, tLE, tGE, tNE, tIn:
		return true
	}
	return false
}

func (p *parser) rel() *node {
	first := p.sum()
	if !isRelOp(p.peek().kind) {
		return first
	}
	n := &node{kind: nRel, kids: []*node{first}}
	for isRelOp(p.peek().kind) {
		n.ops = append(n.ops, p.next().kind)
		n.kids = append(n.kids, p.sum())
	}
	return n
}

func signOf(k tokKind) (sgn, bool) {
	switch k {
	case tPlus:
		return sPlus, true
	case tMinus:
		return sMinus, true
	case tPM:
		return sPM, true
	case tMP:
		return sMP, true
	}
	return 0, false
}

func (p *parser) sum() *node {
	p.enter()
	defer p.leave()
	s := sPlus
	if k, ok := signOf(p.peek().kind); ok {
		p.next()
		s = k
	}
	first := p.term()
	if _, more := signOf(p.peek().kind); !more && s == sPlus {
		return first
	}
	n := &node{kind: nSum, kids: []*node{first}, signs: []sgn{s}}
	for {
		k, ok := signOf(p.peek().kind)
		if !ok {
			break
		}
		p.next()
		n.kids = append(n.kids, p.term())
		n.signs = append(n.signs, k)
	}
	if len(n.kids) == 1 && n.signs[0] == sPlus {
		return n.kids[0]
	}
	return n
}

func (p *parser) startsPrimary(t token) bool {
	switch t.kind {
	case tNum, tIdent, tPi, tLParen, tFrac, tSqrt, tBinom, tFunc, tLFloor, tLCeil, tLBrace:
		return true
	case tBar:
		return p.abs == 0
	}
	return false
}

func (p *parser) term() *node {
	p.enter()
	defer p.leave()
	first := p.factor()
	if t := p.peek(); t.kind != tMul && t.kind != tDiv && t.kind != tUnit && !p.startsPrimary(t) {
		return first
	}
	n := &node{kind: nProd, kids: []*node{first}, divs: []bool{false}}
	for {
		t := p.peek()
		switch {
		case t.kind == tMul || t.kind == tDiv:
			p.next()
			n.kids = append(n.kids, p.factor())
			n.divs = append(n.divs, t.kind == tDiv)
		case t.kind == tUnit:
			p.next()
			p.unitPower()
			for p.peek().kind == tDiv && p.peekAt(1).kind == tUnit { // m/s, km/h
				p.next()
				p.next()
				p.unitPower()
			}
		case p.startsPrimary(t):
			last := n.kids[len(n.kids)-1]
			if t.kind == tNum && last.kind == nNum {
				p.syntax("adjacent numbers")
			}
			n.kids = append(n.kids, p.power())
			n.divs = append(n.divs, false)
		default:
			if len(n.kids) == 1 {
				return n.kids[0]
			}
			return n
		}
	}
}

// unitPower skips the power of a unit just read (cm^2, m²).
func (p *parser) unitPower() {
	if p.peek().kind == tCaret && p.peekAt(1).kind == tNum {
		p.next()
		p.next()
	}
}

func (p *parser) factor() *node {
	if k, ok := signOf(p.peek().kind); ok {
		p.next()
		p.enter()
		defer p.leave()
		return &node{kind: nSum, kids: []*node{p.factor()}, signs: []sgn{k}}
	}
	return p.power()
}

// power: primary followed by any number of ^exp, !, !!, %, degree marks.
func (p *parser) power() *node {
	p.enter()
	defer p.leave()
	n := p.primary()
	for {
		switch p.peek().kind {
		case tCaret:
			p.next()
			switch {
			case p.peek().kind == tDeg:
				p.next()
				n = &node{kind: nDeg, kids: []*node{n}}
			case p.peek().kind == tLBrace && p.peekAt(1).kind == tDeg && p.peekAt(2).kind == tRBrace:
				p.next()
				p.next()
				p.next()
				n = &node{kind: nDeg, kids: []*node{n}}
			default:
				n = &node{kind: nPow, kids: []*node{n, p.exponent()}}
			}
		case tBang:
			p.next()
			if p.peek().kind == tBang && !p.peek().space {
				p.next()
				n = &node{kind: nDFact, kids: []*node{n}}
			} else {
				n = &node{kind: nFact, kids: []*node{n}}
			}
		case tPct:
			p.next()
			n = &node{kind: nPct, kids: []*node{n}}
		case tDeg:
			p.next()
			n = &node{kind: nDeg, kids: []*node{n}}
		default:
			return n
		}
	}
}

// exponent reads what follows ^: a braced group, or a signed atom (a whole
// number, a letter, a command with its arguments, a parenthesized group).
func (p *parser) exponent() *node {
	p.enter()
	defer p.leave()
	if p.peek().kind == tLBrace {
		p.next()
		n := p.list(tRBrace)
		p.expect(tRBrace, "}")
		return n
	}
	if k, ok := signOf(p.peek().kind); ok {
		p.next()
		return &node{kind: nSum, kids: []*node{p.exponent()}, signs: []sgn{k}}
	}
	return p.primary()
}

// arg reads a LaTeX macro argument: a braced group, or a single character of a
// number (\frac12), or one primary.
func (p *parser) arg(plain bool) *node {
	t := p.peek()
	if t.kind == tLBrace {
		p.next()
		n := p.list(tRBrace)
		p.expect(tRBrace, "}")
		return n
	}
	if t.kind == tNum && len(t.text) > 1 && !plain {
		p.toks[p.pos].text = t.text[1:]
		p.toks[p.pos].space = false
		p.m.spend(1)
		return &node{kind: nNum, text: t.text[:1]}
	}
	return p.primary()
}

func isIntLit(n *node) bool {
	if n.kind != nNum {
		return false
	}
	for i := 0; i < len(n.text); i++ {
		if !isDigit(n.text[i]) {
			return false
		}
	}
	return true
}

func (p *parser) primary() *node {
	p.enter()
	defer p.leave()
	t := p.next()
	switch t.kind {
	case tNum:
		n := &node{kind: nNum, text: t.text}
		// a mixed number: 2\frac{1}{2} (or 2\frac12) is 5/2
		if p.peek().kind == tFrac && isIntLit(n) {
			if a, b, k, ok := p.mixedAhead(); ok {
				for range k {
					p.next()
				}
				return &node{kind: nMixed, kids: []*node{n, a, b}}
			}
		}
		return n
	case tIdent:
		name := t.text
		if p.peek().kind == tUnder {
			p.next()
			name += "_" + p.subscript()
		}
		return &node{kind: nIdent, text: name}
	case tPi:
		return &node{kind: nPi}
	case tInf:
		return &node{kind: nInf}
	case tEmpty:
		return &node{kind: nEmpty}
	case tReals:
		return &node{kind: nReals}
	case tLParen, tLBrack:
		return p.bracket(t.kind)
	case tLBrace:
		n := p.list(tRBrace)
		p.expect(tRBrace, "}")
		return n
	case tLSet:
		n := &node{kind: nSet}
		if p.peek().kind != tRSet {
			inner := p.list(tRSet)
			if inner.kind == nList {
				n.kids = inner.kids
			} else {
				n.kids = []*node{inner}
			}
		}
		p.expect(tRSet, `\}`)
		return n
	case tBar:
		p.abs++
		inner := p.sum()
		p.abs--
		p.expect(tBar, "|")
		return &node{kind: nAbs, kids: []*node{inner}}
	case tLFloor:
		inner := p.sum()
		p.expect(tRFloor, `\rfloor`)
		return &node{kind: nFloor, kids: []*node{inner}}
	case tLCeil:
		inner := p.sum()
		p.expect(tRCeil, `\rceil`)
		return &node{kind: nCeil, kids: []*node{inner}}
	case tFrac:
		a := p.arg(false)
		b := p.arg(false)
		return &node{kind: nProd, kids: []*node{a, b}, divs: []bool{false, true}}
	case tSqrt:
		n := &node{kind: nRoot}
		var idx *node
		if p.peek().kind == tLBrack {
			p.next()
			idx = p.sum()
			p.expect(tRBrack, "]")
		}
		n.kids = []*node{p.arg(t.text == "plain")}
		if idx != nil {
			n.kids = append(n.kids, idx)
		}
		return n
	case tBinom:
		a := p.arg(false)
		b := p.arg(false)
		return &node{kind: nBinom, kids: []*node{a, b}}
	case tFunc:
		return p.function(t.text)
	case tUnknown:
		fail("unsupported: %q", t.text)
	case tWord:
		fail("unsupported: prose %q", t.text)
	case tEOF:
		p.syntax("unexpected end")
	}
	p.syntax("unexpected token")
	return nil
}

// mixedAhead recognizes \frac{int}{int} or \frac dd after an integer without
// consuming anything; k is the number of tokens it spans.
func (p *parser) mixedAhead() (a, b *node, k int, ok bool) {
	t1, t2, t3 := p.peekAt(1), p.peekAt(2), p.peekAt(3)
	if t1.kind == tNum && len(t1.text) == 2 && isDigit(t1.text[0]) && isDigit(t1.text[1]) {
		return &node{kind: nNum, text: t1.text[:1]}, &node{kind: nNum, text: t1.text[1:]}, 2, true
	}
	t4, t5, t6 := p.peekAt(4), p.peekAt(5), p.peekAt(6)
	if t1.kind == tLBrace && t2.kind == tNum && t3.kind == tRBrace && t4.kind == tLBrace && t5.kind == tNum && t6.kind == tRBrace {
		a, b = &node{kind: nNum, text: t2.text}, &node{kind: nNum, text: t5.text}
		if isIntLit(a) && isIntLit(b) {
			return a, b, 7, true
		}
	}
	return nil, nil, 0, false
}

// subscript reads the text of a subscript: a braced group of numbers and
// letters, or one character.
func (p *parser) subscript() string {
	t := p.next()
	switch t.kind {
	case tNum:
		if len(t.text) > 1 {
			p.pos--
			p.toks[p.pos].text = t.text[1:]
			p.toks[p.pos].space = false
			return t.text[:1]
		}
		return t.text
	case tIdent:
		return t.text
	case tLBrace:
		s := "{"
		for p.peek().kind == tNum || p.peek().kind == tIdent || p.peek().kind == tComma {
			tk := p.next()
			if tk.kind == tComma {
				s += ","
			} else {
				s += tk.text
			}
		}
		p.expect(tRBrace, "}")
		return s + "}"
	}
	p.syntax("bad subscript")
	return ""
}

func (p *parser) bracket(open tokKind) *node {
	var kids []*node
	kids = append(kids, p.union())
	for p.peek().kind == tComma || p.peek().kind == tSemi {
		p.next()
		kids = append(kids, p.union())
	}
	cl := p.next().kind
	if cl != tRParen && cl != tRBrack {
		p.syntax("unclosed bracket")
	}
	match := (open == tLParen && cl == tRParen) || (open == tLBrack && cl == tRBrack)
	if len(kids) == 1 {
		if !match {
			p.syntax("mismatched brackets")
		}
		return kids[0]
	}
	return &node{kind: nBracket, open: open, close: cl, kids: kids}
}

func (p *parser) function(name string) *node {
	n := &node{kind: nFunc, text: name}
	if p.peek().kind == tUnder {
		p.next()
		n.base = p.arg(false)
	}
	var pw *node
	if p.peek().kind == tCaret {
		p.next()
		pw = p.exponent()
	}
	switch p.peek().kind {
	case tLParen:
		p.next()
		n.kids = append(n.kids, p.sum())
		for p.peek().kind == tComma {
			p.next()
			n.kids = append(n.kids, p.sum())
		}
		p.expect(tRParen, ")")
	case tLBrace:
		p.next()
		n.kids = append(n.kids, p.sum())
		p.expect(tRBrace, "}")
	default:
		// \sin 2x: the argument is an implicit product
		arg := &node{kind: nProd, kids: []*node{p.power()}, divs: []bool{false}}
		for t := p.peek(); p.startsPrimary(t) && t.kind != tFunc; t = p.peek() {
			arg.kids = append(arg.kids, p.power())
			arg.divs = append(arg.divs, false)
		}
		n.kids = append(n.kids, arg)
	}
	if pw != nil {
		return &node{kind: nPow, kids: []*node{n, pw}}
	}
	return n
}
