package mathverify

import (
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// The exact value domain.
//
// A value is a quotient num/den of two polynomials. A polynomial is a sum of terms
// c·M with a rational coefficient c and a monomial M; a monomial is a product of
//
//   - radical factors p^(a/b), p a prime and 0 < a/b < 1, or (-1)^(1/2) = i, and
//   - atom powers x^k, k a non-zero integer, where an atom is a variable letter,
//     π, or an opaque atom (a function application the checker does not evaluate).
//
// Monomials are kept in canonical form (factors sorted, radical exponents in (0,1),
// integer parts moved into the coefficient), and polynomials are sorted by
// monomial key with no zero coefficients. Radicals of distinct primes with
// exponents in (0,1) are linearly independent over the rationals (Besicovitch),
// i doubles the real field, and π and the variables are independent
// indeterminates over the algebraic numbers, so a polynomial is zero exactly when
// its canonical form is empty. Two values a/b and c/d are equal exactly when
// a·d - c·b is the empty polynomial. Opaque atoms are treated as indeterminates
// too, which is sound for equality but not for inequality: a non-zero difference
// that mentions an opaque atom is undetermined, never "not equal".

// rad is one radical factor base^(num/den) with 0 < num < den, gcd(num, den) = 1.
// base is a prime, or -1 (then num/den = 1/2, the imaginary unit).
type rad struct {
	base     *big.Int
	num, den int64
}

// atom is one atom power name^exp, exp != 0.
type atom struct {
	name   string
	exp    int64
	opaque bool
}

type mono struct {
	rads  []rad
	atoms []atom
}

type term struct {
	c   *big.Rat
	m   mono
	key string
}

// poly is a canonical polynomial: terms sorted by key, keys distinct, no zero
// coefficient.
type poly []term

// value is num/den with den non-zero. When den is a single term it is divided
// out, so den is 1 for every value without a non-monomial denominator.
type value struct{ num, den poly }

const piName = `\pi`

func (m mono) isConst() bool { return len(m.rads) == 0 && len(m.atoms) == 0 }

func monoKey(m mono) string {
	if m.isConst() {
		return ""
	}
	var b strings.Builder
	for _, r := range m.rads {
		b.WriteByte('r')
		b.WriteString(r.base.String())
		b.WriteByte('^')
		b.WriteString(strconv.FormatInt(r.num, 10))
		b.WriteByte('/')
		b.WriteString(strconv.FormatInt(r.den, 10))
		b.WriteByte(';')
	}
	for _, a := range m.atoms {
		if a.opaque {
			b.WriteByte('o')
		} else {
			b.WriteByte('v')
		}
		b.WriteString(strconv.Itoa(len(a.name)))
		b.WriteByte(':')
		b.WriteString(a.name)
		b.WriteByte('^')
		b.WriteString(strconv.FormatInt(a.exp, 10))
		b.WriteByte(';')
	}
	return b.String()
}

func gcd64(a, b int64) int64 {
	if a < 0 {
		a = -a
	}
	if b < 0 {
		b = -b
	}
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// floorDiv returns floor(a/b) and the remainder in [0, b) for b > 0.
func floorDiv(a, b int64) (int64, int64) {
	q, r := a/b, a%b
	if r < 0 {
		q--
		r += b
	}
	return q, r
}

// scaleBy multiplies c in place by base^k (k may be negative), charged.
func (mt *meter) scaleBy(c *big.Rat, base *big.Int, k int64) *big.Rat {
	if k == 0 {
		return c
	}
	if base.Sign() < 0 { // base -1
		if k%2 != 0 {
			return new(big.Rat).Neg(c)
		}
		return c
	}
	p := new(big.Rat).SetInt(base)
	return mt.ratMul(c, mt.ratPowInt(p, k))
}

// mulMono returns the canonical product a·b and the rational factor it pulled out.
func (mt *meter) mulMono(a, b mono, c *big.Rat) (mono, *big.Rat) {
	mt.spend(1 + len(a.rads) + len(b.rads) + len(a.atoms) + len(b.atoms))
	var out mono
	// radicals
	i, j := 0, 0
	for i < len(a.rads) || j < len(b.rads) {
		var cmp int
		switch {
		case i == len(a.rads):
			cmp = 1
		case j == len(b.rads):
			cmp = -1
		default:
			cmp = a.rads[i].base.Cmp(b.rads[j].base)
		}
		switch {
		case cmp < 0:
			out.rads = append(out.rads, a.rads[i])
			i++
		case cmp > 0:
			out.rads = append(out.rads, b.rads[j])
			j++
		default:
			x, y := a.rads[i], b.rads[j]
			num := x.num*y.den + y.num*x.den
			den := x.den * y.den
			g := gcd64(num, den)
			num, den = num/g, den/g
			if num >= den {
				c = mt.scaleBy(c, x.base, 1)
				num -= den
			}
			if num != 0 {
				if den > maxRootIndex {
					fail("unsupported: radical index above %d", maxRootIndex)
				}
				out.rads = append(out.rads, rad{base: x.base, num: num, den: den})
			}
			i++
			j++
		}
	}
	// atoms
	i, j = 0, 0
	for i < len(a.atoms) || j < len(b.atoms) {
		var cmp int
		switch {
		case i == len(a.atoms):
			cmp = 1
		case j == len(b.atoms):
			cmp = -1
		default:
			cmp = strings.Compare(a.atoms[i].name, b.atoms[j].name)
		}
		switch {
		case cmp < 0:
			out.atoms = append(out.atoms, a.atoms[i])
			i++
		case cmp > 0:
			out.atoms = append(out.atoms, b.atoms[j])
			j++
		default:
			e := a.atoms[i].exp + b.atoms[j].exp
			if e > maxBits || e < -maxBits {
				fail(ReasonFuel)
			}
			if e != 0 {
				out.atoms = append(out.atoms, atom{name: a.atoms[i].name, exp: e, opaque: a.atoms[i].opaque})
			}
			i++
			j++
		}
	}
	return out, c
}

// powMono returns the canonical m^(p/q) (q >= 1) and the rational factor pulled
// out. Atom exponents must stay integers: the caller ensures q divides them.
func (mt *meter) powMono(m mono, p, q int64, c *big.Rat) (mono, *big.Rat) {
	mt.spend(1 + len(m.rads) + len(m.atoms))
	var out mono
	for _, r := range m.rads {
		// exponent r.num/r.den * p/q
		num, den := r.num*p, r.den*q
		if num > 1<<40 || num < -(1<<40) {
			fail(ReasonFuel)
		}
		g := gcd64(num, den)
		num, den = num/g, den/g
		k, rem := floorDiv(num, den)
		c = mt.scaleBy(c, r.base, k)
		if rem != 0 {
			if den > maxRootIndex {
				fail("unsupported: radical index above %d", maxRootIndex)
			}
			if r.base.Sign() < 0 && den != 2 {
				fail("unsupported: root of the imaginary unit")
			}
			out.rads = append(out.rads, rad{base: r.base, num: rem, den: den})
		}
	}
	for _, a := range m.atoms {
		if (a.exp*p)%q != 0 {
			fail("unsupported: fractional power of %s", a.name)
		}
		e := a.exp * p / q
		if e > maxBits || e < -maxBits {
			fail(ReasonFuel)
		}
		out.atoms = append(out.atoms, atom{name: a.name, exp: e, opaque: a.opaque})
	}
	return out, c
}

func (mt *meter) mkTerm(c *big.Rat, m mono) term {
	k := monoKey(m)
	mt.spend(1 + len(k)/8)
	return term{c: c, m: m, key: k}
}

func polyRat(r *big.Rat) poly {
	if r.Sign() == 0 {
		return nil
	}
	return poly{{c: r, key: ""}}
}

func polyInt(n int64) poly { return polyRat(new(big.Rat).SetInt64(n)) }

func (p poly) isOne() bool {
	return len(p) == 1 && p[0].key == "" && isRatOne(p[0].c)
}

func isRatOne(r *big.Rat) bool {
	return r.IsInt() && r.Num().IsInt64() && r.Num().Int64() == 1
}

// constRat reports whether p is a rational constant, and which.
func (p poly) constRat() (*big.Rat, bool) {
	switch {
	case len(p) == 0:
		return new(big.Rat), true
	case len(p) == 1 && p[0].key == "":
		return p[0].c, true
	}
	return nil, false
}

func (mt *meter) polyAdd(a, b poly, negB bool) poly {
	mt.spend(1 + 4*(len(a)+len(b)))
	out := make(poly, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var cmp int
		switch {
		case i == len(a):
			cmp = 1
		case j == len(b):
			cmp = -1
		default:
			cmp = strings.Compare(a[i].key, b[j].key)
		}
		switch {
		case cmp < 0:
			out = append(out, a[i])
			i++
		case cmp > 0:
			t := b[j]
			if negB {
				t.c = new(big.Rat).Neg(t.c)
			}
			out = append(out, t)
			j++
		default:
			y := b[j].c
			if negB {
				y = new(big.Rat).Neg(y)
			}
			s := mt.ratAdd(a[i].c, y)
			if s.Sign() != 0 {
				out = append(out, term{c: s, m: a[i].m, key: a[i].key})
			}
			i++
			j++
		}
	}
	return out
}

func polyNeg(a poly) poly {
	out := make(poly, len(a))
	for i, t := range a {
		out[i] = term{c: new(big.Rat).Neg(t.c), m: t.m, key: t.key}
	}
	return out
}

func (mt *meter) polyMul(a, b poly) poly {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	if len(a) == 1 && len(b) == 1 {
		mt.spend(4)
		c := mt.ratMul(a[0].c, b[0].c)
		m, c := mt.mulMono(a[0].m, b[0].m, c)
		if c.Sign() == 0 {
			return nil
		}
		return poly{mt.mkTerm(c, m)}
	}
	// a term product with map bookkeeping costs about a microsecond
	mt.spend(32 * len(a) * len(b))
	acc := make(map[string]int, len(a)*len(b))
	var out poly
	for _, x := range a {
		for _, y := range b {
			c := mt.ratMul(x.c, y.c)
			m, c := mt.mulMono(x.m, y.m, c)
			t := mt.mkTerm(c, m)
			if k, ok := acc[t.key]; ok {
				out[k].c = mt.ratAdd(out[k].c, t.c)
				continue
			}
			acc[t.key] = len(out)
			out = append(out, t)
		}
	}
	res := out[:0]
	for _, t := range out {
		if t.c.Sign() != 0 {
			res = append(res, t)
		}
	}
	slices.SortFunc(res, func(x, y term) int { return strings.Compare(x.key, y.key) })
	return res
}

func (mt *meter) polyScale(a poly, c *big.Rat) poly {
	if c.Sign() == 0 {
		return nil
	}
	out := make(poly, len(a))
	for i, t := range a {
		out[i] = term{c: mt.ratMul(t.c, c), m: t.m, key: t.key}
	}
	return out
}

// polyPow returns a^k for k >= 0.
func (mt *meter) polyPow(a poly, k int64) poly {
	if k == 0 {
		return polyInt(1)
	}
	if len(a) == 0 {
		return nil
	}
	if len(a) == 1 {
		c := mt.ratPowInt(a[0].c, k)
		m, c := mt.powMono(a[0].m, k, 1, c)
		return poly{mt.mkTerm(c, m)}
	}
	if k > maxBits {
		fail(ReasonFuel)
	}
	// a multinomial power has at least k+1 terms; charge that up front
	mt.spend(int(k))
	res := polyInt(1)
	base := a
	for k > 0 {
		if k&1 == 1 {
			res = mt.polyMul(res, base)
		}
		k >>= 1
		if k > 0 {
			base = mt.polyMul(base, base)
		}
	}
	return res
}

// inverse of a single term: returns the term 1/t.
func (mt *meter) termInv(t term) term {
	if t.c.Sign() == 0 {
		fail("division by zero")
	}
	mt.mulCost(ratBits(t.c), 1)
	c := new(big.Rat).Inv(t.c)
	m, c := mt.powMono(t.m, -1, 1, c)
	return mt.mkTerm(c, m)
}

// --- values ---

func valRat(r *big.Rat) value { return value{num: polyRat(r), den: polyInt(1)} }

func valInt(n int64) value { return valRat(new(big.Rat).SetInt64(n)) }

func valAtom(name string, opaque bool) value {
	m := mono{atoms: []atom{{name: name, exp: 1, opaque: opaque}}}
	return value{num: poly{{c: big.NewRat(1, 1), m: m, key: monoKey(m)}}, den: polyInt(1)}
}

func (mt *meter) norm(v value) value {
	if len(v.den) == 0 {
		fail("division by zero")
	}
	if v.den.isOne() {
		return v
	}
	if len(v.den) == 1 {
		inv := mt.termInv(v.den[0])
		return value{num: mt.polyMul(v.num, poly{inv}), den: polyInt(1)}
	}
	if len(v.num) == 0 {
		return value{num: nil, den: polyInt(1)}
	}
	return v
}

func (mt *meter) add(a, b value, sub bool) value {
	if a.den.isOne() && b.den.isOne() {
		return value{num: mt.polyAdd(a.num, b.num, sub), den: a.den}
	}
	n := mt.polyAdd(mt.polyMul(a.num, b.den), mt.polyMul(b.num, a.den), sub)
	return mt.norm(value{num: n, den: mt.polyMul(a.den, b.den)})
}

func (mt *meter) mul(a, b value) value {
	if a.den.isOne() && b.den.isOne() {
		return value{num: mt.polyMul(a.num, b.num), den: a.den}
	}
	return mt.norm(value{num: mt.polyMul(a.num, b.num), den: mt.polyMul(a.den, b.den)})
}

func (mt *meter) div(a, b value) value {
	if len(b.num) == 0 {
		fail("division by zero")
	}
	return mt.norm(value{num: mt.polyMul(a.num, b.den), den: mt.polyMul(a.den, b.num)})
}

func neg(a value) value { return value{num: polyNeg(a.num), den: a.den} }

// powInt returns a^k for an integer k.
func (mt *meter) powInt(a value, k int64) value {
	if k < 0 {
		if len(a.num) == 0 {
			fail("division by zero")
		}
		return mt.norm(value{num: mt.polyPow(a.den, -k), den: mt.polyPow(a.num, -k)})
	}
	return mt.norm(value{num: mt.polyPow(a.num, k), den: mt.polyPow(a.den, k)})
}

// diffZero reports whether a - b is zero, and the numerator of the difference.
func (mt *meter) diff(a, b value) poly {
	if a.den.isOne() && b.den.isOne() {
		return mt.polyAdd(a.num, b.num, true)
	}
	return mt.polyAdd(mt.polyMul(a.num, b.den), mt.polyMul(b.num, a.den), true)
}

// rat reports whether v is a rational constant, and which.
func (v value) rat() (*big.Rat, bool) {
	if !v.den.isOne() {
		if r, ok := v.den.constRat(); ok && r.Sign() != 0 {
			if n, ok := v.num.constRat(); ok {
				return new(big.Rat).Quo(n, r), true
			}
		}
		return nil, false
	}
	return v.num.constRat()
}

// int64Of returns v as an int64 if it is an integer constant of modest size.
func (v value) int64Of() (int64, bool) {
	r, ok := v.rat()
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

// hasAtoms reports whether p mentions a variable, π or an opaque atom (if opaque,
// only opaque atoms count).
func (p poly) hasAtoms(onlyOpaque bool) bool {
	for _, t := range p {
		for _, a := range t.m.atoms {
			if a.opaque || !onlyOpaque {
				return true
			}
		}
	}
	return false
}

// isConst reports whether v is a constant: no atoms other than π.
func (v value) isConst() bool {
	for _, p := range []poly{v.num, v.den} {
		for _, t := range p {
			for _, a := range t.m.atoms {
				if a.opaque || a.name != piName {
					return false
				}
			}
		}
	}
	return true
}

// String renders p canonically; used for opaque atom names and messages.
func (p poly) String() string {
	if len(p) == 0 {
		return "0"
	}
	var b strings.Builder
	for i, t := range p {
		if i > 0 {
			b.WriteByte('+')
		}
		b.WriteString(t.c.RatString())
		if t.key != "" {
			b.WriteByte('*')
			b.WriteString(t.key)
		}
	}
	return b.String()
}

func (v value) String() string {
	if v.den.isOne() {
		return v.num.String()
	}
	return "(" + v.num.String() + ")/(" + v.den.String() + ")"
}
