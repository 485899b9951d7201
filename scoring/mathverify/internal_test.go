package mathverify

import (
	"math/big"
	"testing"
)

// TestPiBounds checks the Machin bounds against 50 known digits of π.
func TestPiBounds(t *testing.T) {
	known, _ := new(big.Rat).SetString("3.14159265358979323846264338327950288419716939937510")
	ulp50 := big.NewRat(1, 1)
	ulp50.SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(50), nil))
	for _, prec := range []uint{64, 128, 256, 1024} {
		m := &meter{left: DefaultFuel}
		iv := m.piIval(prec)
		scale := new(big.Int).Lsh(big.NewInt(1), prec)
		lo := new(big.Rat).SetFrac(iv.lo, scale)
		hi := new(big.Rat).SetFrac(iv.hi, scale)
		// π is in [known, known + 1e-50]
		if lo.Cmp(new(big.Rat).Add(known, ulp50)) > 0 || hi.Cmp(known) < 0 {
			t.Fatalf("prec %d: bounds [%s, %s] exclude π", prec, lo.FloatString(60), hi.FloatString(60))
		}
		width := new(big.Rat).Sub(hi, lo)
		if width.Cmp(new(big.Rat).SetFrac(big.NewInt(1<<20), scale)) > 0 {
			t.Fatalf("prec %d: bounds too wide: %s", prec, width.FloatString(30))
		}
	}
}

func TestFactor(t *testing.T) {
	cases := []struct {
		name string
		n    string
		want string // p^k list
	}{
		{"one prime", "97", "97^1"},
		{"small composite", "360", "2^3 3^2 5^1"},
		{"two primes above 2^16", "4295098369", "65537^2"},
		{"semiprime below 2^64", "1000000016000000063", "1000000007^1 1000000009^1"},
		{"prime above 2^64", "18446744073709551629", "18446744073709551629^1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, _ := new(big.Int).SetString(c.n, 10)
			m := &meter{left: DefaultFuel}
			got := ""
			for i, f := range m.factor(n) {
				if i > 0 {
					got += " "
				}
				got += f.p.String() + "^" + big.NewInt(f.k).String()
			}
			if got != c.want {
				t.Fatalf("factor(%s) = %s, want %s", c.n, got, c.want)
			}
		})
	}
	t.Run("square of a prime above 2^64", func(t *testing.T) {
		p, _ := new(big.Int).SetString("18446744073709551629", 10)
		n := new(big.Int).Mul(p, p)
		m := &meter{left: DefaultFuel * 4}
		fs := m.factor(n)
		if len(fs) != 1 || fs[0].p.Cmp(p) != 0 || fs[0].k != 2 {
			t.Fatalf("factor(p^2) = %v", fs)
		}
	})
}

func TestSignOfNearCancellation(t *testing.T) {
	// sqrt(10^20 + 1) - 10^10 is positive but tiny
	cases := []struct {
		name, a, b string
		want       int
	}{
		{"tiny positive", `\sqrt{100000000000000000001}`, `10000000000`, 1},
		{"pi vs 355/113", `\pi`, `\frac{355}{113}`, -1},
		{"sqrt2+sqrt3 vs pi", `\sqrt{2}+\sqrt{3}`, `\pi`, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &meter{left: DefaultFuel}
			b := &builder{m: m}
			x, y := b.answer(c.a), b.answer(c.b)
			got, ok := m.cmpVal(x.v, y.v)
			if !ok || got != c.want {
				t.Fatalf("cmp = %d, %v; want %d", got, ok, c.want)
			}
		})
	}
}

// TestFuelMonotone: more fuel never turns a decision into "fuel", and every
// decision made with little fuel is the one made with plenty.
func TestFuelMonotone(t *testing.T) {
	pairs := [][2]string{
		{`\frac{1}{2004!}`, `\frac{1}{2006!}`},
		{`(x+1)^{12}`, `(1+x)^{12}`},
		{`\sqrt{72}`, `6\sqrt{2}`},
		{`(-\infty,-\sqrt{5})\cup(\sqrt{5},\infty)`, `(\sqrt{5},\infty)\cup(-\infty,-\sqrt{5})`},
	}
	for _, p := range pairs {
		full := Compare(p[0], p[1], DefaultFuel)
		for _, f := range []int{0, 10, 100, 1000, 10000, 100000} {
			r := Compare(p[0], p[1], f)
			if r.Reason != ReasonFuel && r != full {
				t.Errorf("%q vs %q with fuel %d: %v, with default fuel %v", p[0], p[1], f, r, full)
			}
		}
	}
}
