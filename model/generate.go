package model

import (
	"errors"
	"fmt"
)

// ErrSequence reports token ids a model cannot run: an empty prompt, an id
// outside the vocabulary, or a sequence longer than max_position_embeddings.
var ErrSequence = errors.New("sequence the model cannot run")

func (m *Model) checkSequence(prompt []int, n int) error {
	c := m.Config
	if len(prompt) == 0 {
		return fmt.Errorf("%w: the prompt is empty", ErrSequence)
	}
	if len(prompt)+n > c.MaxPositions {
		return fmt.Errorf("%w: %d prompt tokens and %d new tokens exceed %d positions", ErrSequence, len(prompt), n, c.MaxPositions)
	}
	for i, t := range prompt {
		if t < 0 || t >= c.VocabSize {
			return fmt.Errorf("%w: prompt token %d is %d, outside the vocabulary of %d", ErrSequence, i, t, c.VocabSize)
		}
	}
	return nil
}

// Generator produces completions with the seeded sampler. The reference
// runtime (*Model) implements it in process; another runtime (torch on a GPU,
// for a large model) implements the same contract: the same completion for
// the same prompt, seed and sampling, up to the near ties the check
// tolerates.
type Generator interface {
	Generate(prompt []int, in SeedInput, s Sampling) ([]int, error)
}

// Generate returns the completion of prompt: at completion position p the
// token is Choice(Scores(logits, Noise(PositionKey(in, p)))), where logits
// are the model's next-token logits after the prompt and the tokens chosen so
// far; generation ends after an end-of-sequence token or s.MaxNewTokens
// tokens.
func (m *Model) Generate(prompt []int, in SeedInput, s Sampling) ([]int, error) {
	return m.Complete(prompt, nil, in, s)
}

// Complete is Generate with the first completion tokens given: it returns
// prefix followed by the seeded choices from position len(prefix) on. A
// prefix that already ends the completion (an end-of-sequence token, or
// s.MaxNewTokens tokens) is returned as it is.
func (m *Model) Complete(prompt, prefix []int, in SeedInput, s Sampling) ([]int, error) {
	if err := m.checkSequence(prompt, s.MaxNewTokens); err != nil {
		return nil, err
	}
	out := append([]int(nil), prefix...)
	for i, t := range out {
		if t < 0 || t >= m.Config.VocabSize {
			return nil, fmt.Errorf("%w: prefix token %d is %d, outside the vocabulary", ErrSequence, i, t)
		}
	}
	if len(out) >= s.MaxNewTokens || (len(out) > 0 && m.Config.IsEOS(out[len(out)-1])) {
		return out, nil
	}
	st := m.NewState()
	seq := append(append([]int(nil), prompt...), out...)
	var logits []float32
	for i, t := range seq {
		logits = st.Step(t, i == len(seq)-1)
	}
	V := m.Config.VocabSize
	g, scores := make([]float64, V), make([]float64, V)
	for p := len(out); p < s.MaxNewTokens; p++ {
		Noise(PositionKey(in, p), g)
		Scores(logits, g, s.TemperatureMilli, scores)
		c := Choice(scores)
		out = append(out, c)
		if m.Config.IsEOS(c) || p == s.MaxNewTokens-1 {
			break
		}
		logits = st.Step(c, true)
	}
	return out, nil
}

// PositionScores runs prompt and the first pos completion tokens and returns
// the perturbed scores of completion position pos (for tests, vectors and
// diagnostics; Check computes the same values).
func (m *Model) PositionScores(prompt, completion []int, pos int, in SeedInput, s Sampling) ([]float64, error) {
	if err := m.checkSequence(prompt, pos); err != nil {
		return nil, err
	}
	if pos < 0 || pos > len(completion) {
		return nil, fmt.Errorf("%w: position %d of a %d token completion", ErrSequence, pos, len(completion))
	}
	seq := append(append([]int(nil), prompt...), completion[:pos]...)
	st := m.NewState()
	var logits []float32
	for i, t := range seq {
		if t < 0 || t >= m.Config.VocabSize {
			return nil, fmt.Errorf("%w: token %d is %d, outside the vocabulary", ErrSequence, i, t)
		}
		logits = st.Step(t, i == len(seq)-1)
	}
	V := m.Config.VocabSize
	g, scores := make([]float64, V), make([]float64, V)
	Noise(PositionKey(in, pos), g)
	Scores(logits, g, s.TemperatureMilli, scores)
	return scores, nil
}

