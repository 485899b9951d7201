package scoring

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// ErrRatioSyntax reports a string that is not a canonical rational number.
var ErrRatioSyntax = errors.New("not a canonical rational")

// ErrInvalidRules reports rules outside their documented domain. Errors returned
// by [Rules.Validate] and by the functions that take rules wrap it.
var ErrInvalidRules = errors.New("invalid rules")

// maxRatioLen bounds the length of a rational string accepted by [ParseRatio].
const maxRatioLen = 4096

// Ratio is an exact rational number. It is immutable: every method leaves its
// receiver unchanged and every constructor copies its input. The zero value is 0.
// Compare ratios with [Ratio.Cmp], never with ==.
//
// In JSON and text a Ratio is the canonical string of its value: "p" for an integer
// and "p/q" otherwise, with q > 1, gcd(p, q) = 1, no sign on 0, no leading zeros and
// no other characters ("7/20", "-3/4", "20", "0").
type Ratio struct{ r *big.Rat }

// NewRatio returns num/den reduced. It panics if den is 0, like [big.NewRat].
func NewRatio(num, den int64) Ratio { return Ratio{big.NewRat(num, den)} }

// RatioOf returns a Ratio holding a copy of x; nil is 0.
func RatioOf(x *big.Rat) Ratio {
	if x == nil {
		return Ratio{}
	}
	return Ratio{new(big.Rat).Set(x)}
}

// ratio wraps x without copying; x must not be modified afterwards.
func ratio(x *big.Rat) Ratio { return Ratio{x} }

// ParseRatio parses the canonical form described at [Ratio]. Any other spelling of
// a number ("0.35", "14/40", "+1", "1/1", "-0") is an error wrapping
// [ErrRatioSyntax], so String(ParseRatio(s)) == s for every accepted s.
func ParseRatio(s string) (Ratio, error) {
	if len(s) > maxRatioLen {
		return Ratio{}, fmt.Errorf("rational of %d bytes exceeds %d: %w", len(s), maxRatioLen, ErrRatioSyntax)
	}
	num, den, frac := strings.Cut(s, "/")
	neg := strings.HasPrefix(num, "-")
	digits := strings.TrimPrefix(num, "-")
	if !canonicalDigits(digits) {
		return Ratio{}, fmt.Errorf("rational %q: numerator is not a canonical integer: %w", s, ErrRatioSyntax)
	}
	if neg && digits == "0" {
		return Ratio{}, fmt.Errorf("rational %q: negative zero: %w", s, ErrRatioSyntax)
	}
	var p, q big.Int
	p.SetString(num, 10)
	if !frac {
		return Ratio{new(big.Rat).SetInt(&p)}, nil
	}
	if !canonicalDigits(den) {
		return Ratio{}, fmt.Errorf("rational %q: denominator is not a canonical integer: %w", s, ErrRatioSyntax)
	}
	q.SetString(den, 10)
	if q.Cmp(big.NewInt(1)) <= 0 {
		return Ratio{}, fmt.Errorf("rational %q: denominator must exceed 1: %w", s, ErrRatioSyntax)
	}
	if digits == "0" {
		return Ratio{}, fmt.Errorf("rational %q: zero is written \"0\": %w", s, ErrRatioSyntax)
	}
	var g, pa big.Int
	pa.Abs(&p)
	if g.GCD(nil, nil, &pa, &q).Cmp(big.NewInt(1)) != 0 {
		return Ratio{}, fmt.Errorf("rational %q: not in lowest terms: %w", s, ErrRatioSyntax)
	}
	return Ratio{new(big.Rat).SetFrac(&p, &q)}, nil
}

