package scoring

import (
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/feval/feval/internal/detrand"
	"github.com/opencontainers/go-digest"
)

const day = 86400

// nearestRoot returns the integer nearest to n^(1/k), found by bisection and an
// exact comparison; it assumes n^(1/k) is irrational (no ties).
func nearestRoot(n *big.Int, k int64) *big.Int {
	kb := big.NewInt(k)
	lo, hi := big.NewInt(0), new(big.Int).Lsh(big.NewInt(1), uint(n.BitLen()/int(k)+1))
	for new(big.Int).Sub(hi, lo).Cmp(big.NewInt(1)) > 0 { // invariant lo^k <= n < hi^k
		mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
		if new(big.Int).Exp(mid, kb, nil).Cmp(n) <= 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	// n^(1/k) < lo + 1/2  <=>  2^k n < (2 lo + 1)^k
	twice := new(big.Int).Lsh(n, uint(k))
	if twice.Cmp(new(big.Int).Exp(new(big.Int).Add(new(big.Int).Lsh(lo, 1), big.NewInt(1)), kb, nil)) < 0 {
		return lo
	}
	return hi
}

// TestDecayMantissaExactRoots checks D(r, h) = nearest(2^(64 - r/h)) =
// nearest((2^(64h - r))^(1/h)) by exact integer roots, for small half-lives and
// for the default half-life at r = H/4, H/2, 3H/4.
func TestDecayMantissaExactRoots(t *testing.T) {
	check := func(r, h, rootR, rootH int64) {
		t.Helper()
		got, err := decayMantissa(r, h)
		if err != nil {
			t.Fatal(err)
		}
		n := new(big.Int).Lsh(big.NewInt(1), uint(64*rootH-rootR))
		if want := nearestRoot(n, rootH); got.Cmp(want) != 0 {
			t.Fatalf("D(%d, %d) = %s, want %s", r, h, got, want)
		}
	}
	for h := int64(2); h <= 24; h++ {
		for r := int64(1); r < h; r++ {
			check(r, h, r, h)
		}
	}
	check(DefaultHalfLifeSec/4, DefaultHalfLifeSec, 1, 4)
	check(DefaultHalfLifeSec/2, DefaultHalfLifeSec, 1, 2)
	check(3*DefaultHalfLifeSec/4, DefaultHalfLifeSec, 3, 4)
	if d, _ := decayMantissa(0, DefaultHalfLifeSec); d.Cmp(two64()) != 0 {
		t.Fatalf("D(0) = %s, want 2^64", d)
	}
}

// TestDecayMantissaVectors checks reference values computed independently with
// 120-digit decimal arithmetic.
func TestDecayMantissaVectors(t *testing.T) {
	var vectors []struct {
		HalfLifeSec int64  `json:"half_life_sec"`
		RSec        int64  `json:"r_sec"`
		Mantissa    string `json:"mantissa"`
	}
	readJSON(t, "testdata/consensus_decay_vectors.json", &vectors)
	for _, v := range vectors {
		got, err := DecayFraction(v.RSec, v.HalfLifeSec)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := new(big.Int).SetString(v.Mantissa, 10)
		if w := new(big.Rat).SetFrac(want, two64()); got.val().Cmp(w) != 0 {
			t.Errorf("D(%d, %d) = %s x 2^64, want %s", v.RSec, v.HalfLifeSec, new(big.Rat).Mul(got.val(), new(big.Rat).SetInt(two64())), v.Mantissa)
		}
	}
}

func TestDecayMantissaDecreases(t *testing.T) {
	src := detrand.New("scoring/decay-decreases", nil)
	prev, err := decayMantissa(0, DefaultHalfLifeSec)
	if err != nil {
		t.Fatal(err)
	}
	r := int64(0)
	for r < DefaultHalfLifeSec-1 {
		r += int64(src.Range(1, 40000))
		r = min(r, DefaultHalfLifeSec-1)
		d, err := decayMantissa(r, DefaultHalfLifeSec)
		if err != nil {
			t.Fatal(err)
		}
		if d.Cmp(prev) >= 0 || d.Cmp(new(big.Int).Lsh(big.NewInt(1), 63)) <= 0 {
			t.Fatalf("D(%d) = %s does not lie in (2^63, D(previous) = %s)", r, d, prev)
		}
		prev = d
	}
}

func TestDecayFractionErrors(t *testing.T) {
	for _, c := range [][2]int64{{-1, 10}, {10, 10}, {0, 0}} {
		if _, err := DecayFraction(c[0], c[1]); err == nil {
			t.Errorf("DecayFraction(%d, %d) accepted", c[0], c[1])
		}
	}
}

func TestReferenceAt(t *testing.T) {
	cases := []struct {
		t    int64
		want string
	}{
		{0, "30000"},
		{1, "51840025/1728"}, // 30000 + 70000/4838400
		{14 * day, "47500"},
		{28 * day, "65000"},
		{56 * day, "100000"},
		{70 * day, "100000"},
		{-5, "30000"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.t), func(t *testing.T) {
			got, err := ReferenceAt(c.t, DefaultRules().Emission)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != c.want {
				t.Fatalf("R(%d) = %s, want %s", c.t, got, c.want)
			}
		})
	}
	noRamp := DefaultRules().Emission
	noRamp.RampSec = 0
	if got, _ := ReferenceAt(0, noRamp); got.String() != "100000" {
		t.Fatalf("without a ramp R(0) = %s, want 100000", got)
	}
}

