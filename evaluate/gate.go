// Package evaluate is where the protocol drivers meet: it dispatches the static
// gate, the evaluation and the replay of each competition kind, so that
// 'feval evaluate' and 'feval replay' share one code path per protocol.
package evaluate

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/feval/feval/gate"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/protocol/scenarios"
)

// Gate runs the static gate of protocol over a submission tree. It never
// executes submission code. It satisfies protocol.GateFunc.
func Gate(_ context.Context, protocol string, task, sub fs.FS) ([]gate.Violation, error) {
	switch protocol {
	case "optimizer":
		return gate.Optimizer(sub, gate.DefaultOptimizerLimits())
	case "scenarios":
		st, err := scenarios.LoadTask(task)
		if err != nil {
			return nil, err
		}
		return gate.Scenarios(sub, st.Models, gate.DefaultScenarioLimits())
	case "rollouts":
		t, err := rollouts.LoadTask(task)
		if err != nil {
			return nil, err
		}
		lim := gate.DefaultRolloutLimits()
		lim.MaxRowBytes = t.Spec.MaxRowBytes
		lim.TokenRows = t.Spec.Model != nil
		return gate.Rollouts(sub, t.IDs(), lim)
	}
	return nil, fmt.Errorf("unknown protocol %q", protocol)
}

// ValidateTask checks that a task directory has the form its protocol needs,
// before a task owner signs it.
func ValidateTask(protocol string, task fs.FS) error {
	switch protocol {
	case "rollouts":
		_, err := rollouts.LoadTask(task)
		return err
	case "scenarios":
		_, err := scenarios.LoadTask(task)
		return err
	case "optimizer":
		_, err := optimizer.LoadTask(task)
		return err
	}
	return fmt.Errorf("unknown protocol %q", protocol)
}
