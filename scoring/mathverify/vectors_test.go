package mathverify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// minVectors is the least number of equivalence vectors the suite accepts.
const minVectors = 200

type equivalenceVector struct {
	Gold     string  `json:"gold"`
	Answer   string  `json:"answer"`
	Expected Outcome `json:"expected"`
	Note     string  `json:"note"`
	Fuel     *int    `json:"fuel,omitempty"`   // DefaultFuel when absent
	Reason   string  `json:"reason,omitempty"` // when set, the Reason must match
}

func readJSONL[T any](t testing.TB, name string) []T {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatalf("opening vectors: %v", err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var v T
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s line %d: %v", name, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return out
}

func TestEquivalenceVectors(t *testing.T) {
	vs := readJSONL[equivalenceVector](t, "math_equivalence.jsonl")
	if len(vs) < minVectors {
		t.Fatalf("math_equivalence.jsonl has %d vectors, want at least %d", len(vs), minVectors)
	}
	for i, v := range vs {
		fuel := DefaultFuel
		if v.Fuel != nil {
			fuel = *v.Fuel
		}
		got := Compare(v.Gold, v.Answer, fuel)
		if got.Outcome != v.Expected {
			t.Errorf("vector %d (%s): Compare(%q, %q) = %v (%s), want %v", i+1, v.Note, v.Gold, v.Answer, got.Outcome, got.Reason, v.Expected)
			continue
		}
		if v.Reason != "" && got.Reason != v.Reason {
			t.Errorf("vector %d (%s): reason %q, want %q", i+1, v.Note, got.Reason, v.Reason)
		}
		// determinism: a second call gives the same result
		if again := Compare(v.Gold, v.Answer, fuel); again != got {
			t.Errorf("vector %d (%s): second call gave %v, first %v", i+1, v.Note, again, got)
		}
	}
}

// TestEquivalenceSymmetry checks that swapping gold and answer keeps every
// decision except where percentages make the roles differ.
func TestEquivalenceSymmetry(t *testing.T) {
	vs := readJSONL[equivalenceVector](t, "math_equivalence.jsonl")
	for i, v := range vs {
		if v.Fuel != nil || strings.Contains(v.Gold+v.Answer, "%") || strings.Contains(v.Gold+v.Answer, "percent") {
			continue
		}
		a := Compare(v.Gold, v.Answer, DefaultFuel)
		b := Compare(v.Answer, v.Gold, DefaultFuel)
		if a.Outcome != b.Outcome {
			t.Errorf("vector %d (%s): %v one way, %v the other (%s / %s)", i+1, v.Note, a.Outcome, b.Outcome, a.Reason, b.Reason)
		}
	}
}
