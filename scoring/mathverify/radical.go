package mathverify

import (
	"math/big"
	"math/bits"
	"slices"
)

// primePower is p^k with p prime and k >= 1.
type primePower struct {
	p *big.Int
	k int64
}

// trialLimit is the bound of trial division before primality testing and
// Pollard's rho take over.
const trialLimit = 1 << 16

// factor returns the prime factorization of n >= 1, sorted by prime. A residue
// above 2^64 that is neither a prime (Baillie-PSW) nor a perfect power of one
// cannot be factored: the comparison becomes undetermined.
func (mt *meter) factor(n *big.Int) []primePower {
	if n.Sign() <= 0 {
		panic("mathverify: factor of non-positive integer")
	}
	var out []primePower
	if n.IsUint64() {
		for _, f := range mt.factorU64(n.Uint64()) {
			out = appendPP(out, new(big.Int).SetUint64(f), 1)
		}
		return sortPP(out)
	}
	r := new(big.Int).Set(n)
	q, m := new(big.Int), new(big.Int)
	for d := uint64(2); d < trialLimit; d++ {
		if d > 2 && d%2 == 0 {
			continue
		}
		mt.spend(words(r.BitLen()))
		bd := new(big.Int).SetUint64(d)
		for {
			q.QuoRem(r, bd, m)
			if m.Sign() != 0 {
				break
			}
			r.Set(q)
			out = appendPP(out, bd, 1)
		}
		if r.IsUint64() {
			for _, f := range mt.factorU64(r.Uint64()) {
				out = appendPP(out, new(big.Int).SetUint64(f), 1)
			}
			return sortPP(out)
		}
	}
	// r > 2^64 with no factor below trialLimit.
	mt.mulCost(r.BitLen()*8, r.BitLen()*8)
	if r.ProbablyPrime(0) {
		return sortPP(appendPP(out, r, 1))
	}
	for k := int64(2); k <= int64(r.BitLen()/16); k++ {
		root := mt.iroot(r, k)
		if mt.intPow(root, k).Cmp(r) == 0 {
			mt.mulCost(root.BitLen()*8, root.BitLen()*8)
			if root.ProbablyPrime(0) {
				return sortPP(appendPP(out, root, k))
			}
		}
	}
	fail("unsupported: cannot factor a radicand of %d bits", n.BitLen())
	return nil
}

func appendPP(xs []primePower, p *big.Int, k int64) []primePower {
	for i := range xs {
		if xs[i].p.Cmp(p) == 0 {
			xs[i].k += k
			return xs
		}
	}
	return append(xs, primePower{p: new(big.Int).Set(p), k: k})
}

func sortPP(xs []primePower) []primePower {
	slices.SortFunc(xs, func(a, b primePower) int { return a.p.Cmp(b.p) })
	return xs
}

// factorU64 returns the prime factors of n with multiplicity, unsorted.
func (mt *meter) factorU64(n uint64) []uint64 {
	var out []uint64
	if n < 2 {
		return nil
	}
	for _, d := range []uint64{2, 3, 5} {
		for n%d == 0 {
			out = append(out, d)
			n /= d
		}
	}
	for d := uint64(7); d < trialLimit && d*d <= n; d += 2 {
		mt.spend(1)
		for n%d == 0 {
			out = append(out, d)
			n /= d
		}
	}
	if n == 1 {
		return out
	}
	return append(out, mt.splitU64(n)...)
}

// splitU64 factors n >= 2 that has no factor below trialLimit (or is prime).
func (mt *meter) splitU64(n uint64) []uint64 {
	if n < trialLimit*trialLimit {
		return []uint64{n}
	}
	mt.spend(64)
	if new(big.Int).SetUint64(n).ProbablyPrime(0) { // exact below 2^64
		return []uint64{n}
	}
	d := mt.rho(n)
	return append(mt.splitU64(d), mt.splitU64(n/d)...)
}

func mulmod(a, b, n uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	_, r := bits.Div64(hi, lo, n)
	return r
}

