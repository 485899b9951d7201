package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/fixtures/tinymodel"
	"github.com/feval/feval/gate"
	"github.com/feval/feval/model"
	"github.com/feval/feval/protocol/rollouts"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The model-bound vectors (docs/PROTOCOL.md §6, "Model-bound rollouts" and
// "Seeded sampling"): a task that binds rows to a tiny Qwen3 model. Each
// miner generates its rows with the seeded sampler; one submits them as
// generated, the others change them the way the check must tolerate or
// catch. Every audit is full, so a verifier runs the check on every row.
//
// Another runtime's logits differ from the reference's in the last bits, so
// the generator refuses rows whose record could depend on them: at every
// position the check reads, the seeded choice leads the next token by at
// least robustMicro, and every margin the record holds lies at least
// robustMicro from ε and at least edgeMicro from a thousandth's edge.
var (
	vectorModelShape = tinymodel.Shape{Hidden: 16, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 8, Intermediate: 32, Merges: 64, MaxPositions: 256}
	// A budget of one near tie: a row with two exceeds it.
	vectorSampling = model.Sampling{TemperatureMilli: 1000, MaxNewTokens: 40, EpsilonMicro: 20000, NearTieBudget: 1}
)

const (
	// vectorModelSeed is the first of ".../model-1", ".../model-2", … whose
	// miners' rows all pass robust (the others each have a position or a
	// changed row too close to a tie to serve).
	vectorModelSeed = "feval/conformance/v1/model-19"
	robustMicro     = 1000
	edgeMicro       = 200
)

// The model-bound miners: keys of their own, since the key seeds the rows.
const (
	modelHonest   = "miner-model"
	modelSwap     = "miner-model-swap"
	modelTie      = "miner-model-tie"
	modelTies     = "miner-model-ties"
	modelPrompt   = "miner-model-prompt"
	modelMaxBytes = 1 << 20
)

// boundModel is the vectors' model, packed into the family's store, and its
// task.
type boundModel struct {
	m    *model.Model
	desc ocispec.Descriptor
	task *rollouts.LoadedTask
}

// modelVectors generates the model-bound vectors.
func (g *generator) modelVectors() error {
	// The ids stay as they are (the seed hashes their UTF-8 bytes); the
	// prompts lose their non-ASCII letters, which the reference tokenizer's
	// NFC normalizer does not take.
	items := conformanceItems()
	var corpus []string
	for i := range items {
		items[i].Prompt = strings.Map(func(r rune) rune {
			if r >= 0x80 {
				return -1
			}
			return r
		}, items[i].Prompt)
		corpus = append(corpus, items[i].Prompt)
	}
	files, err := tinymodel.Generate(vectorModelSeed, corpus, vectorModelShape)
	if err != nil {
		return err
	}
	m, err := files.Load()
	if err != nil {
		return err
	}
	for i := range items {
		if items[i].PromptTokens, err = m.Tokenizer.Encode(items[i].Prompt); err != nil {
			return err
		}
	}
	spec := conformanceSpec(items, 5)
	spec.Model = &rollouts.ModelSpec{Architecture: rollouts.ArchitectureQwen3, Tokenizer: m.TokenizerDigest,
		MaxWeightsBytes: modelMaxBytes, Sampling: vectorSampling}
	f, err := g.openFamily("model", spec, items, timeWindows)
	if err != nil {
		return err
	}
	dir := filepath.Join(f.dir, "model")
	if err := files.Write(dir); err != nil {
		return err
	}
	p, err := bundle.PackModel(g.ctx, f.work, func() (*bundle.Signer, error) { return g.keys[modelHonest], nil }, dir, bundle.PackOptions{Kind: "model"})
	if err != nil {
		return err
	}
	task, err := rollouts.LoadTask(os.DirFS(filepath.Join(f.dir, "task")))
	if err != nil {
		return err
	}
	b := &boundModel{m: m, desc: p.Artifact.OCI(), task: task}
	if err := f.join(timeWindows, []miner{
		{name: modelHonest, write: b.generate(modelHonest, nil)},
		{name: modelSwap, write: b.generate(modelSwap, b.swapToken)},
		{name: modelTie, write: b.generate(modelTie, b.nearTie)},
		{name: modelTies, write: b.generate(modelTies, b.twoNearTies)},
		{name: modelPrompt, write: b.generate(modelPrompt, wrongPrompt)},
	}); err != nil {
		return err
	}

	drand := drandBeacon(drandRound, drandSignature)
	type want struct {
		name, desc, miner string
		status, reason    string
		// row checks the provenance record of the one row the vector is
		// about (nil: every row passes with no near tie).
		row func(p rollouts.Provenance) bool
	}
	failsAt := func(outcome string) func(p rollouts.Provenance) bool {
		return func(p rollouts.Provenance) bool { return p.Outcome == outcome }
	}
	for _, w := range []want{
		{"model-honest", "a model-bound task: every row the seeded completion of the committed model, full audit: passed", modelHonest,
			rollouts.StatusPassed, "", nil},
		{"model-swapped-token", "one completion token replaced by the runner-up, whose margin lies just outside ε: rejected (provenance_mismatch) at that position", modelSwap,
			rollouts.StatusRejected, rollouts.ReasonProvenance, failsAt(model.CheckToken)},
		{"model-near-tie-inside", "one completion token replaced by a runner-up within ε, the rest regenerated: a near tie inside the budget of one, passed", modelTie,
			rollouts.StatusPassed, "", func(p rollouts.Provenance) bool { return p.Outcome == model.CheckOK && p.NearTies == 1 }},
		{"model-near-tie-outside", "two near ties within ε in one row, over the budget of one: rejected (provenance_mismatch) at the second", modelTies,
			rollouts.StatusRejected, rollouts.ReasonProvenance, func(p rollouts.Provenance) bool { return p.Outcome == model.CheckToken && p.NearTies == 1 }},
		{"model-wrong-prompt", "a row whose prompt_tokens differ from the task's at index 2: rejected (provenance_mismatch, wrong_prompt)", modelPrompt,
			rollouts.StatusRejected, rollouts.ReasonProvenance, failsAt(rollouts.CheckWrongPrompt)},
	} {
		out, err := f.evaluate(w.miner, drand, true)
		if err != nil {
			return err
		}
		v := rv(out)
		if v.Status != w.status || v.Reason != w.reason {
			return fmt.Errorf("%s: verdict is %s (%s), the vector needs %s (%s)", w.name, v.Status, v.Reason, w.status, w.reason)
		}
		about, found := -1, 0 // the row the vector is about
		for i, r := range v.Audit.Rows {
			p := r.Provenance
			plain := p != nil && p.Outcome == model.CheckOK && p.NearTies == 0
			switch {
			case p == nil:
				return fmt.Errorf("%s: row %s has no provenance record", w.name, r.TaskID)
			case w.row != nil && w.row(*p):
				about, found = i, found+1
			case !plain:
				return fmt.Errorf("%s: row %s: unexpected provenance %+v", w.name, r.TaskID, *p)
			}
		}
		if w.row != nil && found != 1 {
			return fmt.Errorf("%s: %d rows hold the record the vector is about, want 1", w.name, found)
		}
		vs, err := f.extract(w.name, out.Artifact.OCI(), true)
		if err != nil {
			return err
		}
		if err := g.finish(vs, Vector{Name: w.name, Description: w.desc, Verdict: out.Artifact.Digest, Expect: ExpectIdentical}); err != nil {
			return err
		}
		if w.miner == modelSwap {
			// A validator that misstates the failing token's margin.
			desc, err := f.forge(out, func(v *rollouts.Verdict) { v.Audit.Rows[about].Provenance.MarginMilli++ })
			if err != nil {
				return err
			}
			vs, err := f.extract("differs-provenance-margin", desc, true)
			if err != nil {
				return err
			}
			path := fmt.Sprintf("audit.rows[%d].provenance.margin_milli", about)
			if err := g.finish(vs, Vector{Name: "differs-provenance-margin", Description: "a verdict that misstates the margin of the token failing the provenance check",
				Verdict: desc.Digest, Expect: ExpectDiffersAt + " " + path}); err != nil {
				return err
			}
		}
	}
	return nil
}

// edit changes a miner's generated rows (in task order); seed gives a row's
// seed inputs.
type edit func(rows []gate.Row, seed func(taskID string) model.SeedInput) error

// generate returns the write hook of a model-bound miner: its rows generated
// with the seeded sampler under its key, then changed by ed when given, with
// the claim of every changed row its true reward. It refuses rows a
// runtime's last bits could decide (robust).
func (b *boundModel) generate(minerName string, ed edit) func(*family, string) error {
	return func(f *family, dir string) error {
		miner := f.g.keys[minerName].Public().Fingerprint
		gen := &rollouts.Generator{Task: b.task, Model: b.m, Text: b.m.ResponseText, Workers: 1,
			Spec: rollouts.GenerateSpec{Task: f.task.Digest, Round: f.round.Digest, Model: b.desc.Digest, Miner: miner, Sampling: vectorSampling}}
		if _, err := gen.Run(f.g.ctx, dir); err != nil {
			return err
		}
		path := filepath.Join(dir, rollouts.GeneratedRowsFile)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var rows []gate.Row
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if line == "" {
				continue
			}
			r, rerr := gate.ParseRow([]byte(strings.TrimSuffix(line, "\n")))
			if rerr != nil {
				return rerr
			}
			rows = append(rows, r)
		}
		seed := func(id string) model.SeedInput {
			return model.SeedInput{Round: f.round.Digest.String(), TaskID: id, Miner: miner}
		}
		if ed != nil {
			if err := ed(rows, seed); err != nil {
				return err
			}
		}
		var out bytes.Buffer
		for i := range rows {
			if err := b.robust(rows[i], seed(rows[i].TaskID)); err != nil {
				return err
			}
			line, err := json.Marshal(rows[i])
			if err != nil {
				return err
			}
			out.Write(line)
			out.WriteByte('\n')
		}
		return os.WriteFile(path, out.Bytes(), 0o644)
	}
}

