package mathverify

import (
	"math/big"
	"strconv"
	"strings"
)

// evaluator turns an expression tree into an exact value. sign chooses the branch
// of ± (+1) and ∓ (-1); trig is set inside trigonometric arguments, where a
// degree mark means ·π/180.
type evaluator struct {
	m     *meter
	sign  int
	trig  bool
	depth int
}

func (e *evaluator) eval(n *node) value {
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > 4*maxDepth {
		fail("unsupported: nesting too deep")
	}
	e.m.spend(1)
	switch n.kind {
	case nNum:
		return valRat(e.m.number(n.text))
	case nIdent:
		if n.text == "i" {
			return e.m.ratPow(big.NewRat(-1, 1), 1, 2)
		}
		return valAtom(n.text, false)
	case nPi:
		return valAtom(piName, false)
	case nSum:
		acc := value{den: polyInt(1)}
		for i, k := range n.kids {
			v := e.eval(k)
			sub := false
			switch n.signs[i] {
			case sMinus:
				sub = true
			case sPM:
				sub = e.sign < 0
			case sMP:
				sub = e.sign > 0
			}
			acc = e.m.add(acc, v, sub)
		}
		return acc
	case nProd:
		acc := e.eval(n.kids[0])
		for i := 1; i < len(n.kids); i++ {
			v := e.eval(n.kids[i])
			if n.divs[i] {
				acc = e.m.div(acc, v)
			} else {
				acc = e.m.mul(acc, v)
			}
		}
		return acc
	case nPow:
		return e.pow(e.eval(n.kids[0]), n.kids[1])
	case nFact, nDFact:
		return e.factorial(e.eval(n.kids[0]), n.kind == nDFact)
	case nRoot:
		idx := int64(2)
		if len(n.kids) > 1 {
			k, ok := e.evalInt(n.kids[1])
			if !ok || k < 1 {
				fail("unsupported: root index")
			}
			idx = k
		}
		if idx > maxRootIndex {
			fail("unsupported: radical index above %d", maxRootIndex)
		}
		v := e.eval(n.kids[0])
		if idx == 1 {
			return v
		}
		if r, ok := e.m.powFrac(v, 1, idx); ok {
			return r
		}
		return e.opaque("root"+strconv.FormatInt(idx, 10), v)
	case nBinom:
		return e.binom(e.eval(n.kids[0]), e.eval(n.kids[1]))
	case nFunc:
		return e.function(n)
	case nAbs, nFloor, nCeil:
		return e.rounding(n.kind, e.eval(n.kids[0]))
	case nPct:
		return e.m.div(e.eval(n.kids[0]), valInt(100))
	case nDeg:
		v := e.eval(n.kids[0])
		if e.trig {
			return e.m.mul(v, e.m.div(valAtom(piName, false), valInt(180)))
		}
		return v
	case nMixed:
		w := e.eval(n.kids[0])
		f := e.m.div(e.eval(n.kids[1]), e.eval(n.kids[2]))
		return e.m.add(w, f, false)
	case nInf:
		fail("unsupported: infinity inside an expression")
	case nEmpty, nReals, nBracket, nSet, nList, nUnion, nRel:
		fail("unsupported: a set, tuple, list or relation inside an expression")
	}
	fail("unsupported: node %d", n.kind)
	return value{}
}

func (e *evaluator) evalInt(n *node) (int64, bool) {
	return e.eval(n).int64Of()
}

// opaque makes an atom for an expression the checker does not evaluate. Its name
// is the function and the canonical form of its arguments, so equal arguments
// give equal atoms.
func (e *evaluator) opaque(name string, args ...value) value {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('(')
	for i, a := range args {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(a.String())
	}
	b.WriteByte(')')
	e.m.spend(b.Len()/16 + 1)
	return valAtom(b.String(), true)
}

// number converts a literal (digits, '.', "e±d" exponent, "(d)" repetend) to a
// rational, charging for its size.
func (m *meter) number(s string) *big.Rat {
	rep := ""
	if i := strings.IndexByte(s, '('); i >= 0 {
		rep = strings.TrimSuffix(s[i+1:], ")")
		s = s[:i]
	}
	exp := int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		x, err := strconv.ParseInt(s[i+1:], 10, 64)
		if err != nil || x > maxBits || x < -maxBits {
			m.spend(m.left + 1)
		}
		exp = x
		s = s[:i]
	}
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i+1:]
	}
	digits := intPart + frac
	if digits == "" {
		digits = "0"
	}
	m.mulCost(len(digits)*4+len(rep)*4, len(digits)*4+len(rep)*4)
	n, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		fail("syntax: number %q", s)
	}
	r := new(big.Rat).SetFrac(n, m.intPow(big.NewInt(10), int64(len(frac))))
	if rep != "" {
		rn, ok := new(big.Int).SetString(rep, 10)
		if !ok {
			fail("syntax: repetend %q", rep)
		}
		// 0.ab(c) adds c / (10^len(ab) · (10^len(c) - 1))
		d := m.intPow(big.NewInt(10), int64(len(rep)))
		d.Sub(d, big.NewInt(1))
		d.Mul(d, m.intPow(big.NewInt(10), int64(len(frac))))
		r = m.ratAdd(r, new(big.Rat).SetFrac(rn, d))
	}
	if exp != 0 {
		r = m.ratMul(r, m.ratPowInt(big.NewRat(10, 1), exp))
	}
	return r
}

