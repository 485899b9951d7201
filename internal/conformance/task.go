package conformance

import (
	"github.com/feval/feval/protocol/rollouts"
)

// The conformance task: twelve rows, written in an order that is not sorted by
// id (a full audit goes in this file order), with ids that are not ASCII (the
// sample ranks the UTF-8 bytes of an id). Every math reference is a plain
// number and every instruction is one of five IFEval types, so a verifier that
// implements only those rules recomputes every reward.
func conformanceItems() []rollouts.Item {
	math := func(id, answer string) rollouts.Item {
		return rollouts.Item{TaskID: id, Kind: rollouts.KindMath, Prompt: "Compute the value of problem " + id + ".", Answer: answer}
	}
	inst := func(id string, kw ...any) rollouts.Item {
		it := rollouts.Item{TaskID: id, Kind: rollouts.KindIF, Prompt: "Write about the sea (" + id + ")."}
		for i := 0; i < len(kw); i += 2 {
			it.InstructionIDs = append(it.InstructionIDs, kw[i].(string))
			it.Kwargs = append(it.Kwargs, kw[i+1].(map[string]any))
		}
		return it
	}
	none := map[string]any{}
	return []rollouts.Item{
		math("math-07", "42"),
		inst("if-02", "punctuation:no_comma", none, "change_case:english_lowercase", none,
			"length_constraints:number_words", map[string]any{"num_words": 5, "relation": "at least"}),
		math("math-01", `\frac{3}{4}`),
		inst("if-01", "detectable_format:number_bullet_lists", map[string]any{"num_bullets": 3}),
		math("math-é2", "-17"),
		inst("if-数3", "length_constraints:number_words", map[string]any{"num_words": 10, "relation": "less than"}),
		math("math-10", "2.5"),
		inst("if-04", "startend:end_checker", map[string]any{"end_phrase": "Is there anything else I can help with?"},
			"punctuation:no_comma", none),
		math("math-03", "1/3"),
		inst("if-05", "change_case:english_lowercase", none),
		math("math-05", "0"),
		inst("if-00", "punctuation:no_comma", none, "length_constraints:number_words", map[string]any{"num_words": 3, "relation": "at least"},
			"startend:end_checker", map[string]any{"end_phrase": "the end"}),
	}
}

// answer is what a miner's model answered to one task, and the reward it
// truly earns under the task's rules.
type answer struct {
	response string
	reward   string
}

// honestAnswers are the responses of the conformance miners, with their true
// rewards: right and wrong answers, answers found by each extraction rule of a
// plain number, partial instruction-following (thirds and halves), and
// Unicode text.
var honestAnswers = map[string]answer{
	"math-07": {"We add 40 and 2. The answer is $\\boxed{42}$.", "1"},
	"if-02":   {"the sea is wide and deep and calm tonight", "1"},
	"math-01": {"Three quarters: $\\boxed{0.75}$", "1"},
	"if-01":   {"Facts:\n* salt\n* waves\n- tides\n- fish", "0"},
	"math-é2": {"Subtracting gives \\boxed{-17.0}", "1"},
	"if-数3":   {"海はとても広い。The sea is large.", "1"},
	"math-10": {"So the result is \\boxed{\\frac{5}{3}}.", "0"},
	"if-04":   {"The sea is blue, and cold. Is there anything else I can help with?", "1/2"},
	"math-03": {"\\boxed{\\frac{2}{6}}", "1"},
	"if-05":   {"The Sea is calm.", "0"},
	"math-05": {"The value is \\boxed{0}", "1"},
	"if-00":   {"\"Waves come, and go. The End\"", "2/3"},
	// the infra_error task's row, whose instruction no checker supports
	"if-lang": {"La mer est calme.", "1"},
}
