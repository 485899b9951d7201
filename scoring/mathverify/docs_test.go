package mathverify

import (
	"maps"
	"math/big"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const rewardsDoc = "../../docs/REWARDS.md"

// TestUnitWordsAsDocumented: the unit words REWARDS.md §2.3 lists are exactly
// the checker's, so the text is enough to recompute a reward.
func TestUnitWordsAsDocumented(t *testing.T) {
	b, err := os.ReadFile(rewardsDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(b), "<!-- unit words: begin -->")
	list, _, ok2 := strings.Cut(rest, "<!-- unit words: end -->")
	if !ok1 || !ok2 {
		t.Fatalf("%s has no unit word list between its markers", rewardsDoc)
	}
	var doc []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(list, -1) {
		doc = append(doc, m[1])
	}
	slices.Sort(doc)
	code := slices.Sorted(maps.Keys(unitWords))
	if !slices.Equal(doc, code) {
		t.Errorf("%s lists %d unit words, the checker has %d:\ndoc  %v\ncode %v", rewardsDoc, len(doc), len(code), doc, code)
	}
	if n := regexp.MustCompile(`exactly these (\d+):`).FindStringSubmatch(string(b)); n == nil || n[1] != strconv.Itoa(len(code)) {
		t.Errorf("%s does not say \"exactly these %d:\"", rewardsDoc, len(code))
	}
}

// TestFuelCharges: the charges of REWARDS.md §2.6 for the steps whose cost a
// second implementation must match exactly to agree near the budget.
func TestFuelCharges(t *testing.T) {
	const budget = 1 << 30
	spent := func(f func(m *meter)) int {
		m := &meter{left: budget}
		f(m)
		return budget - m.left
	}
	big1 := new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), 640)) // 641 bits: 11 words
	for _, c := range []struct {
		name string
		f    func(m *meter)
		want int
	}{
		{"lexing 7 bytes", func(m *meter) { lex("1+2*x^3", m) }, 8},
		{"small product", func(m *meter) { m.ratMul(big.NewRat(2, 3), big.NewRat(5, 7)) }, 1},
		{"product of 11 by 11 words", func(m *meter) { m.ratMul(big1, big1) }, 1 + 11*11/32},
		{"sum: twice a product", func(m *meter) { m.ratAdd(big1, big1) }, 2 * (1 + 11*11/32)},
		// charged on l·e = 2·1000 bits (32 words), not the 1,585 of the result
		{"power 3^1000", func(m *meter) { m.intPow(big.NewInt(3), 1000) }, 2 * (1 + 32*32/32)},
		// 1 + 4(1 + 1), and the sum of the two coefficients: 2
		{"adding two constants as polynomials", func(m *meter) { m.polyAdd(polyInt(1), polyInt(2), false) }, 1 + 4*2 + 2},
	} {
		if got := spent(c.f); got != c.want {
			t.Errorf("%s: %d fuel, REWARDS.md says %d", c.name, got, c.want)
		}
	}
}