// robustMargin reports a margin that lies clear of a runtime's last bits:
// at least robustMicro from 0 and from ε, and edgeMicro from a thousandth's
// edge.
func robustMargin(mg int64) bool {
	d := mg - vectorSampling.EpsilonMicro
	return mg >= robustMicro && (d >= robustMicro || d <= -robustMicro) && mg%1000 >= edgeMicro && mg%1000 < 1000-edgeMicro
}

// robust checks that another runtime reaches the same record for row r:
// every position the check reads up to its first failure has a clear seeded
// choice, and where the claimed token differs, a robust margin.
func (b *boundModel) robust(r gate.Row, in model.SeedInput) error {
	it, ok := b.task.Item(r.TaskID)
	if !ok || !slices.Equal(r.PromptTokens, it.PromptTokens) {
		return nil // wrong_prompt: the check reads no position
	}
	c, err := b.m.Check(r.PromptTokens, r.CompletionTokens, in, vectorSampling)
	if err != nil {
		return err
	}
	last := len(r.CompletionTokens) - 1
	if c.Outcome != model.CheckOK {
		last = min(c.Position, last)
	}
	for p := 0; p <= last; p++ {
		scores, err := b.m.PositionScores(r.PromptTokens, r.CompletionTokens, p, in, vectorSampling)
		if err != nil {
			return err
		}
		choice, runner := top2(scores)
		if gap := model.MarginMicro(scores, choice, runner); gap < robustMicro {
			return fmt.Errorf("row %s position %d: the seeded choice leads by %d millionths only; generate with another model seed", r.TaskID, p, gap)
		}
		if claimed := r.CompletionTokens[p]; claimed != choice && !robustMargin(model.MarginMicro(scores, choice, claimed)) {
			return fmt.Errorf("row %s position %d: margin %d millionths lies near ε or a thousandth's edge", r.TaskID, p, model.MarginMicro(scores, choice, claimed))
		}
	}
	return nil
}