// canonicalDigits reports whether s is a non-empty run of ASCII digits without a
// leading zero (except "0" itself).
func canonicalDigits(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// MustParseRatio is [ParseRatio] for constants; it panics on a malformed string.
func MustParseRatio(s string) Ratio {
	x, err := ParseRatio(s)
	if err != nil {
		panic(err)
	}
	return x
}

// Rat returns the value as a new [big.Rat] the caller may modify.
func (x Ratio) Rat() *big.Rat {
	if x.r == nil {
		return new(big.Rat)
	}
	return new(big.Rat).Set(x.r)
}

// val returns the value for reading only.
func (x Ratio) val() *big.Rat {
	if x.r == nil {
		return new(big.Rat)
	}
	return x.r
}

// String returns the canonical form described at [Ratio].
func (x Ratio) String() string { return x.val().RatString() }

// Cmp compares x and y and returns -1, 0 or +1.
func (x Ratio) Cmp(y Ratio) int { return x.val().Cmp(y.val()) }

// Sign returns -1, 0 or +1 by the sign of x.
func (x Ratio) Sign() int { return x.val().Sign() }

// MarshalText implements [encoding.TextMarshaler] with the canonical form.
func (x Ratio) MarshalText() ([]byte, error) { return []byte(x.String()), nil }

// UnmarshalText implements [encoding.TextUnmarshaler]; it accepts only the
// canonical form.
func (x *Ratio) UnmarshalText(b []byte) error {
	v, err := ParseRatio(string(b))
	if err != nil {
		return err
	}
	*x = v
	return nil
}

// WinsorMode names how the extreme scores of a submission are clipped.
type WinsorMode string

const (
	// WinsorStakePercentile clips by stake mass: scores below the Lower quantile
	// and above the Upper quantile of the stake-weighted distribution are raised
	// or lowered to those quantiles.
	WinsorStakePercentile WinsorMode = "stake_percentile"
	// WinsorCount is the count rule of the public scenario competition: with four
	// or more votes the single lowest score is raised to the second lowest and
	// the single highest lowered to the second highest; with three or fewer
	// votes nothing is clipped.
	WinsorCount WinsorMode = "count"
)

// Winsorization configures the clipping of extreme scores before the
// stake-weighted mean.
type Winsorization struct {
	// Mode selects the clipping rule.
	Mode WinsorMode `json:"mode"`
	// Lower is the lower quantile as a fraction of stake mass (default 1/10);
	// used by WinsorStakePercentile. 0 <= Lower < Upper <= 1.
	Lower Ratio `json:"lower"`
	// Upper is the upper quantile as a fraction of stake mass (default 9/10);
	// used by WinsorStakePercentile.
	Upper Ratio `json:"upper"`
}

// SeatRules configures the margin a challenger needs to take the seat.
type SeatRules struct {
	// Margin is d, the relative margin while the incumbent's recorded score is at
	// most FullMarginUpTo of the maximum score (default 3/100). Margin >= 0.
	Margin Ratio `json:"margin"`
	// FullMarginUpTo is the fraction of the maximum score up to which the full
	// margin applies (default 7/10); above it the margin shrinks linearly to 0 at
	// the maximum score. 0 <= FullMarginUpTo <= 1.
	FullMarginUpTo Ratio `json:"full_margin_up_to"`
}

// WeightRule names how a round's consensus becomes its weight vector.
type WeightRule string

const (
	// WeightsProportional spreads the weight over every miner with a passed
	// entry, in proportion to its score.
	WeightsProportional WeightRule = "proportional"
	// WeightsSeat gives the whole weight to the seat holder after the round's
	// decision and burns it while the seat is vacant: the seat decides who is
	// paid.
	WeightsSeat WeightRule = "seat"
)

// WeightRules is the weight rule of each protocol's rounds.
type WeightRules struct {
	// Rollouts (default proportional), Scenarios (default seat) and Optimizer
	// (default proportional; optimizer emission follows the frontier instead).
	Rollouts  WeightRule `json:"rollouts"`
	Scenarios WeightRule `json:"scenarios"`
	Optimizer WeightRule `json:"optimizer"`
}

// For returns the rule of a protocol's rounds (proportional for an unknown one).
func (w WeightRules) For(protocol string) WeightRule {
	switch protocol {
	case "rollouts":
		return w.Rollouts
	case "scenarios":
		return w.Scenarios
	case "optimizer":
		return w.Optimizer
	}
	return WeightsProportional
}

func (w WeightRules) validate() error {
	for _, f := range []struct {
		name string
		r    WeightRule
	}{{"weights.rollouts", w.Rollouts}, {"weights.scenarios", w.Scenarios}, {"weights.optimizer", w.Optimizer}} {
		if f.r != WeightsProportional && f.r != WeightsSeat {
			return invalid(f.name, "unknown rule %q (want %q or %q)", f.r, WeightsProportional, WeightsSeat)
		}
	}
	return nil
}

// FrontierRules configures the optimizer frontier.
type FrontierRules struct {
	// FloorMicroNats is the least improvement of held-out loss that clears the
	// bar (default 1000, that is 0.001 nats). FloorMicroNats >= 1.
	FloorMicroNats int64 `json:"floor_micro_nats"`
}

// EmissionRules configures the emission split of the optimizer frontier.
type EmissionRules struct {
	// HalfLifeSec is the half-life of a frontier credit (default 1209600, 14
	// days). HalfLifeSec >= 1.
	HalfLifeSec int64 `json:"half_life_sec"`
	// ReferenceStartMicroNats is R(0), the full-pay reference at launch (default
	// 30000, 0.03 nats). It must be >= 1.
	ReferenceStartMicroNats int64 `json:"reference_start_micro_nats"`
	// ReferenceEndMicroNats is R after the ramp (default 100000, 0.10 nats). It
	// must be >= 1.
	ReferenceEndMicroNats int64 `json:"reference_end_micro_nats"`
	// RampSec is the length of the linear ramp of R (default 4838400, 56 days).
	// RampSec >= 0; 0 means R is ReferenceEndMicroNats from launch.
	RampSec int64 `json:"ramp_sec"`
	// BurnFloor is the fraction of emission burnt whatever the credits (default
	// 0). 0 <= BurnFloor <= 1.
	BurnFloor Ratio `json:"burn_floor"`
}

// Rules holds every parameter of consensus, seat, frontier and emission. All
// fields are integers or [Ratio] values, so a rules file encodes without floats.
//
// To read a rules file that may omit fields, decode it into the value returned by
// [DefaultRules]: omitted fields keep their defaults.
type Rules struct {
	// MaxScore is the highest score a verdict can carry (default 20: twenty
	// scenarios, each scoring tests passed / tests total). MaxScore > 0.
	MaxScore Ratio `json:"max_score"`
	// Quorum is the fraction of active stake that must report on a submission for
	// its consensus to be determined (default 2/5). 0 <= Quorum <= 1.
	Quorum Ratio `json:"quorum"`
	// Winsorization configures the clipping of extreme scores.
	Winsorization Winsorization `json:"winsorization"`
	// Seat configures the seat margin.
	Seat SeatRules `json:"seat"`
	// Frontier configures the optimizer frontier.
	Frontier FrontierRules `json:"frontier"`
	// Emission configures the emission split.
	Emission EmissionRules `json:"emission"`
	// Weights is each protocol's weight rule.
	Weights WeightRules `json:"weights"`
}

// Defaults of [Rules]; docs/CONSENSUS.md lists them with their meaning.
const (
	DefaultFloorMicroNats          = 1000
	DefaultHalfLifeSec             = 14 * 86400
	DefaultReferenceStartMicroNats = 30000
	DefaultReferenceEndMicroNats   = 100000
	DefaultRampSec                 = 56 * 86400
)

// DefaultRules returns the documented defaults.
func DefaultRules() Rules {
	return Rules{
		MaxScore: NewRatio(20, 1),
		Quorum:   NewRatio(2, 5),
		Winsorization: Winsorization{
			Mode:  WinsorStakePercentile,
			Lower: NewRatio(1, 10),
			Upper: NewRatio(9, 10),
		},
		Seat: SeatRules{
			Margin:         NewRatio(3, 100),
			FullMarginUpTo: NewRatio(7, 10),
		},
		Frontier: FrontierRules{FloorMicroNats: DefaultFloorMicroNats},
		Emission: EmissionRules{
			HalfLifeSec:             DefaultHalfLifeSec,
			ReferenceStartMicroNats: DefaultReferenceStartMicroNats,
			ReferenceEndMicroNats:   DefaultReferenceEndMicroNats,
			RampSec:                 DefaultRampSec,
			BurnFloor:               Ratio{},
		},
		Weights: WeightRules{Rollouts: WeightsProportional, Scenarios: WeightsSeat, Optimizer: WeightsProportional},
	}
}

// Validate reports every parameter outside its documented domain; each error
// names its field and wraps [ErrInvalidRules].
func (r Rules) Validate() error {
	return errors.Join(r.validateMaxScore(), r.validateAggregation(), r.Seat.validate(), r.Frontier.Validate(), r.Emission.Validate(), r.Weights.validate())
}

// ratOne is 1; never modified.
var ratOne = big.NewRat(1, 1)

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidRules, field, fmt.Sprintf(format, args...))
}

