package scoring

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseRatio(t *testing.T) {
	valid := []string{"0", "1", "20", "-3", "7/20", "-3/4", "1/3", "123456789012345678901234567891/2"}
	for _, s := range valid {
		t.Run("valid "+s, func(t *testing.T) {
			x, err := ParseRatio(s)
			if err != nil {
				t.Fatalf("ParseRatio(%q): %v", s, err)
			}
			if got := x.String(); got != s {
				t.Fatalf("String() = %q, want %q", got, s)
			}
		})
	}
	invalid := []struct{ name, in string }{
		{"empty", ""},
		{"decimal", "0.35"},
		{"not reduced", "14/40"},
		{"plus sign", "+1"},
		{"unit denominator", "1/1"},
		{"zero denominator", "1/0"},
		{"negative zero", "-0"},
		{"leading zero", "01"},
		{"leading zero denominator", "1/02"},
		{"zero with denominator", "0/5"},
		{"missing denominator", "1/"},
		{"missing numerator", "/2"},
		{"negative denominator", "1/-2"},
		{"space", " 1"},
		{"exponent", "1e3"},
		{"two slashes", "1/2/3"},
		{"only minus", "-"},
		{"too long", strings.Repeat("9", maxRatioLen+1)},
	}
	for _, c := range invalid {
		t.Run("invalid "+c.name, func(t *testing.T) {
			if x, err := ParseRatio(c.in); !errors.Is(err, ErrRatioSyntax) {
				t.Fatalf("ParseRatio(%q) = %v, %v; want ErrRatioSyntax", c.in, x, err)
			}
		})
	}
}

func TestRatioZeroValueAndImmutability(t *testing.T) {
	var z Ratio
	if z.String() != "0" || z.Sign() != 0 || z.Cmp(NewRatio(0, 1)) != 0 {
		t.Fatalf("zero Ratio = %q", z)
	}
	x := NewRatio(7, 20)
	r := x.Rat()
	r.SetInt64(5)
	if x.String() != "7/20" {
		t.Fatalf("modifying Rat() changed the Ratio to %s", x)
	}
	y := RatioOf(r)
	r.SetInt64(6)
	if y.String() != "5" {
		t.Fatalf("modifying the source of RatioOf changed the Ratio to %s", y)
	}
}

func TestRatioJSON(t *testing.T) {
	in := struct {
		A Ratio `json:"a"`
		B Ratio `json:"b"`
	}{NewRatio(-14, 40), Ratio{}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"a":"-7/20","b":"0"}` {
		t.Fatalf("marshal = %s", b)
	}
	if err := json.Unmarshal([]byte(`{"a":0.35}`), &in); err == nil {
		t.Fatal("a JSON number was accepted as a ratio")
	}
	if err := json.Unmarshal([]byte(`{"a":"7/21"}`), &in); !errors.Is(err, ErrRatioSyntax) {
		t.Fatalf("unreduced ratio: %v", err)
	}
}

func TestDefaultRules(t *testing.T) {
	r := DefaultRules()
	if err := r.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	// The defaults as docs/CONSENSUS.md states them.
	want := `{"max_score":"20","quorum":"2/5",` +
		`"winsorization":{"mode":"stake_percentile","lower":"1/10","upper":"9/10"},` +
		`"seat":{"margin":"3/100","full_margin_up_to":"7/10"},` +
		`"frontier":{"floor_micro_nats":1000},` +
		`"emission":{"half_life_sec":1209600,"reference_start_micro_nats":30000,` +
		`"reference_end_micro_nats":100000,"ramp_sec":4838400,"burn_floor":"0"},` +
		`"weights":{"rollouts":"proportional","scenarios":"seat","optimizer":"proportional"}}`
	if string(b) != want {
		t.Fatalf("defaults encode as\n%s\nwant\n%s", b, want)
	}
}

func TestRulesDecodeKeepsDefaults(t *testing.T) {
	r := DefaultRules()
	if err := json.Unmarshal([]byte(`{"quorum":"1/2","winsorization":{"mode":"count"}}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Quorum.String() != "1/2" || r.Winsorization.Mode != WinsorCount {
		t.Fatalf("fields not decoded: %+v", r)
	}
	if r.Winsorization.Lower.String() != "1/10" || r.Seat.Margin.String() != "3/100" || r.Emission.HalfLifeSec != DefaultHalfLifeSec {
		t.Fatalf("omitted fields lost their defaults: %+v", r)
	}
}