func gcdU64(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// rho finds a non-trivial factor of the odd composite n with Brent's variant of
// Pollard's rho, trying c = 1, 2, ... in order: deterministic.
func (mt *meter) rho(n uint64) uint64 {
	for c := uint64(1); ; c++ {
		f := func(x uint64) uint64 {
			s, carry := bits.Add64(mulmod(x, x, n), c, 0)
			if carry != 0 || s >= n {
				s -= n
			}
			return s
		}
		y, r, q := uint64(2), uint64(1), uint64(1)
		var x, ys uint64
		g := uint64(1)
		const m = 128
		for g == 1 {
			x = y
			for i := uint64(0); i < r; i++ {
				y = f(y)
			}
			for k := uint64(0); k < r && g == 1; k += m {
				ys = y
				mt.spend(m / 8)
				for i := uint64(0); i < m && i < r-k; i++ {
					y = f(y)
					d := x - y
					if x < y {
						d = y - x
					}
					q = mulmod(q, d, n)
				}
				g = gcdU64(q, n)
			}
			r *= 2
		}
		if g == n {
			for {
				ys = f(ys)
				d := x - ys
				if x < ys {
					d = ys - x
				}
				g = gcdU64(d, n)
				mt.spend(1)
				if g > 1 {
					break
				}
			}
		}
		if g != n {
			return g
		}
	}
}

// iroot returns floor(n^(1/k)) for n >= 0, k >= 1 by Newton's iteration.
func (mt *meter) iroot(n *big.Int, k int64) *big.Int {
	if n.Sign() == 0 || k == 1 {
		return new(big.Int).Set(n)
	}
	if k == 2 {
		mt.mulCost(n.BitLen(), n.BitLen())
		return new(big.Int).Sqrt(n)
	}
	// start above the root: 2^ceil(bits/k)
	x := new(big.Int).Lsh(big.NewInt(1), uint((int64(n.BitLen())+k-1)/k))
	km1 := big.NewInt(k - 1)
	bk := big.NewInt(k)
	for {
		// y = ((k-1)x + n / x^(k-1)) / k
		xp := mt.intPow(x, k-1)
		mt.mulCost(n.BitLen(), xp.BitLen())
		y := new(big.Int).Quo(n, xp)
		y.Add(y, new(big.Int).Mul(km1, x))
		y.Quo(y, bk)
		if y.Cmp(x) >= 0 {
			return x
		}
		x = y
	}
}

// ratPow returns r^(p/q) exactly for q >= 1, gcd(p, q) = 1. Negative r is
// allowed for odd q (the real root) and for q = 2 (through i); other even roots
// of negative numbers are unsupported.
func (mt *meter) ratPow(r *big.Rat, p, q int64) value {
	if q == 1 {
		return valRat(mt.ratPowInt(r, p))
	}
	if q > maxRootIndex {
		fail("unsupported: radical index above %d", maxRootIndex)
	}
	if r.Sign() == 0 {
		if p > 0 {
			return valInt(0)
		}
		fail("division by zero")
	}
	c := big.NewRat(1, 1)
	var m mono
	if r.Sign() < 0 {
		switch {
		case q%2 == 1:
			if p%2 != 0 {
				c.Neg(c)
			}
		case q == 2:
			// (-1)^(p/2) = i^p
			k, _ := floorDiv(p, 4)
			switch p - 4*k {
			case 1:
				m.rads = []rad{{base: big.NewInt(-1), num: 1, den: 2}}
			case 2:
				c.Neg(c)
			case 3:
				c.Neg(c)
				m.rads = []rad{{base: big.NewInt(-1), num: 1, den: 2}}
			}
		default:
			fail("unsupported: even root of a negative number")
		}
	}
	abs := new(big.Rat).Abs(r)
	apply := func(n *big.Int, sign int64) {
		if n.Cmp(big.NewInt(1)) == 0 {
			return
		}
		for _, f := range mt.factor(n) {
			num := sign * f.k * p
			if num > 1<<40 || num < -(1<<40) {
				fail(ReasonFuel)
			}
			k, rem := floorDiv(num, q)
			g := gcd64(rem, q)
			c = mt.scaleBy(c, f.p, k)
			if rem != 0 {
				m.rads = append(m.rads, rad{base: f.p, num: rem / g, den: q / g})
			}
		}
	}
	apply(abs.Num(), 1)
	apply(abs.Denom(), -1)
	slices.SortFunc(m.rads, func(a, b rad) int { return a.base.Cmp(b.base) })
	return value{num: poly{mt.mkTerm(c, m)}, den: polyInt(1)}
}

// powFrac returns v^(p/q) for q >= 2 when v is a constant monomial (a rational
// times real radicals); anything else is unsupported and the caller makes an
// opaque atom of it.
func (mt *meter) powFrac(v value, p, q int64) (value, bool) {
	if len(v.num) == 0 {
		if p > 0 {
			return valInt(0), true
		}
		fail("division by zero")
	}
	if !v.den.isOne() || len(v.num) != 1 || len(v.num[0].m.atoms) != 0 {
		return value{}, false
	}
	t := v.num[0]
	for _, r := range t.m.rads {
		if r.base.Sign() < 0 {
			return value{}, false
		}
	}
	base := mt.ratPow(t.c, p, q)
	m, c := mt.powMono(t.m, p, q, big.NewRat(1, 1))
	return mt.mul(base, value{num: poly{mt.mkTerm(c, m)}, den: polyInt(1)}), true
}
