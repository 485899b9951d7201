package model_test

import (
	"bytes"
	"encoding/json"
	"math"
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
	p, in := prompt(t, m, 1), seedFor("row")
	s := sampling
	s.MaxNewTokens = 12
	out, err := m.Generate(p, in, s)
	if err != nil {
		t.Fatal(err)
	}
	best, bestMargin, bestTok := -1, int64(math.MaxInt64), 0
	for pos := range out {
		sc, err := m.PositionScores(p, out, pos, in, s)
		if err != nil {
			t.Fatal(err)
		}
		_, second, mg := runnerUp(sc)
		if mg < bestMargin && !m.Config.IsEOS(second) {
			best, bestMargin, bestTok = pos, mg, second
		}
	}
	tied, err := m.Complete(p, append(append([]int(nil), out[:best]...), bestTok), in, s)
	if err != nil {
		t.Fatal(err)
	}
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
	req, _ := json.Marshal(map[string]any{"dir": dir, "checks": checks})
	cmd := exec.Command(python, "testdata/qwen3_torch.py")
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("qwen3_torch.py: %v\n%s", err, stderr.Bytes())
	}
	var got struct {
		Checks []model.RowCheck `json:"checks"`
	}
	if err := json.Unmarshal(b, &got); err != nil || len(got.Checks) != len(cases) {
		t.Fatalf("qwen3_torch.py gave %s: %v", b, err)
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