// top2 is the seeded choice and the token of the next highest score.
func top2(scores []float64) (choice, runner int) {
	choice, runner = model.Choice(scores), -1
	for i, s := range scores {
		if i != choice && (runner < 0 || s > scores[runner]) {
			runner = i
		}
	}
	return choice, runner
}

// runnerUp finds the first position of completion, from position from on,
// whose runner-up token (not an end-of-sequence token) lies between lo and hi
// millionths below the seeded choice with a robust margin.
func (b *boundModel) runnerUp(prompt, completion []int, in model.SeedInput, from int, lo, hi int64) (pos, tok int, err error) {
	for p := from; p < len(completion); p++ {
		scores, err := b.m.PositionScores(prompt, completion, p, in, vectorSampling)
		if err != nil {
			return 0, 0, err
		}
		c, r := top2(scores)
		if mg := model.MarginMicro(scores, c, r); mg > lo && mg < hi && robustMargin(mg) && !b.m.Config.IsEOS(r) {
			return p, r, nil
		}
	}
	return -1, 0, nil
}

// reclaim sets a changed row's claim to the reward its response earns.
func (b *boundModel) reclaim(r *gate.Row) error {
	it, _ := b.task.Item(r.TaskID)
	got, undetermined, err := rollouts.RowReward(it, b.m.ResponseText(r.CompletionTokens), b.task.Spec.MathFuel)
	if err != nil || undetermined {
		return fmt.Errorf("row %s: the changed completion's reward is undetermined (%v)", r.TaskID, err)
	}
	r.RewardClaimed = rollouts.FormatReward(got)
	return nil
}

