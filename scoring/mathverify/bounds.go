package mathverify

import "math/big"

// Rigorous signs. The sign of a non-zero constant value (rationals, real radicals
// and powers of π) is found by evaluating it with integer interval arithmetic at
// increasing precision until the interval excludes zero. Every bound is a floor
// or a ceiling of an exact quantity, so the sign is proven, not estimated. A
// canonical non-zero value is non-zero as a real number (see value.go), so the
// refinement ends unless the value is within 2^-maxSignPrec of zero; then, or for
// values with variables, i or opaque atoms, the sign is unknown.

const maxSignPrec = 1 << 13

// ival is the closed interval [lo, hi] / 2^prec.
type ival struct{ lo, hi *big.Int }

// floorQuo returns floor(a/b) for b > 0.
func floorQuo(a, b *big.Int) *big.Int {
	q, m := new(big.Int).QuoRem(a, b, new(big.Int))
	if m.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return q
}

// ceilQuo returns ceil(a/b) for b > 0.
func ceilQuo(a, b *big.Int) *big.Int {
	q, m := new(big.Int).QuoRem(a, b, new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// mulPos multiplies two intervals of positive reals at precision prec.
func mulPos(a, b ival, prec uint) ival {
	one := new(big.Int).Lsh(big.NewInt(1), prec)
	lo := new(big.Int).Mul(a.lo, b.lo)
	hi := new(big.Int).Mul(a.hi, b.hi)
	return ival{floorQuo(lo, one), ceilQuo(hi, one)}
}

// piIval bounds π at precision prec with Machin's formula
// π = 16·atan(1/5) - 4·atan(1/239).
func (mt *meter) piIval(prec uint) ival {
	const guard = 32
	g := prec + guard
	atan := func(x int64) (*big.Int, int64) {
		// sum_k (-1)^k floor(2^g / ((2k+1) x^(2k+1))); each term is a floor of
		// the exact term, and the tail is below one unit.
		pw := new(big.Int).Lsh(big.NewInt(1), g)
		pw.Quo(pw, big.NewInt(x))
		x2 := big.NewInt(x * x)
		sum := new(big.Int)
		n := int64(0)
		for k := int64(0); pw.Sign() != 0; k++ {
			mt.spend(words(int(g)))
			t := new(big.Int).Quo(pw, big.NewInt(2*k+1))
			if k%2 == 0 {
				sum.Add(sum, t)
			} else {
				sum.Sub(sum, t)
			}
			pw.Quo(pw, x2)
			n++
		}
		return sum, n + 1
	}
	a, na := atan(5)
	b, nb := atan(239)
	s := new(big.Int).Mul(a, big.NewInt(16))
	s.Sub(s, new(big.Int).Mul(b, big.NewInt(4)))
	e := big.NewInt(16*na + 4*nb)
	one := new(big.Int).Lsh(big.NewInt(1), guard)
	return ival{
		floorQuo(new(big.Int).Sub(s, e), one),
		ceilQuo(new(big.Int).Add(s, e), one),
	}
}

// monoIval bounds a real monomial (radicals of primes and powers of π) at
// precision prec. ok is false for i, variables and opaque atoms.
func (mt *meter) monoIval(m mono, prec uint) (ival, bool) {
	one := new(big.Int).Lsh(big.NewInt(1), prec)
	acc := ival{one, new(big.Int).Set(one)}
	for _, r := range m.rads {
		if r.base.Sign() < 0 {
			return ival{}, false
		}
		// floor((p^num · 2^(prec·den))^(1/den))
		x := mt.intPow(r.base, r.num)
		x.Lsh(x, prec*uint(r.den))
		lo := mt.iroot(x, r.den)
		hi := new(big.Int).Set(lo)
		if mt.intPow(lo, r.den).Cmp(x) != 0 {
			hi.Add(hi, big.NewInt(1))
		}
		acc = mulPos(acc, ival{lo, hi}, prec)
	}
	for _, a := range m.atoms {
		if a.name != piName || a.opaque {
			return ival{}, false
		}
		p := mt.piIval(prec)
		if a.exp < 0 {
			// 1/π in [2^2prec / hi, 2^2prec / lo]
			sq := new(big.Int).Lsh(big.NewInt(1), 2*prec)
			p = ival{floorQuo(sq, p.hi), ceilQuo(sq, p.lo)}
		}
		e := a.exp
		if e < 0 {
			e = -e
		}
		if e > 64 {
			return ival{}, false
		}
		for range e {
			acc = mulPos(acc, p, prec)
		}
	}
	return acc, true
}

// polyIval bounds p at precision prec.
func (mt *meter) polyIval(p poly, prec uint) (ival, bool) {
	sum := ival{new(big.Int), new(big.Int)}
	for _, t := range p {
		mt.spend(words(int(prec)) * (1 + len(t.m.rads) + len(t.m.atoms)))
		mb, ok := mt.monoIval(t.m, prec)
		if !ok {
			return ival{}, false
		}
		// t.c · [lo, hi]: the monomial is positive.
		num, den := t.c.Num(), t.c.Denom()
		var lo, hi *big.Int
		if num.Sign() >= 0 {
			lo = floorQuo(new(big.Int).Mul(num, mb.lo), den)
			hi = ceilQuo(new(big.Int).Mul(num, mb.hi), den)
		} else {
			lo = floorQuo(new(big.Int).Mul(num, mb.hi), den)
			hi = ceilQuo(new(big.Int).Mul(num, mb.lo), den)
		}
		sum.lo.Add(sum.lo, lo)
		sum.hi.Add(sum.hi, hi)
	}
	return sum, true
}

// polySign returns the sign of a real constant polynomial, or ok = false.
func (mt *meter) polySign(p poly) (int, bool) {
	if len(p) == 0 {
		return 0, true
	}
	if r, ok := p.constRat(); ok {
		return r.Sign(), true
	}
	if len(p) == 1 {
		// a positive monomial times the coefficient, if the monomial is real
		if _, ok := mt.monoIval(p[0].m, 8); !ok {
			return 0, false
		}
		return p[0].c.Sign(), true
	}
	for prec := uint(64); prec <= maxSignPrec; prec *= 2 {
		iv, ok := mt.polyIval(p, prec)
		if !ok {
			return 0, false
		}
		if iv.lo.Sign() > 0 {
			return 1, true
		}
		if iv.hi.Sign() < 0 {
			return -1, true
		}
	}
	return 0, false
}

// sign returns the sign of a constant real value, or ok = false.
func (mt *meter) sign(v value) (int, bool) {
	sn, ok := mt.polySign(v.num)
	if !ok {
		return 0, false
	}
	if sn == 0 {
		return 0, true
	}
	sd, ok := mt.polySign(v.den)
	if !ok {
		return 0, false
	}
	return sn * sd, true
}

// cmpVal compares two constant real values: -1, 0, 1, or ok = false.
func (mt *meter) cmpVal(a, b value) (int, bool) {
	return mt.sign(mt.add(a, b, true))
}