func (e *evaluator) pow(b value, xn *node) value {
	x := e.eval(xn)
	xr, ok := x.rat()
	if !ok {
		if br, ok := b.rat(); ok && br.Cmp(big.NewRat(1, 1)) == 0 {
			return b
		}
		return e.opaque("pow", b, x)
	}
	if br, ok := b.rat(); ok && xr.IsInt() {
		// 0, 1 and -1 to any integer power, however large
		switch {
		case br.Sign() == 0:
			if xr.Sign() > 0 {
				return valInt(0)
			}
			fail("unsupported: 0 to a non-positive power")
		case br.Cmp(big.NewRat(1, 1)) == 0:
			return valInt(1)
		case br.Cmp(big.NewRat(-1, 1)) == 0:
			if xr.Num().Bit(0) == 0 {
				return valInt(1)
			}
			return valInt(-1)
		}
	}
	if !xr.Num().IsInt64() || !xr.Denom().IsInt64() {
		e.m.spend(e.m.left + 1)
	}
	p, q := xr.Num().Int64(), xr.Denom().Int64()
	if p > maxBits || p < -maxBits {
		e.m.spend(e.m.left + 1)
	}
	if q == 1 {
		if p == 0 && len(b.num) == 0 {
			fail("unsupported: 0^0")
		}
		return e.m.powInt(b, p)
	}
	if q > maxRootIndex {
		fail("unsupported: radical index above %d", maxRootIndex)
	}
	if r, ok := e.m.powFrac(b, p, q); ok {
		return r
	}
	// b^(k + 1/q) is b^k times the q-th root of b, the atom \sqrt[q]{b} makes:
	// x^{0.5} is \sqrt{x} and x^{1.5} is x\sqrt{x}
	if k, rem := floorDiv(p, q); rem == 1 {
		return e.m.mul(e.m.powInt(b, k), e.opaque("root"+strconv.FormatInt(q, 10), b))
	}
	return e.opaque("pow", b, x)
}

func (e *evaluator) factorial(v value, double bool) value {
	r, ok := v.rat()
	if !ok {
		name := "fact"
		if double {
			name = "dfact"
		}
		return e.opaque(name, v)
	}
	if !r.IsInt() || r.Sign() < 0 {
		fail("unsupported: factorial of %s", r.RatString())
	}
	if !r.Num().IsInt64() || r.Num().Int64() > maxBits {
		e.m.spend(e.m.left + 1)
	}
	n := r.Num().Int64()
	acc := big.NewInt(1)
	step := int64(1)
	if double {
		step = 2
	}
	for k := n; k > 1; k -= step {
		e.m.mulCost(acc.BitLen(), 64)
		acc.Mul(acc, big.NewInt(k))
	}
	return valRat(new(big.Rat).SetInt(acc))
}

func (e *evaluator) binom(a, b value) value {
	n, ok1 := a.int64Of()
	k, ok2 := b.int64Of()
	if !ok1 || !ok2 {
		return e.opaque("binom", a, b)
	}
	if k < 0 || n < 0 || k > n {
		if k >= 0 && n >= 0 {
			return valInt(0)
		}
		fail("unsupported: binomial with negative arguments")
	}
	if k > n-k {
		k = n - k
	}
	acc := big.NewInt(1)
	for i := int64(1); i <= k; i++ {
		e.m.mulCost(acc.BitLen(), 128)
		acc.Mul(acc, big.NewInt(n-k+i))
		acc.Quo(acc, big.NewInt(i))
	}
	return valRat(new(big.Rat).SetInt(acc))
}

func (e *evaluator) rounding(kind nodeKind, v value) value {
	name := "abs"
	switch kind {
	case nFloor:
		name = "floor"
	case nCeil:
		name = "ceil"
	}
	if !v.isConst() {
		return e.opaque(name, v)
	}
	if kind == nAbs {
		s, ok := e.m.sign(v)
		if !ok {
			return e.opaque(name, v)
		}
		if s < 0 {
			return neg(v)
		}
		return v
	}
	fl, exact, ok := e.m.floor(v)
	if !ok {
		return e.opaque(name, v)
	}
	if kind == nCeil && !exact {
		fl.Add(fl, big.NewInt(1))
	}
	return valRat(new(big.Rat).SetInt(fl))
}

// floor returns floor(v) for a real constant v, and whether v is an integer.
func (m *meter) floor(v value) (*big.Int, bool, bool) {
	if r, ok := v.rat(); ok {
		f := floorQuo(r.Num(), r.Denom())
		return f, r.IsInt(), true
	}
	// v is irrational: refine until floor(lo) == floor(hi)
	if !v.den.isOne() {
		return nil, false, false
	}
	for prec := uint(64); prec <= maxSignPrec; prec *= 2 {
		iv, ok := m.polyIval(v.num, prec)
		if !ok {
			return nil, false, false
		}
		one := new(big.Int).Lsh(big.NewInt(1), prec)
		lo, hi := floorQuo(iv.lo, one), floorQuo(iv.hi, one)
		if lo.Cmp(hi) == 0 {
			return lo, false, true
		}
	}
	return nil, false, false
}

