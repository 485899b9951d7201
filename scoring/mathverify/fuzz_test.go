package mathverify

import (
	"strings"
	"testing"
)

func FuzzExtract(f *testing.F) {
	vs := readJSONL[extractVector](f, "math_extract.jsonl")
	if len(vs) == 0 {
		f.Fatal("no extraction seeds")
	}
	for _, v := range vs {
		f.Add(v.Response)
	}
	f.Fuzz(func(t *testing.T, resp string) {
		a1, h1, ok1 := Extract(resp)
		a2, h2, ok2 := Extract(resp)
		if a1 != a2 || h1 != h2 || ok1 != ok2 {
			t.Fatalf("not deterministic: %q %v %v vs %q %v %v", a1, h1, ok1, a2, h2, ok2)
		}
		if ok1 != (h1 != NotFound) || ok1 != (a1 != "") {
			t.Fatalf("inconsistent result: %q %v %v", a1, h1, ok1)
		}
		if ok1 && !strings.Contains(resp, a1) {
			// joined boxes or spans: the first and the last fragment come from the response
			first, _, _ := strings.Cut(a1, ", ")
			last := a1[strings.LastIndex(a1, ", ")+len(", "):]
			if (h1 != Boxed && h1 != LastMath) || !strings.Contains(resp, first) || !strings.Contains(resp, last) {
				t.Fatalf("answer %q is not part of the response", a1)
			}
		}
	})
}

// FuzzCompare checks that Compare never panics, is deterministic, and that
// fuel only ever cuts a decision short: with less fuel the result is either
// "fuel" or the result with more fuel.
func FuzzCompare(f *testing.F) {
	vs := readJSONL[equivalenceVector](f, "math_equivalence.jsonl")
	if len(vs) == 0 {
		f.Fatal("no comparison seeds")
	}
	for i, v := range vs {
		f.Add(v.Gold, v.Answer, uint16(i*37))
	}
	f.Fuzz(func(t *testing.T, gold, answer string, fuel uint16) {
		const big = 20000
		full := Compare(gold, answer, big)
		if again := Compare(gold, answer, big); again != full {
			t.Fatalf("not deterministic: %v vs %v", full, again)
		}
		small := Compare(gold, answer, int(fuel)%big)
		if small.Reason != ReasonFuel && small != full {
			t.Fatalf("fuel %d gave %v, fuel %d gave %v", fuel, small, big, full)
		}
	})
}

// FuzzParse checks reflexivity: an answer is never NotEqual to itself.
func FuzzParse(f *testing.F) {
	vs := readJSONL[equivalenceVector](f, "math_equivalence.jsonl")
	if len(vs) == 0 {
		f.Fatal("no parse seeds")
	}
	for _, v := range vs {
		f.Add(v.Gold)
		f.Add(v.Answer)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := Compare(s, s, 20000)
		if r.Outcome == NotEqual {
			t.Fatalf("%q is NotEqual to itself: %s", s, r.Reason)
		}
	})
}