func event(h uint64, author string, improvement, at int64) FrontierEvent {
	return FrontierEvent{Height: h, Submission: digest.Digest(fmt.Sprintf("sha256:%04x", h)), Author: author, ImprovementMicroNats: improvement, AtSec: at}
}

func TestSplitEmission(t *testing.T) {
	def := DefaultRules().Emission
	withFloor := def
	withFloor.BurnFloor = NewRatio(1, 4)
	type share struct {
		who    string
		credit int64
		weight string
		units  uint16
	}
	cases := []struct {
		name      string
		rules     EmissionRules
		events    []FrontierEvent
		at        int64
		payable   string
		burnUnits uint16
		shares    []share
	}{
		{
			name: "at launch half of R(0) is paid", rules: def, at: 0,
			// 15000 of R(0) = 30000 micro-nats: payable 1/2; floor(65535/2) = 32767.
			events:  []FrontierEvent{event(1, "alice", 15000, 0)},
			payable: "1/2", burnUnits: 32768,
			shares: []share{{"alice", 15_000_000_000, "1/2", 32767}},
		},
		{
			name: "one half-life later the credit has halved", rules: def, at: 14 * day,
			// credit 20000 of R = 47500: payable 8/19; floor(65535 x 8/19) = 27593.
			events:  []FrontierEvent{event(1, "alice", 40000, 0)},
			payable: "8/19", burnUnits: 37942,
			shares: []share{{"alice", 20_000_000_000, "8/19", 27593}},
		},
		{
			name: "credits above R are capped and split pro rata", rules: def, at: 56 * day,
			// alice 80000 (age 0) + bob 60000/2 (age 14 days) = 110000 > R = 100000.
			events:  []FrontierEvent{event(2, "alice", 80000, 56*day), event(1, "bob", 60000, 42*day)},
			payable: "1", burnUnits: 1,
			shares: []share{{"alice", 80_000_000_000, "8/11", 47661}, {"bob", 30_000_000_000, "3/11", 17873}},
		},
		{
			name: "burn floor", rules: withFloor, at: 0,
			// 1/2 x (1 - 1/4) = 3/8; floor(65535 x 3/8) = 24575.
			events:  []FrontierEvent{event(1, "alice", 15000, 0)},
			payable: "3/8", burnUnits: 40960,
			shares: []share{{"alice", 15_000_000_000, "3/8", 24575}},
		},
		{
			name: "events after the time are not counted", rules: def, at: 100,
			events:  []FrontierEvent{event(1, "alice", 15000, 0), event(2, "bob", 15000, 101)},
			payable: "", burnUnits: 0, shares: nil, // checked below
		},
		{
			name: "no events: everything burns", rules: def, at: 0,
			payable: "0", burnUnits: UnitsTotal, shares: []share{},
		},
		{
			name: "one credit split between one author's two events", rules: def, at: 28 * day,
			// 20000/4 + 12000/2 = 11000 micro-nats of R = 65000: 11/65.
			events:  []FrontierEvent{event(1, "alice", 20000, 0), event(2, "alice", 12000, 14*day)},
			payable: "11/65", burnUnits: 54445, // floor(65535 x 11/65) = 11090
			shares: []share{{"alice", 11_000_000_000, "11/65", 11090}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := SplitEmission(c.events, c.at, c.rules)
			if err != nil {
				t.Fatal(err)
			}
			if c.payable == "" {
				if len(got.Credits) != 1 || got.Credits[0].Author != "alice" || len(got.Shares) != 1 {
					t.Fatalf("future event counted: %+v", got)
				}
				return
			}
			if got.Payable.String() != c.payable || got.BurnUnits != c.burnUnits {
				t.Fatalf("payable %s, burn units %d; want %s, %d", got.Payable, got.BurnUnits, c.payable, c.burnUnits)
			}
			if len(got.Shares) != len(c.shares) {
				t.Fatalf("%d shares, want %d", len(got.Shares), len(c.shares))
			}
			for i, s := range c.shares {
				g := got.Shares[i]
				if g.Contributor != s.who || g.CreditPicoNats != s.credit || g.Weight.String() != s.weight || g.Units != s.units {
					t.Errorf("share %d = %+v, want %+v", i, g, s)
				}
			}
		})
	}
}

