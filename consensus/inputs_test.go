package consensus

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/scoring"
)

var (
	fpA = strings.Repeat("a", 64)
	fpB = strings.Repeat("0123456789abcdef", 4)
)

func TestParseStakes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]uint64 // nil: an error wrapping ErrInput
	}{
		{"two validators", `{"stakes": {"` + fpA + `": 100, "` + fpB + `": 0}}`, map[string]uint64{fpA: 100, fpB: 0}},
		{"empty table", `{"stakes": {}}`, map[string]uint64{}},
		{"largest stake", `{"stakes": {"` + fpA + `": 18446744073709551615}}`, map[string]uint64{fpA: 1<<64 - 1}},
		{"total overflows", `{"stakes": {"` + fpA + `": 18446744073709551615, "` + fpB + `": 1}}`, nil},
		{"stake beyond 64 bits", `{"stakes": {"` + fpA + `": 18446744073709551616}}`, nil},
		{"negative stake", `{"stakes": {"` + fpA + `": -1}}`, nil},
		{"fractional stake", `{"stakes": {"` + fpA + `": 1.5}}`, nil},
		{"exponent", `{"stakes": {"` + fpA + `": 1e3}}`, nil},
		{"stake as string", `{"stakes": {"` + fpA + `": "100"}}`, nil},
		{"upper-case fingerprint", `{"stakes": {"` + strings.ToUpper(fpA) + `": 1}}`, nil},
		{"short fingerprint", `{"stakes": {"abc": 1}}`, nil},
		{"duplicate fingerprint", `{"stakes": {"` + fpA + `": 1, "` + fpA + `": 2}}`, nil},
		{"unknown member", `{"stakes": {}, "epoch": 3}`, nil},
		{"member name in another case", `{"Stakes": {"` + fpA + `": 1}}`, nil},
		{"both spellings of a name", `{"stakes": {}, "STAKES": {"` + fpA + `": 1}}`, nil},
		{"missing stakes", `{}`, nil},
		{"null stakes", `{"stakes": null}`, nil},
		{"trailing data", `{"stakes": {}} {}`, nil},
		{"not JSON", `stakes`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStakes([]byte(tc.in))
			if tc.want == nil {
				if !errors.Is(err, ErrInput) {
					t.Fatalf("ParseStakes = %v, %v; want an error wrapping ErrInput", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got.Stakes, tc.want) {
				t.Fatalf("ParseStakes = %v, %v; want %v", got.Stakes, err, tc.want)
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	def := scoring.DefaultRules()
	count := scoring.DefaultRules()
	count.Winsorization.Mode = scoring.WinsorCount
	count.MaxScore = scoring.NewRatio(1, 1)
	tests := []struct {
		name string
		in   string
		want *scoring.Rules // nil: an error wrapping ErrInput
	}{
		{"empty object keeps every default", `{}`, &def},
		{"partial nested object", `{"max_score":"1","winsorization":{"mode":"count"}}`, &count},
		{"float", `{"quorum":0.4}`, nil},
		{"decimal string", `{"quorum":"0.4"}`, nil},
		{"non-canonical rational", `{"quorum":"4/10"}`, nil},
		{"out of domain", `{"quorum":"3/2"}`, nil},
		{"unknown mode", `{"winsorization":{"mode":"trimmed"}}`, nil},
		{"unknown member", `{"quorom":"1/2"}`, nil},
		{"fractional integer field", `{"frontier":{"floor_micro_nats":1.5}}`, nil},
		{"trailing data", `{}{}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRules([]byte(tc.in))
			if tc.want == nil {
				if !errors.Is(err, ErrInput) {
					t.Fatalf("ParseRules = %v; want an error wrapping ErrInput", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g, w := encodeAny(t, got), encodeAny(t, *tc.want); g != w {
				t.Fatalf("ParseRules = %s, want %s", g, w)
			}
		})
	}
}

func TestParseRuns(t *testing.T) {
	sub := "sha256:" + fpA
	tests := []struct {
		name string
		in   string
		n    int // -1: an error wrapping ErrInput
	}{
		{"two runs", `[{"submission":"` + sub + `","author":"alice","run_index":0,"loss_micro_nats":5,"at_sec":0},` +
			`{"submission":"` + sub + `","author":"alice","run_index":1,"loss_micro_nats":4,"at_sec":9}]`, 2},
		{"no runs", `[]`, 0},
		{"null", `null`, -1},
		{"object", `{}`, -1},
		{"float loss", `[{"submission":"` + sub + `","author":"a","run_index":0,"loss_micro_nats":1.5,"at_sec":0}]`, -1},
		{"bad digest", `[{"submission":"sha256:xyz","author":"a","run_index":0,"loss_micro_nats":1,"at_sec":0}]`, -1},
		{"unknown member", `[{"submission":"` + sub + `","author":"a","loss":1}]`, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRuns([]byte(tc.in))
			if tc.n < 0 {
				if !errors.Is(err, ErrInput) {
					t.Fatalf("ParseRuns = %v, %v; want an error wrapping ErrInput", got, err)
				}
				return
			}
			if err != nil || len(got) != tc.n {
				t.Fatalf("ParseRuns = %v, %v; want %d runs", got, err, tc.n)
			}
		})
	}
}

// TestExampleInputs parses the example files docs/CONSENSUS.md shows.
func TestExampleInputs(t *testing.T) {
	for _, f := range []struct {
		path  string
		parse func([]byte) error
	}{
		{"testdata/stakes.json", func(b []byte) error { _, err := ParseStakes(b); return err }},
		{"testdata/rules.json", func(b []byte) error { _, err := ParseRules(b); return err }},
		{"testdata/runs.json", func(b []byte) error { _, err := ParseRuns(b); return err }},
	} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.parse(b); err != nil {
			t.Errorf("%s: %v", f.path, err)
		}
	}
}

// roundTrip checks that what parse accepts encodes canonically to bytes that
// parse back to the same canonical bytes.
func roundTrip[T any](t *testing.T, parse func([]byte) (T, error), in []byte) {
	v, err := parse(in)
	if err != nil {
		return
	}
	c1, err := bundle.Canonical(v)
	if err != nil {
		t.Fatalf("accepted %q but cannot encode it: %v", in, err)
	}
	v2, err := parse(c1)
	if err != nil {
		t.Fatalf("accepted %q but not its canonical form %s: %v", in, c1, err)
	}
	c2, err := bundle.Canonical(v2)
	if err != nil || string(c1) != string(c2) {
		t.Fatalf("round trip of %q: %s then %s (%v)", in, c1, c2, err)
	}
}

func FuzzParseStakes(f *testing.F) {
	f.Add([]byte(`{"stakes": {"` + fpA + `": 100, "` + fpB + `": 0}}`))
	f.Add([]byte(`{"stakes": {}}`))
	f.Add([]byte(`{"stakes": {"` + fpA + `": 18446744073709551615}}`))
	f.Add([]byte(`{"stakes": {"` + fpA + `": 1.5}}`))
	f.Add([]byte(`{"Stakes": {"` + fpA + `": 1}}`))
	f.Fuzz(func(t *testing.T, b []byte) { roundTrip(t, ParseStakes, b) })
}

func FuzzParseRules(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"max_score":"1","winsorization":{"mode":"count","lower":"0","upper":"1"}}`))
	f.Add([]byte(`{"seat":{"margin":"3/100","full_margin_up_to":"7/10"},"emission":{"burn_floor":"1/3"}}`))
	f.Add([]byte(`{"quorum":0.4}`))
	f.Add([]byte(`{"Max_Score":"1"}`))
	f.Fuzz(func(t *testing.T, b []byte) { roundTrip(t, ParseRules, b) })
}

func FuzzParseRuns(f *testing.F) {
	f.Add([]byte(`[{"submission":"sha256:` + fpA + `","author":"alice","run_index":0,"loss_micro_nats":5,"at_sec":0}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"Submission":"sha256:` + fpA + `","author":"alice","run_index":0,"loss_micro_nats":5,"at_sec":0}]`))
	f.Add([]byte(`[{"submission":"sha256:` + fpA + `","author":"","run_index":18446744073709551615,"loss_micro_nats":-1,"at_sec":-9}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, ParseRuns, b)
		if runs, err := ParseRuns(b); err == nil {
			// Whatever parses, the fold either accepts or refuses; it never panics.
			_, _ = scoring.FoldFrontier(0, runs, scoring.DefaultRules().Frontier)
		}
	})
}
