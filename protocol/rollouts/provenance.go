package rollouts

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/feval/feval/gate"
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

// Provenance is the record of one audited row's check: model.RowCheck with
// its margins in thousandths of a score unit (rounded down). A decision
// compares the margin in millionths with ε; the record keeps thousandths so
// that another runtime, whose logits differ from the reference's in the last
// bits, rebuilds the same record unless a margin lies on a thousandth's edge
// (docs/DECISIONS.md).
type Provenance struct {
	Outcome            string `json:"outcome"`
	Position           int    `json:"position"`
	ClaimedToken       int    `json:"claimed_token"`
	ExpectedToken      int    `json:"expected_token"`
	MarginMilli        int64  `json:"margin_milli"`
	NearTies           int    `json:"near_ties"`
	NearTieMarginMilli int64  `json:"near_tie_margin_milli"`
}

// Text describes a failed check in one line: the outcome, the position, the
// tokens and the margin.
func (p Provenance) Text() string {
	switch p.Outcome {
	case CheckWrongPrompt:
		return fmt.Sprintf("wrong_prompt: the prompt tokens differ from the task's at position %d", p.Position)
	case CheckNoTokens:
		return "no_tokens: a text row where the task takes token rows"
	}
	return fmt.Sprintf("%s at completion position %d (claimed %d, expected %d, margin %d.%03d)",
		p.Outcome, p.Position, p.ClaimedToken, p.ExpectedToken, p.MarginMilli/1000, p.MarginMilli%1000)
}

// provenanceOf is the record of a model check.
func provenanceOf(c model.RowCheck) Provenance {
	return Provenance{Outcome: c.Outcome, Position: c.Position, ClaimedToken: c.Claimed, ExpectedToken: c.Expected,
		MarginMilli: c.MarginMicro / 1000, NearTies: c.NearTies, NearTieMarginMilli: c.NearTieMarginMicro / 1000}
}

// checkProvenance checks one audited row of a model-bound task: a token row
// whose prompt_tokens are the item's and whose completion is the seeded
// sampling of the committed model m (model.Check, one teacher-forced pass).
// It returns the record and, when the row passes, the response text its
// reward is computed on.
func checkProvenance(m *model.Model, s model.Sampling, it Item, r row, in model.SeedInput) (Provenance, string, error) {
	switch {
	case r.prompt == nil:
		return Provenance{Outcome: CheckNoTokens}, "", nil
	case !slices.Equal(r.prompt, it.PromptTokens):
		return Provenance{Outcome: CheckWrongPrompt, Position: firstDifference(r.prompt, it.PromptTokens)}, "", nil
	}
	for i, id := range r.completion {
		if id >= m.Config.VocabSize {
			return Provenance{Outcome: CheckBadTokens, Position: i, ClaimedToken: id}, "", nil
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
		return provenanceOf(pc), "", nil
	}
	return provenanceOf(pc), m.ResponseText(r.completion), nil
}

// firstDifference is the first index where a and b, which differ, differ
// (one ending counts).
func firstDifference(a, b []int) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// checkedRow is an audited row of a model-bound task with its provenance
// check (for a row that is not malformed).
type checkedRow struct {
	row        row
	rerr       *gate.RowError
	provenance Provenance
	text       string
}

// checkSampled reads the audited rows ids of a model-bound task, in order,
// then checks their provenance on every CPU, each row with its own state of
// the shared model.
func checkSampled(m *model.Model, s model.Sampling, task *LoadedTask, rows submissionRows, ids []string, round, miner string) ([]checkedRow, error) {
	out := make([]checkedRow, len(ids))
	for i, id := range ids {
		r, rerr, err := rows.get(id)
		if err != nil {
			return nil, err
		}
		out[i] = checkedRow{row: r, rerr: rerr}
	}
	next := make(chan int)
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c := &out[i]
				if c.rerr != nil {
					continue
				}
				it, _ := task.Item(ids[i])
				c.provenance, c.text, errs[i] = checkProvenance(m, s, it, c.row, model.SeedInput{Round: round, TaskID: ids[i], Miner: miner})
			}
		}()
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, errors.Join(errs...)
}