// TestSplitEmissionFractionalDecay checks a credit at half a half-life against
// the exact integer square root: floor(I x 10^6 x nearest(2^63.5) / 2^64).
func TestSplitEmissionFractionalDecay(t *testing.T) {
	got, err := SplitEmission([]FrontierEvent{event(1, "alice", 12345, 0)}, 7*day, DefaultRules().Emission)
	if err != nil {
		t.Fatal(err)
	}
	d := nearestRoot(new(big.Int).Lsh(big.NewInt(1), 127), 2)
	want := new(big.Int).Mul(big.NewInt(12345_000_000), d)
	want.Rsh(want, 64)
	if c := got.Credits[0]; c.CreditPicoNats != want.Int64() || c.Halvings != 0 || c.AgeSec != 7*day {
		t.Fatalf("credit %+v, want %s pico-nats", c, want)
	}
}

func TestSplitEmissionVectors(t *testing.T) {
	var cases []struct {
		Name   string          `json:"name"`
		Rules  EmissionRules   `json:"rules"`
		AtSec  int64           `json:"at_sec"`
		Events []FrontierEvent `json:"events"`
		Want   struct {
			ReferenceMicroNats Ratio   `json:"reference_micro_nats"`
			CreditPicoNats     int64   `json:"credit_pico_nats"`
			Payable            Ratio   `json:"payable"`
			Burn               Ratio   `json:"burn"`
			BurnUnits          uint16  `json:"burn_units"`
			Shares             []Share `json:"shares"`
		} `json:"want"`
	}
	readJSON(t, "testdata/consensus_emission_vectors.json", &cases)
	if len(cases) == 0 {
		t.Fatal("no emission vectors")
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			got, err := SplitEmission(c.Events, c.AtSec, c.Rules)
			if err != nil {
				t.Fatal(err)
			}
			w := c.Want
			if got.ReferenceMicroNats.Cmp(w.ReferenceMicroNats) != 0 || got.CreditPicoNats != w.CreditPicoNats ||
				got.Payable.Cmp(w.Payable) != 0 || got.Burn.Cmp(w.Burn) != 0 || got.BurnUnits != w.BurnUnits {
				t.Fatalf("got R %s credit %d payable %s burn %s (%d units); want R %s credit %d payable %s burn %s (%d units)",
					got.ReferenceMicroNats, got.CreditPicoNats, got.Payable, got.Burn, got.BurnUnits,
					w.ReferenceMicroNats, w.CreditPicoNats, w.Payable, w.Burn, w.BurnUnits)
			}
			if g, w := mustJSON(t, got.Shares), mustJSON(t, w.Shares); g != w {
				t.Fatalf("shares\n got %s\nwant %s", g, w)
			}
		})
	}
}

