package model_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/feval/feval/fixtures/tinymodel"
	"github.com/feval/feval/model"
)

var sampling = model.Sampling{TemperatureMilli: 1000, MaxNewTokens: 16, EpsilonMicro: 20000, NearTieBudget: 2}

func seedFor(task string) model.SeedInput {
	return model.SeedInput{Round: "sha256:" + strings.Repeat("ab", 32), TaskID: task, Miner: strings.Repeat("cd", 32)}
}

func prompt(t testing.TB, m *model.Model, i int) []int {
	ids, err := m.Tokenizer.Encode(testCorpus[i%len(testCorpus)])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestPositionKey pins the seed derivation to its specification, computed
// here from the spelled-out bytes: SHA-256 of the tag, round, task id and
// miner, each followed by a zero byte, then the position as 4 big-endian
// bytes.
func TestPositionKey(t *testing.T) {
	in := seedFor("math-00007")
	var want []byte
	for _, s := range []string{"feval/rollouts/sample/v1", in.Round, in.TaskID, in.Miner} {
		want = append(append(want, s...), 0)
	}
	want = binary.BigEndian.AppendUint32(want, 300)
	if got, w := model.PositionKey(in, 300), sha256.Sum256(want); got != w {
		t.Fatalf("PositionKey %x, want %x", got, w)
	}
	if model.PositionKey(in, 0) == model.PositionKey(in, 1) || model.PositionKey(in, 0) == model.PositionKey(seedFor("math-00008"), 0) {
		t.Fatal("keys of different positions or tasks are equal")
	}
	// Noise: token 5 is block 1, bytes 8..16 of SHA-256(key ‖ 00000001).
	key := model.PositionKey(in, 0)
	g := make([]float64, 6)
	model.Noise(key, g)
	blk := sha256.Sum256(append(key[:], 0, 0, 0, 1))
	x := binary.BigEndian.Uint64(blk[8:])
	u := (float64(x>>11) + 0.5) / (1 << 53)
	if want := -math.Log(-math.Log(u)); math.Abs(g[5]-want) > 1e-12 {
		t.Fatalf("noise of token 5 is %v, the specification gives %v", g[5], want)
	}
	t.Logf("key %s", hex.EncodeToString(key[:]))
}

// A generation and a prefill over the generated tokens see the same logits:
// the row checks, with no near ties.
func TestGenerateThenCheck(t *testing.T) {
	m, _ := tiny(t)
	eos := 0
	for i := range 20 {
		p, in := prompt(t, m, i), seedFor(string(rune('a'+i)))
		out, err := m.Generate(p, in, sampling)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 || len(out) > sampling.MaxNewTokens {
			t.Fatalf("completion of %d tokens", len(out))
		}
		if m.Config.IsEOS(out[len(out)-1]) {
			eos++
		}
		r, err := m.Check(p, out, in, sampling)
		if err != nil || r != (model.RowCheck{Outcome: model.CheckOK}) {
			t.Fatalf("row %d: %+v %v", i, r, err)
		}
		again, _ := m.Generate(p, in, sampling)
		if !slices.Equal(out, again) {
			t.Fatalf("row %d generated twice differs", i)
		}
		other, _ := m.Generate(p, seedFor("other"), sampling)
		if slices.Equal(out, other) {
			t.Fatalf("row %d: another seed gives the same completion", i)
		}
		// Resuming from any prefix gives the same completion.
		k := len(out) / 2
		if resumed, err := m.Complete(p, out[:k], in, sampling); err != nil || !slices.Equal(resumed, out) {
			t.Fatalf("row %d resumed after %d tokens: %v %v, want %v", i, k, resumed, err, out)
		}
	}
	t.Logf("%d of 20 completions ended with an end-of-sequence token", eos)
}

// runnerUp returns the best token other than the choice at a position and
// its margin.
func runnerUp(scores []float64) (choice, second int, marginMicro int64) {
	choice = model.Choice(scores)
	second = -1
	for i, s := range scores {
		if i != choice && (second < 0 || s > scores[second]) {
			second = i
		}
	}
	return choice, second, model.MarginMicro(scores, choice, second)
}

// nearTie is a generated row of 12 tokens and the same row with the
// runner-up token at the position of the smallest runner-up margin (an end
// of sequence excepted), completed from there with the seeded sampler.
type nearTie struct {
	prompt, out []int
	in          model.SeedInput
	s           model.Sampling
	best, token int   // the position and its runner-up
	margin      int64 // the runner-up's margin there
	tied        []int
}

func nearTieRow(t *testing.T, m *model.Model) nearTie {
	t.Helper()
	r := nearTie{prompt: prompt(t, m, 1), in: seedFor("row"), s: sampling, best: -1, margin: math.MaxInt64}
	r.s.MaxNewTokens = 12
	out, err := m.Generate(r.prompt, r.in, r.s)
	if err != nil {
		t.Fatal(err)
	}
	r.out = out
	for pos := range out {
		sc, err := m.PositionScores(r.prompt, out, pos, r.in, r.s)
		if err != nil {
			t.Fatal(err)
		}
		c, second, mg := runnerUp(sc)
		if c != out[pos] {
			t.Fatalf("position %d: PositionScores chooses %d, generation %d", pos, c, out[pos])
		}
		if mg < r.margin && !m.Config.IsEOS(second) {
			r.best, r.margin, r.token = pos, mg, second
		}
	}
	if r.tied, err = m.Complete(r.prompt, append(append([]int(nil), out[:r.best]...), r.token), r.in, r.s); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCheckRejects(t *testing.T) {
	m, _ := tiny(t)
	r := nearTieRow(t, m)
	p, in, s, out := r.prompt, r.in, r.s, r.out
	best, bestMargin, bestTok, tied := r.best, r.margin, r.token, r.tied
	swapped := append([]int(nil), out...)
	swapped[0] = (out[0] + 1) % m.Config.VocabSize
	sc0, _ := m.PositionScores(p, out, 0, in, s)
	eosID := m.Config.EOSTokenIDs[0]
	withEOS := append(append([]int(nil), out[:len(out)-1]...), eosID)
	cases := []struct {
		name       string
		completion []int
		s          model.Sampling
		want       model.RowCheck
	}{
		{"honest", out, s, model.RowCheck{Outcome: model.CheckOK}},
		{"swapped first token", swapped, s, model.RowCheck{Outcome: model.CheckToken, Position: 0, Claimed: swapped[0], Expected: out[0],
			MarginMicro: model.MarginMicro(sc0, out[0], swapped[0])}},
		{"near tie inside the budget", tied, func() model.Sampling { s := s; s.EpsilonMicro = bestMargin; return s }(),
			model.RowCheck{Outcome: model.CheckOK, NearTies: 1, NearTieMarginMicro: bestMargin}},
		{"near tie beyond epsilon", tied, func() model.Sampling { s := s; s.EpsilonMicro = bestMargin - 1; return s }(),
			model.RowCheck{Outcome: model.CheckToken, Position: best, Claimed: bestTok, Expected: out[best], MarginMicro: bestMargin}},
		{"near tie outside the budget", tied, func() model.Sampling { s := s; s.EpsilonMicro = bestMargin; s.NearTieBudget = 0; return s }(),
			model.RowCheck{Outcome: model.CheckToken, Position: best, Claimed: bestTok, Expected: out[best], MarginMicro: bestMargin}},
		{"cut short", out[:len(out)-1], s, model.RowCheck{Outcome: model.CheckTermination, Position: len(out) - 1}},
		{"empty", nil, s, model.RowCheck{Outcome: model.CheckTermination}},
		{"too long", append(append([]int(nil), out...), out[0]), s, model.RowCheck{Outcome: model.CheckTermination, Position: s.MaxNewTokens}},
	}
	if len(out) == s.MaxNewTokens && !m.Config.IsEOS(out[len(out)-1]) {
		sc, _ := m.PositionScores(p, withEOS, len(out)-1, in, s)
		cases = append(cases, struct {
			name       string
			completion []int
			s          model.Sampling
			want       model.RowCheck
		}{"eos not chosen", withEOS, s, model.RowCheck{Outcome: model.CheckToken, Position: len(out) - 1, Claimed: eosID, Expected: out[len(out)-1],
			MarginMicro: model.MarginMicro(sc, out[len(out)-1], eosID)}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := m.Check(p, c.completion, in, c.s)
			if err != nil || got != c.want {
				t.Fatalf("got %+v %v, want %+v", got, err, c.want)
			}
		})
	}
	if _, err := m.Check(p, []int{m.Config.VocabSize}, in, s); !errors.Is(err, model.ErrSequence) {
		t.Fatalf("a token outside the vocabulary: %v", err)
	}
	if _, err := m.Check(nil, out, in, s); !errors.Is(err, model.ErrSequence) {
		t.Fatalf("an empty prompt: %v", err)
	}
}

// A miner that generates with slightly different weights and commits the
// original model fails the check on most rows.
func TestPerturbedWeightsFail(t *testing.T) {
	m, f := tiny(t)
	pm, err := model.Load(f.Config, f.Tokenizer, tinymodel.Perturb(f.Weights), model.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := range 10 {
		p, in := prompt(t, m, i), seedFor(string(rune('k'+i)))
		out, err := pm.Generate(p, in, sampling)
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.Check(p, out, in, sampling)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != model.CheckOK {
			failed++
		}
	}
	if failed < 5 {
		t.Fatalf("only %d of 10 rows from perturbed weights fail", failed)
	}
	t.Logf("%d of 10 rows from weights perturbed by 3 %% fail", failed)
}

func TestSamplingValidate(t *testing.T) {
	if err := sampling.Validate(); err != nil {
		t.Fatalf("the test sampling: %v", err)
	}
	for name, edit := range map[string]func(*model.Sampling){
		"zero temperature":   func(s *model.Sampling) { s.TemperatureMilli = 0 },
		"hot":                func(s *model.Sampling) { s.TemperatureMilli = model.MaxTemperatureMilli + 1 },
		"no tokens":          func(s *model.Sampling) { s.MaxNewTokens = 0 },
		"too many tokens":    func(s *model.Sampling) { s.MaxNewTokens = model.MaxNewTokens + 1 },
		"negative epsilon":   func(s *model.Sampling) { s.EpsilonMicro = -1 },
		"huge epsilon":       func(s *model.Sampling) { s.EpsilonMicro = model.MaxEpsilonMicro + 1 },
		"negative budget":    func(s *model.Sampling) { s.NearTieBudget = -1 },
		"budget over length": func(s *model.Sampling) { s.NearTieBudget = s.MaxNewTokens + 1 },
	} {
		s := sampling
		edit(&s)
		if s.Validate() == nil {
			t.Errorf("%s: %+v accepted", name, s)
		}
	}
}
