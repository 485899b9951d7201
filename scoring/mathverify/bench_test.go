package mathverify

import (
	"strings"
	"testing"
)

// typicalPairs are gold/answer pairs of the kinds the reference task produces.
var typicalPairs = [][2]string{
	{"42", "42"},
	{"-17", "-18"},
	{`\frac{3}{4}`, "0.75"},
	{`\frac{7}{12}`, `\dfrac{14}{24}`},
	{"4.55", `\frac{91}{20}`},
	{`25\%`, "0.25"},
	{`6\sqrt{2}`, `\sqrt{72}`},
	{`\frac{1+\sqrt{3}}{2}`, `\frac{1}{\sqrt{3}-1}`},
	{`x^2+5x+6`, `(x+2)(x+3)`},
	{`\frac{2x+1}{x^2+x}`, `\frac{1}{x}+\frac{1}{x+1}`},
	{`(4, \infty)`, `x > 4`},
	{`(-\infty,2)\cup(3,\infty)`, `(3,\infty)\cup(-\infty,2)`},
	{`(2,-1)`, `(2, -1)`},
	{`\{2, 3\}`, `3, 2`},
	{`\pm 4`, `4`},
}

func BenchmarkCompareTypical(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := typicalPairs[i%len(typicalPairs)]
		Compare(p[0], p[1], DefaultFuel)
	}
}

func BenchmarkRewardTypicalResponse(b *testing.B) {
	prose := strings.Repeat("We expand the product and collect like terms carefully. ", 20)
	resps := make([]string, len(typicalPairs))
	for i, p := range typicalPairs {
		resps[i] = prose + `Therefore the answer is $\boxed{` + p[1] + `}$.`
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := i % len(typicalPairs)
		Reward(typicalPairs[k][0], resps[k])
	}
}