// inUnit reports whether 0 <= x <= 1.
func inUnit(x Ratio) bool { return x.Sign() >= 0 && x.val().Cmp(ratOne) <= 0 }

func (r Rules) validateMaxScore() error {
	if r.MaxScore.Sign() <= 0 {
		return invalid("max_score", "%s is not positive", r.MaxScore)
	}
	return nil
}

func (r Rules) validateAggregation() error {
	if !inUnit(r.Quorum) {
		return invalid("quorum", "%s is outside [0, 1]", r.Quorum)
	}
	return r.Winsorization.validate()
}

func (w Winsorization) validate() error {
	switch w.Mode {
	case WinsorStakePercentile, WinsorCount:
	default:
		return invalid("winsorization.mode", "unknown mode %q (want %q or %q)", w.Mode, WinsorStakePercentile, WinsorCount)
	}
	if !inUnit(w.Lower) || !inUnit(w.Upper) || w.Lower.Cmp(w.Upper) >= 0 {
		return invalid("winsorization", "need 0 <= lower < upper <= 1, have lower %s, upper %s", w.Lower, w.Upper)
	}
	return nil
}

func (s SeatRules) validate() error {
	if s.Margin.Sign() < 0 {
		return invalid("seat.margin", "%s is negative", s.Margin)
	}
	if !inUnit(s.FullMarginUpTo) {
		return invalid("seat.full_margin_up_to", "%s is outside [0, 1]", s.FullMarginUpTo)
	}
	return nil
}

// Validate reports a parameter outside its documented domain.
func (f FrontierRules) Validate() error {
	if f.FloorMicroNats < 1 {
		return invalid("frontier.floor_micro_nats", "%d is less than 1", f.FloorMicroNats)
	}
	return nil
}

// Validate reports a parameter outside its documented domain.
func (e EmissionRules) Validate() error {
	switch {
	case e.HalfLifeSec < 1:
		return invalid("emission.half_life_sec", "%d is less than 1", e.HalfLifeSec)
	case e.ReferenceStartMicroNats < 1:
		return invalid("emission.reference_start_micro_nats", "%d is less than 1", e.ReferenceStartMicroNats)
	case e.ReferenceEndMicroNats < 1:
		return invalid("emission.reference_end_micro_nats", "%d is less than 1", e.ReferenceEndMicroNats)
	case e.RampSec < 0:
		return invalid("emission.ramp_sec", "%d is negative", e.RampSec)
	case !inUnit(e.BurnFloor):
		return invalid("emission.burn_floor", "%s is outside [0, 1]", e.BurnFloor)
	}
	return nil
}
