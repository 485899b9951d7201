package rollouts

import (
	"fmt"
	"slices"

	"github.com/feval/feval/model"
)

// RuntimeCheck is the outcome of holding a runtime to the seeded-sampling
// check (CheckRuntime).
type RuntimeCheck struct {
	Rows int `json:"rows"`
	// Passed counts the completions the check accepts; Identical those
	// equal to the reference runtime's own (near ties may rightly differ).
	Passed    int              `json:"passed"`
	Identical int              `json:"identical"`
	Failures  []RuntimeFailure `json:"failures"`
}

// RuntimeFailure is a completion the check refuses, with its record.
type RuntimeFailure struct {
	TaskID     string     `json:"task_id"`
	Provenance Provenance `json:"provenance"`
}

// CheckRuntime asks gen for the completion of every item (its prompt_tokens,
// with the seed inputs of round, the item's id and miner, and sampling s)
// and checks each as a validator checks an audited row, with the reference
// runtime ref: what a runtime must pass before a miner generates with it.
// progress, when set, is called after each item. An error is gen's (it
// could not answer) or ref's.
func CheckRuntime(gen model.Generator, ref *model.Model, items []Item, s model.Sampling, round, miner string, progress func(done int)) (RuntimeCheck, error) {
	rc := RuntimeCheck{Failures: []RuntimeFailure{}}
	for i, it := range items {
		in := model.SeedInput{Round: round, TaskID: it.TaskID, Miner: miner}
		got, err := gen.Generate(it.PromptTokens, in, s)
		if err != nil {
			return rc, fmt.Errorf("the runtime on %s: %w", it.TaskID, err)
		}
		want, err := ref.Generate(it.PromptTokens, in, s)
		if err != nil {
			return rc, err
		}
		p, _, err := checkProvenance(ref, s, it, row{prompt: it.PromptTokens, completion: got}, in)
		if err != nil {
			return rc, err
		}
		rc.Rows++
		if p.Outcome == model.CheckOK {
			rc.Passed++
		} else {
			rc.Failures = append(rc.Failures, RuntimeFailure{TaskID: it.TaskID, Provenance: p})
		}
		if slices.Equal(got, want) {
			rc.Identical++
		}
		if progress != nil {
			progress(i + 1)
		}
	}
	return rc, nil
}
