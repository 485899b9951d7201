package rollouts

import (
	"errors"
	"fmt"

	"github.com/feval/feval/model"
)

// Provenance of audited rows in a task that binds rows to a model
// (docs/PROTOCOL.md, "Seeded sampling").
const (
	// ReasonProvenance: an audited row's tokens are not the ones the
	// committed model and the protocol's seed give.
	ReasonProvenance = "provenance_mismatch"
	// OutcomeProvenance: the row failed the provenance check; its reward
	// is not recomputed.
	OutcomeProvenance = "provenance"

	// Provenance outcomes beyond model.Check's (model.CheckOK,
	// model.CheckToken, model.CheckTermination): the row is a text row,
	// its prompt tokens are not the task's, or its tokens are ones the
	// model cannot run (an id outside the vocabulary, or a sequence longer
	// than its positions).
	CheckNoTokens    = "no_tokens"
	CheckWrongPrompt = "wrong_prompt"
	CheckBadTokens   = "bad_tokens"
)

// Provenance is the record of one audited row's check: model.RowCheck, whose
// members are integers and fixed strings only.
type Provenance = model.RowCheck

// checkProvenance checks one audited row of a model-bound task: a token row
// whose prompt_tokens are the item's and whose completion is the seeded
// sampling of the committed model m (model.Check, one teacher-forced pass).
// It returns the record and, when the row passes, the response text its
// reward is computed on.
func checkProvenance(m *model.Model, s model.Sampling, it Item, r row, in model.SeedInput) (Provenance, string, error) {
	switch {
	case r.prompt == nil:
		return Provenance{Outcome: CheckNoTokens}, "", nil
	case !equalIDs(r.prompt, it.PromptTokens):
		return Provenance{Outcome: CheckWrongPrompt, Position: firstDifference(r.prompt, it.PromptTokens)}, "", nil
	}
	for i, id := range r.completion {
		if id >= m.Config.VocabSize {
			return Provenance{Outcome: CheckBadTokens, Position: i, Claimed: id}, "", nil
		}
	}
	pc, err := m.Check(r.prompt, r.completion, in, s)
	if errors.Is(err, model.ErrSequence) {
		// The prompt is the task's and every id is in the vocabulary: the
		// sequence is longer than the committed model's positions.
		return Provenance{Outcome: CheckBadTokens, Position: max(0, m.Config.MaxPositions-len(r.prompt))}, "", nil
	}
	if err != nil {
		return Provenance{}, "", fmt.Errorf("checking provenance: %w", err)
	}
	if pc.Outcome != model.CheckOK {
		return pc, "", nil
	}
	return pc, m.ResponseText(r.completion), nil
}

func equalIDs(a, b []int) bool {
	return firstDifference(a, b) == -1
}

// firstDifference is the first index where a and b differ (one ending
// counts), or -1 when they are equal.
func firstDifference(a, b []int) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
