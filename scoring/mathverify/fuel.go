package mathverify

import (
	"fmt"
	"math/big"
)

// DefaultFuel is the step budget Reward uses: enough for any answer a contest
// problem needs (comparing 1/2004! with 1/2006! costs about 48,000 units,
// (x+1)^{20} about 16,000) and small enough that a hostile answer costs a
// validator milliseconds, not seconds.
const DefaultFuel = 250_000

// maxRootIndex bounds the index n of an n-th root and the denominator of a
// rational exponent; larger ones make a comparison undetermined.
const maxRootIndex = 1 << 12

// maxBits bounds the size of any single integer the checker builds, whatever the
// fuel: 2^22 bits is about 1.26 million decimal digits.
const maxBits = 1 << 22

// stop is the panic value that unwinds a comparison when it cannot be decided:
// fuel ran out, the input is outside the supported language, or it is malformed.
// Only Compare, Score and the parsers recover it; any other panic is a bug.
type stop struct{ reason string }

// fail unwinds the current comparison with the given reason.
func fail(format string, args ...any) {
	panic(stop{reason: fmt.Sprintf(format, args...)})
}

// meter counts fuel. Every token read, every term operation and every word of
// big-integer arithmetic costs fuel; running out unwinds with reason "fuel".
type meter struct{ left int }

func (m *meter) spend(n int) {
	if n < 0 || n > m.left {
		m.left = 0
		panic(stop{reason: ReasonFuel})
	}
	m.left -= n
}

// words is the number of 64-bit words of an integer of the given bit length.
func words(bits int) int { return bits/64 + 1 }

// mulCost is the fuel charged for multiplying (or dividing, or taking the gcd of)
// integers of the given bit lengths. It is a deterministic over-estimate of
// schoolbook cost, one unit per 32 word products.
func (m *meter) mulCost(bitsA, bitsB int) {
	if bitsA > maxBits || bitsB > maxBits {
		m.spend(m.left + 1)
	}
	m.spend(1 + words(bitsA)*words(bitsB)/32)
}

func ratBits(r *big.Rat) int { return r.Num().BitLen() + r.Denom().BitLen() }

// ratMul returns a*b, charged.
func (m *meter) ratMul(a, b *big.Rat) *big.Rat {
	m.mulCost(ratBits(a), ratBits(b))
	return new(big.Rat).Mul(a, b)
}

// ratAdd returns a+b, charged.
func (m *meter) ratAdd(a, b *big.Rat) *big.Rat {
	m.mulCost(ratBits(a), ratBits(b))
	m.mulCost(ratBits(a), ratBits(b))
	return new(big.Rat).Add(a, b)
}

// ratQuo returns a/b for b != 0, charged.
func (m *meter) ratQuo(a, b *big.Rat) *big.Rat {
	m.mulCost(ratBits(a), ratBits(b))
	return new(big.Rat).Quo(a, b)
}

// intPow returns b^e for e >= 0, charging the cost of the result before computing it.
func (m *meter) intPow(b *big.Int, e int64) *big.Int {
	if e < 0 {
		panic("mathverify: intPow with negative exponent")
	}
	bl := int64(b.BitLen())
	switch {
	case e == 0:
		return big.NewInt(1)
	case bl <= 1: // 0, 1, -1
		r := new(big.Int).Set(b)
		if b.Sign() < 0 && e%2 == 0 {
			r.SetInt64(1)
		}
		return r
	}
	if e > maxBits || bl*e > maxBits {
		m.spend(m.left + 1)
	}
	r := int(bl * e)
	m.mulCost(r, r)
	m.mulCost(r, r)
	return new(big.Int).Exp(b, big.NewInt(e), nil)
}

// ratPowInt returns r^e for any integer e (r != 0 when e < 0), charged.
func (m *meter) ratPowInt(r *big.Rat, e int64) *big.Rat {
	neg := e < 0
	if neg {
		if r.Sign() == 0 {
			fail("division by zero")
		}
		e = -e
	}
	n := new(big.Int).Abs(r.Num())
	d := new(big.Int).Set(r.Denom())
	pn, pd := m.intPow(n, e), m.intPow(d, e)
	if r.Sign() < 0 && e%2 == 1 {
		pn.Neg(pn)
	}
	if neg {
		pn, pd = pd, pn
		if pd.Sign() < 0 {
			pd.Neg(pd)
			pn.Neg(pn)
		}
	}
	return new(big.Rat).SetFrac(pn, pd)
}
