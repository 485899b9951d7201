package model_test

import (
	"os/exec"
	"testing"

	"github.com/feval/feval/model"
)

// TestSecondVerifierAgrees runs the provenance check twice on the same rows:
// model.Check on the reference runtime, and the check of
// model/testdata/qwen3_torch.py, written from docs/PROTOCOL.md "Seeded
// sampling" on plain torch's logits. Every decision (outcome, position,
// tokens, near ties) must be the same; the margins, computed from logits
// that differ in the last bits, within marginSlack micro-units. The cases
// keep ε at least 2,000 micro-units from a margin, where the two may
// rightly part.
func TestSecondVerifierAgrees(t *testing.T) {
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s has no torch (make debian-deps installs python3-torch): %v", python, err)
	}
	const marginSlack = 200
	m, f := tiny(t)
	type tcase struct {
		name       string
		prompt     []int
		completion []int
		in         model.SeedInput
		s          model.Sampling
	}
	var cases []tcase
	for i := range 4 {
		p, in := prompt(t, m, i), seedFor(string(rune('p'+i)))
		out, err := m.Generate(p, in, sampling)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tcase{"honest", p, out, in, sampling})
	}
	r := nearTieRow(t, m)
	p, in, s, out, bestMargin, tied := r.prompt, r.in, r.s, r.out, r.margin, r.tied
	swapped := append([]int(nil), out...)
	swapped[0] = (out[0] + 1) % m.Config.VocabSize
	with := func(eps int64, budget int) model.Sampling {
		s := s
		s.EpsilonMicro, s.NearTieBudget = eps, budget
		return s
	}
	cases = append(cases,
		tcase{"swapped first token", p, swapped, in, s},
		tcase{"near tie inside the budget", p, tied, in, with(bestMargin+2000, 2)},
		tcase{"near tie beyond epsilon", p, tied, in, with(max(bestMargin-2000, 0), 2)},
		tcase{"near tie outside the budget", p, tied, in, with(bestMargin+2000, 0)},
		tcase{"cut short", p, out[:len(out)-1], in, s},
		tcase{"too long", p, append(append([]int(nil), out...), out[0]), in, s},
		tcase{"early end", p, append([]int{m.Config.EOSTokenIDs[0]}, out[1:]...), in, s},
	)
	dir := t.TempDir()
	if err := f.Write(dir); err != nil {
		t.Fatal(err)
	}
	type seed struct {
		Round  string `json:"round"`
		TaskID string `json:"task_id"`
		Miner  string `json:"miner"`
	}
	type check struct {
		Prompt     []int          `json:"prompt"`
		Completion []int          `json:"completion"`
		Seed       seed           `json:"seed"`
		Sampling   model.Sampling `json:"sampling"`
	}
	var checks []check
	for _, c := range cases {
		checks = append(checks, check{c.prompt, c.completion, seed{c.in.Round, c.in.TaskID, c.in.Miner}, c.s})
	}
	var got struct {
		Checks []model.RowCheck `json:"checks"`
	}
	runTorch(t, map[string]any{"dir": dir, "checks": checks}, &got)
	if len(got.Checks) != len(cases) {
		t.Fatalf("qwen3_torch.py gave %d checks for %d cases", len(got.Checks), len(cases))
	}
	outcomes := map[string]bool{}
	for i, c := range cases {
		want, err := m.Check(c.prompt, c.completion, c.in, c.s)
		if err != nil {
			t.Fatal(err)
		}
		g := got.Checks[i]
		outcomes[want.Outcome] = true
		if g.Outcome != want.Outcome || g.Position != want.Position || g.Claimed != want.Claimed || g.Expected != want.Expected ||
			g.NearTies != want.NearTies || abs(g.MarginMicro-want.MarginMicro) > marginSlack || abs(g.NearTieMarginMicro-want.NearTieMarginMicro) > marginSlack {
			t.Errorf("%s: torch's check %+v, the reference's %+v", c.name, g, want)
		}
	}
	for _, o := range []string{model.CheckOK, model.CheckToken, model.CheckTermination} {
		if !outcomes[o] {
			t.Errorf("no case ends %s", o)
		}
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
