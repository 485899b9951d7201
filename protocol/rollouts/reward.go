package rollouts

import (
	"fmt"
	"math/big"

	"github.com/feval/feval/scoring/ifeval"
	"github.com/feval/feval/scoring/mathverify"
)

// DefaultMathFuel is the step budget of one math comparison when the task does
// not set one.
const DefaultMathFuel = mathverify.DefaultFuel

// RowReward is the reward rule of a rollouts task, the single definition both
// miners (to claim) and validators (to audit) use:
//   - math: 1 if the final answer equals the reference, 0 if it differs or the
//     response gives no answer; undetermined when the checker cannot decide
//     within its fuel (it never guesses);
//   - if: the fraction of the prompt's instructions followed, strictly.
//
// The reward is an exact rational.
func RowReward(it Item, response string, mathFuel int) (reward *big.Rat, undetermined bool, err error) {
	switch it.Kind {
	case KindMath:
		if mathFuel <= 0 {
			mathFuel = DefaultMathFuel
		}
		c := mathverify.Score(it.Answer, response, mathFuel)
		switch {
		case c.Result.Outcome == mathverify.Equal:
			return big.NewRat(1, 1), false, nil
		case c.Result.Outcome == mathverify.NotEqual, c.Method == mathverify.NotFound:
			return new(big.Rat), false, nil
		}
		return nil, true, nil
	case KindIF:
		r, err := ifeval.Reward(it.Prompt, response, it.InstructionIDs, it.Kwargs)
		if err != nil {
			return nil, false, fmt.Errorf("task %s: %w", it.TaskID, err)
		}
		return r, false, nil
	}
	return nil, false, fmt.Errorf("task %s: unknown kind %q", it.TaskID, it.Kind)
}

// FormatReward writes a reward as the rows file and verdicts spell it: "0", "1"
// or a reduced "p/q".
func FormatReward(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	return r.String()
}
