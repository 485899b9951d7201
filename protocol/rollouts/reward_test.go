package rollouts

import (
	"math/big"
	"testing"
)

func TestRowReward(t *testing.T) {
	math := Item{TaskID: "math-1", Kind: KindMath, Prompt: "What is 3/4 + 1/4 + 1/2?", Answer: `\frac{3}{2}`}
	ifItem := Item{TaskID: "if-1", Kind: KindIF, Prompt: "Answer in lowercase, with no commas.",
		InstructionIDs: []string{"change_case:english_lowercase", "punctuation:no_comma"}, Kwargs: []map[string]any{{}, {}}}
	cases := []struct {
		name     string
		it       Item
		response string
		want     string // "" = undetermined
	}{
		{"math equal in another form", math, `so the total is \boxed{1.5}`, "1"},
		{"math wrong", math, `\boxed{\frac{5}{4}}`, "0"},
		{"math no answer", math, "I worked on it for a long while and could not find the value they wanted.\nSorry.", "0"},
		{"math unreadable answer", math, `\boxed{the usual one}`, ""},
		{"if both followed", ifItem, "all lowercase and no commas here", "1"},
		{"if one of two", ifItem, "all lowercase, but a comma", "1/2"},
		{"if none", ifItem, "Capital, and comma", "0"},
	}
	for _, c := range cases {
		got, und, err := RowReward(c.it, c.response, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if und != (c.want == "") || (!und && FormatReward(got) != c.want) {
			t.Errorf("%s: reward %v (undetermined %v), want %q", c.name, got, und, c.want)
		}
	}
	if _, _, err := RowReward(Item{TaskID: "x", Kind: "poetry"}, "", 0); err == nil {
		t.Error("unknown task kind accepted")
	}
	bad := ifItem
	bad.InstructionIDs = []string{"no:such_instruction"}
	if _, _, err := RowReward(bad, "x", 0); err == nil {
		t.Error("unknown instruction accepted")
	}
}

func TestFormatReward(t *testing.T) {
	for _, c := range []struct {
		r    *big.Rat
		want string
	}{{big.NewRat(0, 1), "0"}, {big.NewRat(2, 2), "1"}, {big.NewRat(2, 6), "1/3"}} {
		if got := FormatReward(c.r); got != c.want {
			t.Errorf("FormatReward(%v) = %s, want %s", c.r, got, c.want)
		}
	}
}