// Outcomes of a row check.
const (
	// CheckOK: every token is the seeded choice or a tolerated near tie, and
	// the completion ends as the rule says.
	CheckOK = "ok"
	// CheckToken: a token is neither the seeded choice nor a tolerated near
	// tie.
	CheckToken = "token"
	// CheckTermination: an end-of-sequence token before the last position,
	// or a completion that ends before both an end-of-sequence token and the
	// length limit, or one longer than the limit.
	CheckTermination = "termination"
)

// RowCheck is the outcome of checking one completion. Every field is an
// integer or a fixed string, so it replays identically. Position, Claimed,
// Expected and MarginMicro describe the first failing position (all zero when
// the row passes); NearTies counts the tolerated near ties and
// NearTieMarginMicro is the largest margin among them.
type RowCheck struct {
	Outcome            string `json:"outcome"`
	Position           int    `json:"position"`
	Claimed            int    `json:"claimed_token"`
	Expected           int    `json:"expected_token"`
	MarginMicro        int64  `json:"margin_micro"`
	NearTies           int    `json:"near_ties"`
	NearTieMarginMicro int64  `json:"near_tie_margin_micro"`
}

// Check runs one prefill of the model over prompt and completion and checks
// every completion token against the seeded choice at its position: a token
// that differs is tolerated when its margin (MarginMicro) is at most
// s.EpsilonMicro and the row has used fewer than s.NearTieBudget near ties;
// otherwise the row fails there (CheckToken). The completion must hold 1 to
// s.MaxNewTokens tokens, an end-of-sequence token only as its last, and end
// with one unless it has exactly s.MaxNewTokens tokens (CheckTermination). The
// check stops at the first failing position. An error is a sequence the model
// cannot run (ErrSequence).
func (m *Model) Check(prompt, completion []int, in SeedInput, s Sampling) (RowCheck, error) {
	if err := m.checkSequence(prompt, len(completion)); err != nil {
		return RowCheck{}, err
	}
	V := m.Config.VocabSize
	for i, t := range completion {
		if t < 0 || t >= V {
			return RowCheck{}, fmt.Errorf("%w: completion token %d is %d, outside the vocabulary of %d", ErrSequence, i, t, V)
		}
	}
	var r RowCheck
	if len(completion) == 0 || len(completion) > s.MaxNewTokens {
		r.Outcome, r.Position = CheckTermination, min(len(completion), s.MaxNewTokens)
		return r, nil
	}
	st := m.NewState()
	var logits []float32
	for i, t := range prompt {
		logits = st.Step(t, i == len(prompt)-1)
	}
	g, scores := make([]float64, V), make([]float64, V)
	for p, claimed := range completion {
		Noise(PositionKey(in, p), g)
		Scores(logits, g, s.TemperatureMilli, scores)
		c := Choice(scores)
		if claimed != c {
			mg := MarginMicro(scores, c, claimed)
			if mg > s.EpsilonMicro || r.NearTies >= s.NearTieBudget {
				r.Outcome, r.Position, r.Claimed, r.Expected, r.MarginMicro = CheckToken, p, claimed, c, mg
				return r, nil
			}
			r.NearTies++
			r.NearTieMarginMicro = max(r.NearTieMarginMicro, mg)
		}
		last := p == len(completion)-1
		if m.Config.IsEOS(claimed) && !last {
			r.Outcome, r.Position, r.Claimed, r.Expected = CheckTermination, p, claimed, c
			return r, nil
		}
		if !last {
			logits = st.Step(claimed, true)
		}
	}
	if end := completion[len(completion)-1]; !m.Config.IsEOS(end) && len(completion) < s.MaxNewTokens {
		r.Outcome, r.Position = CheckTermination, len(completion)
		return r, nil
	}
	r.Outcome = CheckOK
	return r, nil
}

// ResponseText is the response a completion stands for, the text rewards are
// computed on: the bytes of its tokens (Tokenizer.Decode; an added token gives
// its content, an id the tokenizer does not know gives nothing) without a
// final end-of-sequence token, as Text makes them a string.
func (c *Checked) ResponseText(completion []int) string {
	if n := len(completion); n > 0 && c.Config.IsEOS(completion[n-1]) {
		completion = completion[:n-1]
	}
	known := make([]int, 0, len(completion))
	for _, id := range completion {
		if c.Tokenizer.Known(id) {
			known = append(known, id)
		}
	}
	b, _ := c.Tokenizer.Decode(known) // every id is known
	return Text(b)
}
