package web

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/feval/feval/meter"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/opencontainers/go-digest"
)

// ScenariosView is what a scenarios verdict decided and what it cost, as the
// record states it: the score of the maximum, and per scenario the tests
// passed, the turns, why the agent stopped and the metered cost per model.
type ScenariosView struct {
	Score        string                     `json:"score,omitempty"`
	MaxScore     int                        `json:"max_score"`
	CostMicroUSD int64                      `json:"cost_micro_usd"`
	Scenarios    []scenarios.ScenarioResult `json:"scenarios"`
	// Trace, Receipts and Run are the artifacts the verdict names: the
	// meter's trace and receipts and the signed scenario-run record.
	// Each is empty unless the record names a well-formed digest.
	Trace    digest.Digest `json:"trace,omitempty"`
	Receipts digest.Digest `json:"receipts,omitempty"`
	Run      digest.Digest `json:"run,omitempty"`
}

// OptimizerView is what an optimizer verdict decided: the bar it was judged
// against, each training run and the outcome.
type OptimizerView struct {
	Outcome               string          `json:"outcome,omitempty"`
	BarMicroNats          int64           `json:"bar_micro_nats"`
	FloorMicroNats        int64           `json:"floor_micro_nats"`
	HorizonSteps          int             `json:"horizon_steps"`
	CandidateBarMicroNats int64           `json:"candidate_bar_micro_nats,omitempty"`
	BeaconSource          string          `json:"beacon_source,omitempty"`
	BeaconVerified        bool            `json:"beacon_verified"`
	Runs                  []optimizer.Run `json:"runs"`
}

// scenariosView reads the scenarios members of a verdict record; nil for a
// record of another protocol or one whose members do not have these types.
// The record is shown, never trusted: the page escapes every string.
func scenariosView(record []byte) *ScenariosView {
	var v struct {
		Protocol string `json:"protocol"`
		ScenariosView
		Digests struct {
			Trace    string `json:"trace"`
			Receipts string `json:"receipts"`
			Run      string `json:"run"`
		} `json:"digests"`
	}
	if json.Unmarshal(record, &v) != nil || v.Protocol != "scenarios" {
		return nil
	}
	out := v.ScenariosView
	out.Trace, out.Receipts, out.Run = wellFormed(v.Digests.Trace), wellFormed(v.Digests.Receipts), wellFormed(v.Digests.Run)
	if out.Scenarios == nil {
		out.Scenarios = []scenarios.ScenarioResult{}
	}
	for i := range out.Scenarios {
		if out.Scenarios[i].Models == nil {
			out.Scenarios[i].Models = []meter.ModelCost{}
		}
	}
	return &out
}

// optimizerView reads the optimizer members of a verdict record; nil for a
// record of another protocol or one whose members do not have these types.
func optimizerView(record []byte) *OptimizerView {
	var v struct {
		Protocol string `json:"protocol"`
		OptimizerView
		Beacon *struct {
			Source   string `json:"source"`
			Verified bool   `json:"verified"`
		} `json:"beacon"`
	}
	if json.Unmarshal(record, &v) != nil || v.Protocol != "optimizer" {
		return nil
	}
	out := v.OptimizerView
	if v.Beacon != nil {
		out.BeaconSource, out.BeaconVerified = v.Beacon.Source, v.Beacon.Verified
	}
	if out.Runs == nil {
		out.Runs = []optimizer.Run{}
	}
	for i := range out.Runs {
		out.Runs[i].Checkpoint = wellFormed(string(out.Runs[i].Checkpoint))
	}
	return &out
}

// wellFormed is s as a digest when it is one, else "".
func wellFormed(s string) digest.Digest {
	d, err := digest.Parse(s)
	if err != nil {
		return ""
	}
	return d
}

// linkedDigests are the artifacts a protocol's verdict names in its own
// members: a scenarios verdict's trace and run record (traces) and receipts,
// an optimizer verdict's checkpoints.
func (v *ScenariosView) linkedDigests() (traces, receipts []digest.Digest) {
	for _, d := range []digest.Digest{v.Trace, v.Run} {
		if d != "" {
			traces = append(traces, d)
		}
	}
	if v.Receipts != "" {
		receipts = append(receipts, v.Receipts)
	}
	return traces, receipts
}

