package model

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
)

// SampleTag is the domain tag of the per-position sampling seed.
const SampleTag = "feval/rollouts/sample/v1"

// Sampling are the sampling parameters of a rollouts task. All are integers
// so that they can sit in signed records.
type Sampling struct {
	// TemperatureMilli is the temperature in thousandths (1000 = 1.0), > 0.
	TemperatureMilli int `json:"temperature_milli"`
	// MaxNewTokens is the length limit of a completion.
	MaxNewTokens int `json:"max_new_tokens"`
	// EpsilonMicro is the near-tie margin ε in millionths of a score unit: a
	// claimed token whose score is within ε of the seeded choice's is a near
	// tie, tolerated up to NearTieBudget times per row.
	EpsilonMicro int64 `json:"epsilon_micro"`
	// NearTieBudget is how many near ties one row may use.
	NearTieBudget int `json:"near_tie_budget"`
}

// Limits of Sampling.
const (
	MaxTemperatureMilli = 100000
	MaxNewTokens        = 1 << 14
	MaxEpsilonMicro     = 1 << 40
)

// Validate reports a sampling parameter out of range: temperature in 1 to
// MaxTemperatureMilli thousandths, 1 to MaxNewTokens new tokens, ε in 0 to
// MaxEpsilonMicro millionths, and a near-tie budget of 0 to MaxNewTokens.
func (s Sampling) Validate() error {
	switch {
	case s.TemperatureMilli <= 0 || s.TemperatureMilli > MaxTemperatureMilli:
		return fmt.Errorf("temperature_milli %d is outside 1 to %d", s.TemperatureMilli, MaxTemperatureMilli)
	case s.MaxNewTokens <= 0 || s.MaxNewTokens > MaxNewTokens:
		return fmt.Errorf("max_new_tokens %d is outside 1 to %d", s.MaxNewTokens, MaxNewTokens)
	case s.EpsilonMicro < 0 || s.EpsilonMicro > MaxEpsilonMicro:
		return fmt.Errorf("epsilon_micro %d is outside 0 to %d", s.EpsilonMicro, int64(MaxEpsilonMicro))
	case s.NearTieBudget < 0 || s.NearTieBudget > s.MaxNewTokens:
		return fmt.Errorf("near_tie_budget %d is outside 0 to max_new_tokens", s.NearTieBudget)
	}
	return nil
}

// SeedInput is what the sampling seed of one row derives from.
type SeedInput struct {
	Round  string // the round's digest, "sha256:…"
	TaskID string
	Miner  string // the miner's key fingerprint
}

// PositionKey is the 32-byte key of completion position pos (0-based):
// SHA-256(SampleTag ‖ 0x00 ‖ round ‖ 0x00 ‖ task id ‖ 0x00 ‖ miner ‖ 0x00 ‖
// uint32 big-endian pos).
func PositionKey(in SeedInput, pos int) [32]byte {
	h := sha256.New()
	for _, s := range []string{SampleTag, in.Round, in.TaskID, in.Miner} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(pos))
	h.Write(p[:])
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Noise fills g with the Gumbel noise of one position: for token i, with
// block j = i div 4, the 8 bytes at offset 8·(i mod 4) of
// SHA-256(key ‖ uint32 big-endian j) read big-endian as x, u = (⌊x / 2^11⌋ +
// ½)·2^-53 (in (0, 1)), g_i = −log(−log u) with the package's log.
func Noise(key [32]byte, g []float64) {
	var buf [36]byte
	copy(buf[:], key[:])
	var blk [32]byte
	for i := range g {
		if i%4 == 0 {
			binary.BigEndian.PutUint32(buf[32:], uint32(i/4))
			blk = sha256.Sum256(buf[:])
		}
		x := binary.BigEndian.Uint64(blk[8*(i%4):])
		u := (float64(x>>11) + 0.5) * (1.0 / (1 << 53))
		g[i] = -log(-log(u))
	}
}

// Scores writes the perturbed scores of one position into out: logit_i·1000 /
// temperature_milli + g_i, in float64 (the product and the quotient each
// rounded).
func Scores(logits []float32, g []float64, temperatureMilli int, out []float64) {
	t := float64(temperatureMilli)
	for i, l := range logits {
		out[i] = float64(float64(l)*1000)/t + g[i]
	}
}

// Choice is the seeded choice of a position: the token of the highest score
// (the lowest id among equal scores).
func Choice(scores []float64) int {
	best := 0
	for i, s := range scores {
		if s > scores[best] {
			best = i
		}
	}
	return best
}

// MarginMicro is the score gap between the seeded choice and a claimed token
// in millionths, rounded down and capped at 10^15 (an id outside the scores
// gets the cap).
func MarginMicro(scores []float64, choice, claimed int) int64 {
	const capMicro = int64(1e15)
	if claimed < 0 || claimed >= len(scores) {
		return capMicro
	}
	d := float64(scores[choice]-scores[claimed]) * 1e6
	if !(d < float64(capMicro)) {
		return capMicro
	}
	return int64(math.Floor(d))
}