// swapToken replaces, in the first row that has one, a token whose
// runner-up lies just outside ε by that runner-up, keeping the rest of the
// completion: one swapped token.
func (b *boundModel) swapToken(rows []gate.Row, seed func(string) model.SeedInput) error {
	eps := vectorSampling.EpsilonMicro
	return b.changeOne(rows, seed, "a runner-up just outside ε", func(r *gate.Row, in model.SeedInput) (bool, error) {
		p, tok, err := b.runnerUp(r.PromptTokens, r.CompletionTokens, in, 0, eps, 10*eps)
		if err != nil || p < 0 {
			return false, err
		}
		r.CompletionTokens[p] = tok
		return true, nil
	})
}

// nearTie makes the first row that has one take a runner-up within ε, the
// rest of its completion regenerated: one near tie, inside the budget.
func (b *boundModel) nearTie(rows []gate.Row, seed func(string) model.SeedInput) error {
	return b.changeOne(rows, seed, "a runner-up within ε", func(r *gate.Row, in model.SeedInput) (bool, error) {
		p, err := b.tieAt(r, in, 0)
		return p >= 0, err
	})
}

// twoNearTies does what nearTie does twice in one row: two near ties, over
// the budget of one.
func (b *boundModel) twoNearTies(rows []gate.Row, seed func(string) model.SeedInput) error {
	return b.changeOne(rows, seed, "two runners-up within ε", func(r *gate.Row, in model.SeedInput) (bool, error) {
		p, err := b.tieAt(r, in, 0)
		if err != nil || p < 0 {
			return false, err
		}
		q, err := b.tieAt(r, in, p+1)
		return q >= 0, err
	})
}

// wrongPrompt changes index 2 of the first row's prompt_tokens.
func wrongPrompt(rows []gate.Row, _ func(string) model.SeedInput) error {
	p := rows[0].PromptTokens
	p[2] = (p[2] + 1) % 256
	return nil
}

// changeOne applies change to a copy of each row in turn and keeps the first
// change that succeeds and leaves a robust row, with its true claim.
func (b *boundModel) changeOne(rows []gate.Row, seed func(string) model.SeedInput, what string, change func(r *gate.Row, in model.SeedInput) (bool, error)) error {
	for i := range rows {
		r := rows[i]
		r.CompletionTokens = slices.Clone(r.CompletionTokens)
		in := seed(r.TaskID)
		ok, err := change(&r, in)
		if err != nil {
			return err
		}
		if !ok || b.robust(r, in) != nil || b.reclaim(&r) != nil {
			continue
		}
		rows[i] = r
		return nil
	}
	return fmt.Errorf("no row has %s with a robust record: generate with another model seed", what)
}

// tieAt makes r's completion take the runner-up within ε at the first such
// position from from on, and regenerates the rest with the seeded sampler.
// It returns the position, or -1 when there is none.
func (b *boundModel) tieAt(r *gate.Row, in model.SeedInput, from int) (int, error) {
	p, tok, err := b.runnerUp(r.PromptTokens, r.CompletionTokens, in, from, 0, vectorSampling.EpsilonMicro)
	if err != nil || p < 0 {
		return p, err
	}
	c, err := b.m.Complete(r.PromptTokens, append(slices.Clone(r.CompletionTokens[:p]), tok), in, vectorSampling)
	if err != nil {
		return -1, err
	}
	r.CompletionTokens = c
	return p, nil
}