func (e *evaluator) function(n *node) value {
	name := n.text
	trig := false
	switch name {
	case "sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh":
		trig = true
	}
	saved := e.trig
	e.trig = trig
	args := make([]value, len(n.kids))
	for i, k := range n.kids {
		args[i] = e.eval(k)
	}
	e.trig = saved
	var base *value
	if n.base != nil {
		b := e.eval(n.base)
		base = &b
	}
	if len(args) == 1 {
		a := args[0]
		r, isRat := a.rat()
		zero := isRat && r.Sign() == 0
		one := isRat && r.Cmp(big.NewRat(1, 1)) == 0
		switch name {
		case "sin", "tan", "sinh", "tanh", "arcsin", "arctan":
			if zero {
				return valInt(0)
			}
		case "cos", "cosh", "sec":
			if zero {
				return valInt(1)
			}
		case "exp":
			if zero {
				return valInt(1)
			}
		case "ln", "log", "lg":
			if one {
				return valInt(0)
			}
			if base != nil && isRat {
				if br, ok := base.rat(); ok && br.Sign() > 0 && r.Sign() > 0 && br.Cmp(big.NewRat(1, 1)) != 0 {
					if lr, ok := e.m.logRat(r, br); ok {
						return valRat(lr)
					}
				}
			}
		}
	}
	switch name {
	case "gcd", "lcm":
		if v, ok := e.gcdLcm(name == "lcm", args); ok {
			return v
		}
	case "max", "min":
		if v, ok := e.maxMin(name == "max", args); ok {
			return v
		}
	}
	if base != nil {
		name += "_" + base.String()
	}
	return e.opaque(name, args...)
}

func (e *evaluator) gcdLcm(lcm bool, args []value) (value, bool) {
	var acc *big.Int
	for _, a := range args {
		r, ok := a.rat()
		if !ok || !r.IsInt() {
			return value{}, false
		}
		x := new(big.Int).Abs(r.Num())
		e.m.mulCost(x.BitLen(), x.BitLen())
		switch {
		case acc == nil:
			acc = x
		case lcm:
			if x.Sign() == 0 || acc.Sign() == 0 {
				acc = new(big.Int)
				continue
			}
			g := new(big.Int).GCD(nil, nil, acc, x)
			e.m.mulCost(acc.BitLen(), x.BitLen())
			acc = new(big.Int).Mul(acc, new(big.Int).Quo(x, g))
		default:
			acc = new(big.Int).GCD(nil, nil, acc, x)
		}
	}
	if acc == nil {
		return value{}, false
	}
	return valRat(new(big.Rat).SetInt(acc)), true
}

func (e *evaluator) maxMin(isMax bool, args []value) (value, bool) {
	if len(args) == 0 {
		return value{}, false
	}
	best := args[0]
	for _, a := range args[1:] {
		if !a.isConst() || !best.isConst() {
			return value{}, false
		}
		c, ok := e.m.cmpVal(a, best)
		if !ok {
			return value{}, false
		}
		if (isMax && c > 0) || (!isMax && c < 0) {
			best = a
		}
	}
	if !best.isConst() {
		return value{}, false
	}
	return best, true
}

// logRat returns log_b(a) when it is rational: a = ∏p^α, b = ∏p^β with α = r·β
// for one rational r.
func (m *meter) logRat(a, b *big.Rat) (*big.Rat, bool) {
	va, vb := m.expVector(a), m.expVector(b)
	if len(va) != len(vb) || len(vb) == 0 {
		return nil, false
	}
	var ratio *big.Rat
	for i := range vb {
		if va[i].p.Cmp(vb[i].p) != 0 {
			return nil, false
		}
		r := big.NewRat(va[i].k, vb[i].k)
		if ratio == nil {
			ratio = r
		} else if ratio.Cmp(r) != 0 {
			return nil, false
		}
	}
	return ratio, true
}

// expVector returns the prime exponents of a positive rational, sorted by prime
// (negative exponents for the denominator).
func (m *meter) expVector(r *big.Rat) []primePower {
	var out []primePower
	if r.Num().Cmp(big.NewInt(1)) != 0 {
		out = append(out, m.factor(r.Num())...)
	}
	if r.Denom().Cmp(big.NewInt(1)) != 0 {
		for _, f := range m.factor(r.Denom()) {
			out = append(out, primePower{p: f.p, k: -f.k})
		}
	}
	return sortPP(out)
}

// hasPM reports whether the expression uses ± or ∓.
func hasPM(n *node) bool {
	if n == nil {
		return false
	}
	for _, s := range n.signs {
		if s == sPM || s == sMP {
			return true
		}
	}
	for _, k := range n.kids {
		if hasPM(k) {
			return true
		}
	}
	return hasPM(n.base)
}
