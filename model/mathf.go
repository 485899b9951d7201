package model

import "math"

// expCoef[n] is 1/n!, computed once by division.
var expCoef [14]float64

func init() {
	expCoef[0] = 1
	for n := 1; n < len(expCoef); n++ {
		expCoef[n] = expCoef[n-1] / float64(n)
	}
}

// exp returns e^x computed from additions and multiplications alone, each
// rounded separately, so every platform gives the same bits: x = k·ln2 + r
// with |r| <= ln2/2, e^r by its Taylor series to r^13 (Horner over 1/n!),
// scaled by 2^k.
func exp(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > 709.7:
		return math.Inf(1)
	case x < -745.2:
		return 0
	}
	const ln2hi, ln2lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
	k := math.Floor(float64(x*1.44269504088896338700) + 0.5)
	r := float64(x-float64(k*ln2hi)) - float64(k*ln2lo)
	p := expCoef[13]
	for n := 12; n >= 0; n-- {
		p = float64(p*r) + expCoef[n]
	}
	if k >= -1022 && k <= 1023 {
		return p * math.Float64frombits(uint64(int64(k)+1023)<<52)
	}
	return math.Ldexp(p, int(k))
}

// logCoef[i] is 1/(2i+1), computed once by division.
var logCoef [12]float64

func init() {
	for i := range logCoef {
		logCoef[i] = 1 / float64(2*i+1)
	}
}

// log returns the natural logarithm of x > 0 from additions, multiplications
// and divisions alone: x = m·2^e with m in [√½, √2), s = (m-1)/(m+1),
// log m = 2(s + s³/3 + s⁵/5 + … + s²³/23), the reciprocals 1/(2i+1) computed
// once by division.
func log(x float64) float64 {
	switch {
	case x != x || x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	case math.IsInf(x, 1):
		return x
	}
	m, e := math.Frexp(x) // m in [0.5, 1)
	if m < math.Sqrt2/2 {
		m *= 2
		e--
	}
	s := (m - 1) / (m + 1)
	s2 := float64(s * s)
	p := 0.0
	for n := 23; n >= 3; n -= 2 {
		p = float64(p*s2) + logCoef[n/2]
	}
	p = float64(p*s2) + 1
	const ln2hi, ln2lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
	fe := float64(e)
	return float64(fe*ln2hi) + (float64(2*float64(s*p)) + float64(fe*ln2lo))
}