func TestSplitEmissionErrors(t *testing.T) {
	def := DefaultRules().Emission
	bad := def
	bad.HalfLifeSec = 0
	cases := []struct {
		name   string
		events []FrontierEvent
		at     int64
		rules  EmissionRules
	}{
		{"invalid rules", nil, 0, bad},
		{"negative time", nil, -1, def},
		{"negative event time", []FrontierEvent{event(1, "a", 1, -1)}, 0, def},
		{"empty author", []FrontierEvent{event(1, "", 1, 0)}, 0, def},
		{"zero improvement", []FrontierEvent{event(1, "a", 0, 0)}, 0, def},
		{"credit overflow", []FrontierEvent{event(1, "a", 1<<62, 0), event(2, "a", 1<<62, 0)}, 0, def},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := SplitEmission(c.events, c.at, c.rules); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func genEvents(src *detrand.Source) ([]FrontierEvent, int64) {
	n := src.Range(0, 10)
	evs := make([]FrontierEvent, n)
	var at int64
	for i := range evs {
		at += int64(src.Range(0, 30*day))
		evs[i] = event(uint64(i+1), fmt.Sprintf("author%d", src.Intn(4)), int64(src.Range(1000, 60000)), at)
	}
	return evs, at + int64(src.Range(0, 60*day))
}

func sumWeights(e Emission, who func(string) bool) (*big.Rat, int) {
	w, u := new(big.Rat), 0
	for _, s := range e.Shares {
		if who(s.Contributor) {
			w.Add(w, s.Weight.val())
			u += int(s.Units)
		}
	}
	return w, u
}

func TestSplitEmissionProperties(t *testing.T) {
	floors := []Ratio{{}, NewRatio(1, 10), NewRatio(1, 3)}
	all := func(string) bool { return true }
	for i := 0; i < 300; i++ {
		src := detrand.New("scoring/emission-properties", seed(i))
		evs, at := genEvents(src)
		rules := DefaultRules().Emission
		rules.BurnFloor = floors[i%len(floors)]
		base, err := SplitEmission(evs, at, rules)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}

		// Weights plus burn are exactly one; units plus burn units are 65535.
		w, u := sumWeights(base, all)
		if w.Add(w, base.Burn.val()).Cmp(ratOne) != 0 || u+int(base.BurnUnits) != UnitsTotal {
			t.Fatalf("case %d: weights + burn = %s, units + burn units = %d", i, w, u+int(base.BurnUnits))
		}

		// Event order does not matter.
		p := slices.Clone(evs)
		detrand.Shuffle(src, p)
		perm, err := SplitEmission(p, at, rules)
		if err != nil {
			t.Fatal(err)
		}
		if mustJSON(t, perm) != mustJSON(t, base) {
			t.Fatalf("case %d: event order changed the split", i)
		}

		if len(evs) == 0 {
			continue
		}
		// Splitting one event into pieces, kept by its author or handed to new
		// identities, never earns more than the whole.
		k := src.Intn(len(evs))
		whole := evs[k]
		if whole.ImprovementMicroNats < 4 {
			continue
		}
		pieces := src.Range(2, 4)
		split := slices.Delete(slices.Clone(evs), k, k+1)
		left := whole.ImprovementMicroNats
		sybils := src.Intn(2) == 0
		for j := 0; j < pieces; j++ {
			part := left
			if j < pieces-1 {
				part = int64(src.Range(1, int(left)-(pieces-1-j)))
			}
			left -= part
			e := whole
			e.ImprovementMicroNats = part
			if sybils {
				e.Author = fmt.Sprintf("sybil%d-%s", j, whole.Author)
			}
			split = append(split, e)
		}
		sp, err := SplitEmission(split, at, rules)
		if err != nil {
			t.Fatal(err)
		}
		mine := func(s string) bool { return s == whole.Author || (sybils && strings.HasPrefix(s, "sybil")) }
		wantW, wantU := sumWeights(base, func(s string) bool { return s == whole.Author })
		gotW, gotU := sumWeights(sp, mine)
		if gotW.Cmp(wantW) > 0 || gotU > wantU {
			t.Fatalf("case %d: splitting %d micro-nats into %d pieces (sybils %v) earned %s (%d units) > whole %s (%d units)",
				i, whole.ImprovementMicroNats, pieces, sybils, gotW, gotU, wantW, wantU)
		}

		// A credit never grows with time.
		later, err := SplitEmission([]FrontierEvent{whole}, at+int64(src.Range(1, 20*day)), rules)
		if err != nil {
			t.Fatal(err)
		}
		now, err := SplitEmission([]FrontierEvent{whole}, at, rules)
		if err != nil {
			t.Fatal(err)
		}
		if later.CreditPicoNats > now.CreditPicoNats {
			t.Fatalf("case %d: credit grew from %d to %d", i, now.CreditPicoNats, later.CreditPicoNats)
		}
	}
}

// TestSplitEmissionSplitAtLaunchIsExact: without decay and below the cap, credits
// are exactly linear, so a split earns exactly the whole in exact weights.
func TestSplitEmissionSplitAtLaunchIsExact(t *testing.T) {
	rules := DefaultRules().Emission
	whole, err := SplitEmission([]FrontierEvent{event(1, "alice", 9000, 0)}, 0, rules)
	if err != nil {
		t.Fatal(err)
	}
	split, err := SplitEmission([]FrontierEvent{event(1, "alice", 4000, 0), event(2, "bob", 3000, 0), event(3, "carol", 2000, 0)}, 0, rules)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := sumWeights(split, func(string) bool { return true })
	if w.Cmp(whole.Payable.val()) != 0 || whole.Payable.String() != "3/10" {
		t.Fatalf("split weights %s, whole %s; want both 3/10", w, whole.Payable)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