func TestRulesValidate(t *testing.T) {
	cases := []struct {
		name  string
		field string
		edit  func(*Rules)
	}{
		{"zero max score", "max_score", func(r *Rules) { r.MaxScore = Ratio{} }},
		{"quorum above one", "quorum", func(r *Rules) { r.Quorum = NewRatio(3, 2) }},
		{"negative quorum", "quorum", func(r *Rules) { r.Quorum = NewRatio(-1, 2) }},
		{"unknown mode", "winsorization.mode", func(r *Rules) { r.Winsorization.Mode = "trimmed" }},
		{"empty mode", "winsorization.mode", func(r *Rules) { r.Winsorization.Mode = "" }},
		{"lower equals upper", "winsorization", func(r *Rules) { r.Winsorization.Lower = NewRatio(1, 2); r.Winsorization.Upper = NewRatio(1, 2) }},
		{"upper above one", "winsorization", func(r *Rules) { r.Winsorization.Upper = NewRatio(11, 10) }},
		{"negative margin", "seat.margin", func(r *Rules) { r.Seat.Margin = NewRatio(-1, 100) }},
		{"knee above one", "seat.full_margin_up_to", func(r *Rules) { r.Seat.FullMarginUpTo = NewRatio(2, 1) }},
		{"zero floor", "frontier.floor_micro_nats", func(r *Rules) { r.Frontier.FloorMicroNats = 0 }},
		{"zero half-life", "emission.half_life_sec", func(r *Rules) { r.Emission.HalfLifeSec = 0 }},
		{"zero reference start", "emission.reference_start_micro_nats", func(r *Rules) { r.Emission.ReferenceStartMicroNats = 0 }},
		{"zero reference end", "emission.reference_end_micro_nats", func(r *Rules) { r.Emission.ReferenceEndMicroNats = 0 }},
		{"negative ramp", "emission.ramp_sec", func(r *Rules) { r.Emission.RampSec = -1 }},
		{"burn floor above one", "emission.burn_floor", func(r *Rules) { r.Emission.BurnFloor = NewRatio(5, 4) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := DefaultRules()
			c.edit(&r)
			err := r.Validate()
			if !errors.Is(err, ErrInvalidRules) {
				t.Fatalf("Validate() = %v, want ErrInvalidRules", err)
			}
			if !strings.Contains(err.Error(), c.field+":") {
				t.Fatalf("error %q does not name field %s", err, c.field)
			}
		})
	}
}

func FuzzParseRatio(f *testing.F) {
	for _, s := range []string{"0", "7/20", "-3/4", "14/40", "0.35", "1/1", "-0", "99999999999999999999/2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		x, err := ParseRatio(s)
		if err != nil {
			return
		}
		if x.String() != s {
			t.Fatalf("ParseRatio(%q).String() = %q", s, x.String())
		}
		b, err := x.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var y Ratio
		if err := y.UnmarshalText(b); err != nil || y.Cmp(x) != 0 {
			t.Fatalf("text round trip of %q: %v, %v", s, y, err)
		}
	})
}

func FuzzRules(f *testing.F) {
	def, err := json.Marshal(DefaultRules())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(def)
	f.Add([]byte(`{"quorum":"1/2","winsorization":{"mode":"count"}}`))
	f.Add([]byte(`{"max_score":"1","emission":{"burn_floor":"1/3","ramp_sec":0}}`))
	f.Add([]byte(`{"quorum":0.4}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := DefaultRules()
		if err := json.Unmarshal(b, &r); err != nil {
			return
		}
		_ = r.Validate() // must not panic
		once, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal decoded rules: %v", err)
		}
		var again Rules
		if err := json.Unmarshal(once, &again); err != nil {
			t.Fatalf("re-decode %s: %v", once, err)
		}
		twice, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if string(once) != string(twice) {
			t.Fatalf("encoding not stable:\n%s\n%s", once, twice)
		}
	})
}
