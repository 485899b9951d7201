package mathverify

import (
	"strings"
	"testing"
)

type extractVector struct {
	Response string        `json:"response"`
	Answer   string        `json:"answer"`
	Method   ExtractMethod `json:"method"`
	Note     string        `json:"note"`
}

func TestExtractVectors(t *testing.T) {
	vs := readJSONL[extractVector](t, "math_extract.jsonl")
	if len(vs) < 30 {
		t.Fatalf("math_extract.jsonl has %d vectors, want at least 30", len(vs))
	}
	for i, v := range vs {
		ans, how, ok := Extract(v.Response)
		if ans != v.Answer || how != v.Method || ok != (v.Method != NotFound) {
			t.Errorf("vector %d (%s): Extract(%q) = %q, %v, %v; want %q, %v", i+1, v.Note, v.Response, ans, how, ok, v.Answer, v.Method)
		}
	}
}

func TestExtractLinearOnHostileInput(t *testing.T) {
	// many unbalanced boxes: one pass, not one scan per box
	resp := strings.Repeat(`\boxed{`, 20000) + "x"
	if _, how, _ := Extract(resp); how == Boxed {
		t.Fatal("unbalanced boxes gave a boxed answer")
	}
	resp = strings.Repeat(`\boxed{1}`, 20000)
	// adjacent boxes join into one list, still in one pass
	if ans, how, _ := Extract(resp); strings.Count(ans, "1") != 20000 || how != Boxed {
		t.Fatalf("repeated boxes: %d ones, %v", strings.Count(ans, "1"), how)
	}
}

func TestScoreAndReward(t *testing.T) {
	cases := []struct {
		name, gold, response string
		reward               int64
		method               ExtractMethod
		outcome              Outcome
	}{
		{"correct boxed", `\frac{3}{4}`, `so \boxed{0.75}`, 1, Boxed, Equal},
		{"wrong boxed", `\frac{3}{4}`, `so \boxed{0.7}`, 0, Boxed, NotEqual},
		{"no answer", `5`, "I am not sure.\nReally not.", 0, NotFound, Undetermined},
		{"undetermined answer", `5`, `\boxed{\int_0^1 5\,dx}`, 0, Boxed, Undetermined},
		{"fallback", `5`, "Adding up, the final answer is 5.", 1, FinalAnswer, Equal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chk := Score(c.gold, c.response, DefaultFuel)
			if chk.Method != c.method || chk.Result.Outcome != c.outcome {
				t.Fatalf("Score = %+v, want method %v outcome %v", chk, c.method, c.outcome)
			}
			if got := Reward(c.gold, c.response); got.Cmp(chk.Reward()) != 0 || !got.IsInt() || got.Num().Int64() != c.reward {
				t.Fatalf("Reward = %v, want %d", got, c.reward)
			}
		})
	}
}

func TestTextEncodings(t *testing.T) {
	for o := Undetermined; o <= NotEqual; o++ {
		b, err := o.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Outcome
		if err := back.UnmarshalText(b); err != nil || back != o {
			t.Fatalf("outcome %v round trip: %v %v", o, back, err)
		}
	}
	for h := NotFound; h <= Whole; h++ {
		b, err := h.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back ExtractMethod
		if err := back.UnmarshalText(b); err != nil || back != h {
			t.Fatalf("method %v round trip: %v %v", h, back, err)
		}
	}
	var o Outcome
	if err := o.UnmarshalText([]byte("maybe")); err == nil {
		t.Fatal("unknown outcome accepted")
	}
	if _, err := Outcome(9).MarshalText(); err == nil {
		t.Fatal("invalid outcome encoded")
	}
	if Version == "" || !strings.HasPrefix(Version, "mathverify/") {
		t.Fatalf("Version = %q", Version)
	}
}
