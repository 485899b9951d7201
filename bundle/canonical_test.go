package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
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

type fuzzRecord struct {
	Name   string            `json:"name"`
	Size   int64             `json:"size"`
	Note   string            `json:"note,omitempty"`
	Inner  *fuzzInner        `json:"inner,omitempty"`
	Items  []fuzzInner       `json:"items"`
	Labels map[string]string `json:"labels,omitempty"`
}

type fuzzInner struct {
	Round uint64 `json:"round"`
}

// TestParseCanonicalStrict: one spelling per record. Each input is canonical
// JSON that encoding/json would decode into the record.
func TestParseCanonicalStrict(t *testing.T) {
	var v fuzzRecord
	if err := ParseCanonical([]byte(`{"inner":{"round":1},"items":[],"name":"a","size":1}`), &v); err != nil {
		t.Fatalf("a canonical record: %v", err)
	}
	for name, in := range map[string]string{
		"a name in another case":  `{"Name":"a","items":[],"size":1}`,
		"a nested name":           `{"inner":{"Round":1},"items":[],"name":"a","size":1}`,
		"both spellings":          `{"Size":2,"items":[],"name":"a","size":1}`,
		"a missing field":         `{"items":[],"name":"a"}`,
		"an empty optional field": `{"items":[],"name":"a","note":"","size":1}`,
		"null for a value":        `{"items":[],"name":null,"size":1}`,
		"null for an object":      `{"inner":null,"items":[],"name":"a","size":1}`,
	} {
		var v fuzzRecord
		if err := ParseCanonical([]byte(in), &v); !errors.Is(err, ErrMalformedRecord) {
			t.Errorf("%s: ParseCanonical(%s) = %v, want ErrMalformedRecord", name, in, err)
		}
	}
}

// FuzzParseCanonicalRecord: whatever ParseCanonical accepts into a record
// re-encodes to the same bytes.
func FuzzParseCanonicalRecord(f *testing.F) {
	for _, s := range []string{
		`{"inner":{"round":1},"items":[],"name":"a","size":1}`,
		`{"items":[{"round":2}],"labels":{"K":"v"},"name":"","note":"n","size":-3}`,
		`{"Name":"a","items":[],"size":1}`,
		`{"items":[],"name":"a","note":"","size":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var v fuzzRecord
		if ParseCanonical(in, &v) != nil {
			return
		}
		out, err := Canonical(v)
		if err != nil || string(out) != string(in) {
			t.Fatalf("%q parsed, re-encodes to %q (%v)", in, out, err)
		}
	})
}

// BenchmarkParseCanonical reads a record the size of a full audit's verdict
// (10,000 rows) with every strict check.
func BenchmarkParseCanonical(b *testing.B) {
	type row struct {
		TaskID     string `json:"task_id"`
		Claimed    string `json:"claimed"`
		Recomputed string `json:"recomputed,omitempty"`
		Outcome    string `json:"outcome"`
	}
	type rec struct {
		Rows []row `json:"rows"`
	}
	var r rec
	for i := 0; i < 10000; i++ {
		r.Rows = append(r.Rows, row{TaskID: fmt.Sprintf("math-%05d", i), Claimed: "1", Recomputed: "1", Outcome: "match"})
	}
	raw, err := Canonical(r)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var v rec
		if err := ParseCanonical(raw, &v); err != nil {
			b.Fatal(err)
		}
	}
}
