package bundle

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

type canonVector struct {
	Name string `json:"name"`
	In   string `json:"in"`
	Out  string `json:"out"`
	Err  string `json:"err"`
}

func loadCanonVectors(t testing.TB) []canonVector {
	b, err := os.ReadFile("testdata/canonical_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []canonVector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 10 {
		t.Fatalf("only %d canonical JSON vectors", len(vs))
	}
	return vs
}

func TestCanonicalVectors(t *testing.T) {
	for _, v := range loadCanonVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			got, err := Canonicalize([]byte(v.In))
			if v.Err != "" {
				if err == nil || !strings.Contains(err.Error(), v.Err) {
					t.Fatalf("Canonicalize(%s) = %s, %v; want error containing %q", v.In, got, err, v.Err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != v.Out {
				t.Fatalf("Canonicalize(%s) = %s, want %s", v.In, got, v.Out)
			}
			again, err := Canonicalize(got)
			if err != nil || string(again) != string(got) {
				t.Fatalf("canonical form is not a fixed point: %s -> %s (%v)", got, again, err)
			}
		})
	}
}

func TestParseCanonicalRejectsNonCanonical(t *testing.T) {
	var v struct{ A int }
	if err := ParseCanonical([]byte(`{"A": 1}`), &v); !errors.Is(err, ErrNotCanonical) {
		t.Fatalf("got %v, want ErrNotCanonical", err)
	}
	if err := ParseCanonical([]byte(`{"A":1,"B":2}`), &v); err == nil {
		t.Fatal("unknown field accepted")
	}
	if err := ParseCanonical([]byte(`{"A":1}`), &v); err != nil || v.A != 1 {
		t.Fatalf("canonical record refused: %v", err)
	}
}

func TestCanonicalRefusesFloatsFromStructs(t *testing.T) {
	if _, err := Canonical(struct{ Score float64 }{0.25}); err == nil {
		t.Fatal("a float reached a canonical record")
	}
}

// FuzzCanonicalize checks that canonical output is a fixed point, valid JSON, and
// that ParseCanonical accepts exactly the canonical forms.
func FuzzCanonicalize(f *testing.F) {
	for _, v := range loadCanonVectors(f) {
		f.Add([]byte(v.In))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON out: %q", out)
		}
		again, err := Canonicalize(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not a fixed point: %q -> %q (%v)", out, again, err)
		}
		var anyv any
		if err := ParseCanonical(out, &anyv); err != nil {
			t.Fatalf("ParseCanonical refused canonical %q: %v", out, err)
		}
	})
}