func (v *OptimizerView) checkpoints() []digest.Digest {
	var out []digest.Digest
	for _, r := range v.Runs {
		if r.Checkpoint != "" {
			out = append(out, r.Checkpoint)
		}
	}
	return out
}

// fields is the summary lines of a scenarios verdict.
func (v *ScenariosView) fields() []Field {
	var out []Field
	if v.Score != "" {
		out = append(out, Field{"score", fmt.Sprintf("%s of %d", v.Score, v.MaxScore)})
	} else {
		out = append(out, Field{"score", fmt.Sprintf("none of %d (not every scenario scored)", v.MaxScore)})
	}
	out = append(out, Field{"cost", usd(v.CostMicroUSD) + " for every model call of every scenario"})
	for _, s := range v.Scenarios {
		var models []string
		for _, m := range s.Models {
			models = append(models, fmt.Sprintf("%s %d calls %s", m.Model, m.Calls, usd(m.CostMicroUSD)))
		}
		line := fmt.Sprintf("%d/%d passed (%s), %d turns, stop %s, %s", s.Passed, s.Total, s.Status, s.Turns, s.Stop, usd(s.CostMicroUSD))
		if len(models) > 0 {
			line += ": " + strings.Join(models, ", ")
		}
		out = append(out, Field{"scenario " + s.Name, line})
	}
	for _, l := range []struct {
		name string
		d    digest.Digest
	}{{"trace", v.Trace}, {"receipts", v.Receipts}, {"run record", v.Run}} {
		if l.d != "" {
			out = append(out, Field{l.name, l.d.String()})
		}
	}
	return out
}

// fields is the summary lines of an optimizer verdict.
func (v *OptimizerView) fields() []Field {
	var out []Field
	if v.Outcome != "" {
		out = append(out, Field{"outcome", v.Outcome})
	}
	out = append(out, Field{"bar", fmt.Sprintf("%d micro-nats (an improvement of at least %d clears it; horizon %d steps)",
		v.BarMicroNats, v.FloorMicroNats, v.HorizonSteps)})
	if v.BeaconSource != "" {
		b := v.BeaconSource
		if !v.BeaconVerified {
			b += " (unverified)"
		}
		out = append(out, Field{"beacon", b})
	}
	for _, r := range v.Runs {
		line := fmt.Sprintf("%s, %d steps", r.Status, r.Steps)
		if r.Stop != "" {
			line += " (" + r.Stop + ")"
		}
		if r.CPUMillis > 0 {
			line += fmt.Sprintf(", %d ms CPU", r.CPUMillis)
		}
		if r.HeldOutLossMicroNats != nil {
			line += fmt.Sprintf(", held-out loss %d micro-nats", *r.HeldOutLossMicroNats)
			if r.Cleared {
				line += ", clears the bar"
			} else {
				line += ", does not clear the bar"
			}
		}
		if r.Detail != "" {
			line += ": " + r.Detail
		}
		out = append(out, Field{fmt.Sprintf("run %d", r.Index), line})
		if r.Checkpoint != "" {
			out = append(out, Field{fmt.Sprintf("run %d checkpoint", r.Index), r.Checkpoint.String()})
		}
	}
	if v.CandidateBarMicroNats != 0 {
		out = append(out, Field{"candidate bar", fmt.Sprintf("%d micro-nats", v.CandidateBarMicroNats)})
	}
	return out
}

// costChart charts the verdict's own cost per scenario and model; nil when
// it records none.
func (v *ScenariosView) costChart() *CostChart {
	t := newCostTable()
	for _, s := range v.Scenarios {
		for _, m := range s.Models {
			t.entry(map[string]any{"scenario": s.Name, "model": m.Model, "cost_micro_usd": json.Number(fmt.Sprint(m.CostMicroUSD))})
		}
	}
	return t.chart()
}
