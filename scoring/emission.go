package scoring

import (
	"cmp"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/opencontainers/go-digest"
)

// UnitsTotal is the sum of every u16 weight vector [SplitEmission] returns: the
// whole emission, as chain weight-setting expresses it.
const UnitsTotal = 65535

// picoPerMicro converts micro-nats to pico-nats, the unit of credits.
const picoPerMicro = 1_000_000

// Credit is the decayed credit of one frontier event at the emission time.
type Credit struct {
	// Height, Submission, Author and ImprovementMicroNats are copied from the
	// frontier event.
	Height               uint64        `json:"height"`
	Submission           digest.Digest `json:"submission"`
	Author               string        `json:"author"`
	ImprovementMicroNats int64         `json:"improvement_micro_nats"`
	// AgeSec is the time since the event: a = t - event time.
	AgeSec int64 `json:"age_sec"`
	// Halvings is q = floor(a / half-life).
	Halvings int64 `json:"halvings"`
	// DecayFraction is D / 2^64, where D is the integer nearest to
	// 2^(64 - r/half-life) and r = a - q x half-life; the decay factor is
	// DecayFraction / 2^q.
	DecayFraction Ratio `json:"decay_fraction"`
	// CreditPicoNats = floor(ImprovementMicroNats x 10^6 x D / 2^(64+q)).
	CreditPicoNats int64 `json:"credit_pico_nats"`
}

// Share is one contributor's part of the emission.
type Share struct {
	// Contributor is the author's key fingerprint.
	Contributor string `json:"contributor"`
	// CreditPicoNats is the sum of the contributor's credits.
	CreditPicoNats int64 `json:"credit_pico_nats"`
	// Weight = payable x CreditPicoNats / total credit, exact (0 when the total
	// credit is 0).
	Weight Ratio `json:"weight"`
	// Units = floor(Weight x 65535), the contributor's entry in the u16 vector.
	Units uint16 `json:"units"`
}

// Emission is the split of emission among frontier contributors at one time. The
// Weight of all shares plus Burn is exactly 1, and the Units of all shares plus
// BurnUnits is exactly [UnitsTotal].
type Emission struct {
	// AtSec is the time of the split in seconds since launch.
	AtSec int64 `json:"at_sec"`
	// ReferenceMicroNats is R(t), the full-pay reference.
	ReferenceMicroNats Ratio `json:"reference_micro_nats"`
	// CreditPicoNats is the total credit of all events.
	CreditPicoNats int64 `json:"credit_pico_nats"`
	// Payable = min(1, total credit / R(t)) x (1 - burn floor).
	Payable Ratio `json:"payable"`
	// Burn = 1 - Payable.
	Burn Ratio `json:"burn"`
	// BurnUnits = 65535 minus the Units of all shares: the burn entry of the
	// u16 vector, which receives every rounding remainder.
	BurnUnits uint16 `json:"burn_units"`
	// Credits holds one credit per event up to AtSec, sorted by event time,
	// height, submission, author and improvement.
	Credits []Credit `json:"credits"`
	// Shares holds one share per contributor, sorted by contributor.
	Shares []Share `json:"shares"`
}

// SplitEmission splits the emission at atSec (seconds since launch) among the
// authors of frontier events; events after atSec are not yet counted. With
// half-life H, an event of improvement I micro-nats at age a = atSec - event time
// has the credit floor(I x 10^6 x 2^(-a/H)) pico-nats, where 2^(-a/H) is computed
// as described at [Credit] so that every implementation gets the same integer.
//
// R(t) = ReferenceStart + (ReferenceEnd - ReferenceStart) x t / RampSec for
// t < RampSec and ReferenceEnd after (exact rational, micro-nats). payable =
// min(1, sum of credits / R(t)) x (1 - BurnFloor); each contributor's weight is
// payable x its credit / total credit; burn = 1 - payable.
//
// Credits are floored, so splitting an improvement into pieces at the same time,
// or across identities, never earns more than the whole, in exact weights and in
// u16 units alike. The result does not depend on the order of events.
//
// SplitEmission fails on invalid rules, a negative atSec or event time, an empty
// author, an improvement below 1, or credits whose total exceeds an int64.
func SplitEmission(events []FrontierEvent, atSec int64, rules EmissionRules) (Emission, error) {
	if err := rules.Validate(); err != nil {
		return Emission{}, fmt.Errorf("emission: %w", err)
	}
	if atSec < 0 {
		return Emission{}, fmt.Errorf("emission: negative time %d", atSec)
	}
	out := Emission{AtSec: atSec, Credits: []Credit{}, Shares: []Share{}}
	out.ReferenceMicroNats = reference(atSec, rules)

	mantissas := make(map[int64]*big.Int) // D by r, a cache only
	perAuthor := make(map[string]*big.Int)
	total := new(big.Int)
	for i, e := range events {
		switch {
		case e.AtSec < 0:
			return Emission{}, fmt.Errorf("emission: event %d: negative time %d", i, e.AtSec)
		case e.Author == "":
			return Emission{}, fmt.Errorf("emission: event %d: empty author", i)
		case e.ImprovementMicroNats < 1:
			return Emission{}, fmt.Errorf("emission: event %d: improvement %d is less than 1", i, e.ImprovementMicroNats)
		}
		if e.AtSec > atSec {
			continue
		}
		age := atSec - e.AtSec
		q, r := age/rules.HalfLifeSec, age%rules.HalfLifeSec
		d, ok := mantissas[r]
		if !ok {
			var err error
			if d, err = decayMantissa(r, rules.HalfLifeSec); err != nil {
				return Emission{}, fmt.Errorf("emission: event %d: %w", i, err)
			}
			mantissas[r] = d
		}
		c := new(big.Int).Mul(big.NewInt(e.ImprovementMicroNats), big.NewInt(picoPerMicro))
		c.Mul(c, d)
		if q >= int64(c.BitLen()) {
			c.SetInt64(0)
		} else {
			c.Rsh(c, uint(64+q))
		}
		if !c.IsInt64() {
			return Emission{}, fmt.Errorf("emission: event %d: credit exceeds int64", i)
		}
		out.Credits = append(out.Credits, Credit{
			Height:               e.Height,
			Submission:           e.Submission,
			Author:               e.Author,
			ImprovementMicroNats: e.ImprovementMicroNats,
			AgeSec:               age,
			Halvings:             q,
			DecayFraction:        ratio(new(big.Rat).SetFrac(d, two64())),
			CreditPicoNats:       c.Int64(),
		})
		if perAuthor[e.Author] == nil {
			perAuthor[e.Author] = new(big.Int)
		}
		perAuthor[e.Author].Add(perAuthor[e.Author], c)
		total.Add(total, c)
	}
	if !total.IsInt64() {
		return Emission{}, errors.New("emission: total credit exceeds int64")
	}
	out.CreditPicoNats = total.Int64()

	// payable = min(1, total / (R x 10^6)) x (1 - burn floor)
	payable := new(big.Rat)
	if total.Sign() > 0 {
		ref := new(big.Rat).Mul(out.ReferenceMicroNats.val(), new(big.Rat).SetInt64(picoPerMicro))
		payable.Quo(new(big.Rat).SetInt(total), ref)
		if payable.Cmp(ratOne) > 0 {
			payable.SetInt64(1)
		}
		payable.Mul(payable, new(big.Rat).Sub(ratOne, rules.BurnFloor.val()))
	}
	out.Payable = ratio(payable)
	out.Burn = ratio(new(big.Rat).Sub(ratOne, payable))

	units := UnitsTotal
	for a, c := range perAuthor {
		w := new(big.Rat)
		if total.Sign() > 0 {
			w.Mul(payable, new(big.Rat).SetFrac(c, total))
		}
		u := new(big.Int).Mul(w.Num(), big.NewInt(UnitsTotal))
		u.Quo(u, w.Denom()) // floor: w >= 0
		units -= int(u.Int64())
		out.Shares = append(out.Shares, Share{Contributor: a, CreditPicoNats: c.Int64(), Weight: ratio(w), Units: uint16(u.Int64())})
	}
	// The shares' weights sum to payable <= 1, so their floors sum to at most
	// UnitsTotal and units >= 0.
	out.BurnUnits = uint16(units)
	slices.SortFunc(out.Shares, func(a, b Share) int { return cmp.Compare(a.Contributor, b.Contributor) })
	slices.SortFunc(out.Credits, func(a, b Credit) int {
		return cmp.Or(cmp.Compare(b.AgeSec, a.AgeSec), cmp.Compare(a.Height, b.Height),
			cmp.Compare(a.Submission, b.Submission), cmp.Compare(a.Author, b.Author),
			cmp.Compare(a.ImprovementMicroNats, b.ImprovementMicroNats))
	})
	return out, nil
}

// reference returns R(t) in micro-nats.
func reference(t int64, rules EmissionRules) Ratio {
	if t >= rules.RampSec {
		return NewRatio(rules.ReferenceEndMicroNats, 1)
	}
	r := big.NewRat(rules.ReferenceEndMicroNats-rules.ReferenceStartMicroNats, 1)
	r.Mul(r, big.NewRat(t, rules.RampSec))
	return ratio(r.Add(r, big.NewRat(rules.ReferenceStartMicroNats, 1)))
}

// ReferenceAt returns R(t), the full-pay reference in micro-nats at t seconds
// since launch (t < 0 is treated as 0).
func ReferenceAt(t int64, rules EmissionRules) (Ratio, error) {
	if err := rules.Validate(); err != nil {
		return Ratio{}, fmt.Errorf("reference: %w", err)
	}
	return reference(max(t, 0), rules), nil
}

func two64() *big.Int { return new(big.Int).Lsh(big.NewInt(1), 64) }

// DecayFraction returns D / 2^64, where D is the integer nearest to
// 2^(64 - r/halfLife), for 0 <= r < halfLife. It is the fractional-halving part of
// the decay factor of a credit; see [Credit].
func DecayFraction(r, halfLife int64) (Ratio, error) {
	if halfLife < 1 || r < 0 || r >= halfLife {
		return Ratio{}, fmt.Errorf("decay fraction: need 0 <= r < half-life, have r %d, half-life %d", r, halfLife)
	}
	d, err := decayMantissa(r, halfLife)
	if err != nil {
		return Ratio{}, err
	}
	return ratio(new(big.Rat).SetFrac(d, two64())), nil
}

// maxDecayPrecision bounds the working precision of decayMantissa, in bits.
const maxDecayPrecision = 1 << 14

// decayMantissa returns the integer nearest to 2^(64 - r/h), 0 <= r < h.
//
// It encloses 2^(-r/h) = exp(-(r/h) ln 2) in an interval of fixed-point numbers
// with p fraction bits, using directed rounding at every step, and returns once
// both ends of the interval round to the same integer at 64 fraction bits. For
// 0 < r < h the value is irrational, so it is never a rounding tie and a
// precision that decides it exists; the loop raises p until it does.
func decayMantissa(r, h int64) (*big.Int, error) {
	if r == 0 {
		return two64(), nil
	}
	for p := uint(128); p <= maxDecayPrecision; p += 64 {
		lo, hi := pow2NegBounds(r, h, p)
		a, b := roundShift(lo, p-64), roundShift(hi, p-64)
		if a.Cmp(b) == 0 {
			return a, nil
		}
	}
	return nil, fmt.Errorf("decay factor 2^(-%d/%d) undecided at %d bits", r, h, maxDecayPrecision)
}

// roundShift returns floor(x / 2^s + 1/2), s >= 1.
func roundShift(x *big.Int, s uint) *big.Int {
	half := new(big.Int).Lsh(big.NewInt(1), s-1)
	y := new(big.Int).Add(x, half)
	return y.Rsh(y, s)
}

// pow2NegBounds returns lo <= 2^(-r/h) x 2^p <= hi, for 0 <= r < h.
func pow2NegBounds(r, h int64, p uint) (lo, hi *big.Int) {
	one := new(big.Int).Lsh(big.NewInt(1), p)
	// ln 2 = sum over k >= 1 of 1/(k 2^k); the tail after n terms is at most
	// 1/((n+1) 2^n).
	n := int64(p)
	lnLo, lnHi := new(big.Int), new(big.Int)
	for k := int64(1); k <= n; k++ {
		den := new(big.Int).Lsh(big.NewInt(k), uint(k))
		lnLo.Add(lnLo, floorDiv(one, den))
		lnHi.Add(lnHi, ceilDiv(one, den))
	}
	lnHi.Add(lnHi, ceilDiv(one, new(big.Int).Lsh(big.NewInt(n+1), uint(n))))
	// y = (r/h) ln 2, scaled by 2^p.
	rb, hb := big.NewInt(r), big.NewInt(h)
	yLo := floorDiv(new(big.Int).Mul(lnLo, rb), hb)
	yHi := ceilDiv(new(big.Int).Mul(lnHi, rb), hb)
	// exp(-y) decreases in y.
	lo, _ = expNegBounds(yHi, one)
	_, hi = expNegBounds(yLo, one)
	return lo, hi
}

// expNegBounds returns lo <= exp(-z/one) x one <= hi for 0 <= z < one, by the
// alternating Taylor series with every term enclosed from below and above.
func expNegBounds(z, one *big.Int) (lo, hi *big.Int) {
	lo, hi = new(big.Int).Set(one), new(big.Int).Set(one)
	tLo, tHi := new(big.Int).Set(one), new(big.Int).Set(one)
	for k := int64(1); ; k++ {
		den := new(big.Int).Mul(big.NewInt(k), one)
		tLo = floorDiv(tLo.Mul(tLo, z), den)
		tHi = ceilDiv(tHi.Mul(tHi, z), den)
		if k%2 == 1 {
			lo.Sub(lo, tHi)
			hi.Sub(hi, tLo)
		} else {
			lo.Add(lo, tLo)
			hi.Add(hi, tHi)
		}
		if tHi.Cmp(big.NewInt(1)) <= 0 {
			// The terms decrease, so the rest of the series is at most the
			// last term, itself at most 1, in absolute value.
			lo.Sub(lo, big.NewInt(1))
			hi.Add(hi, big.NewInt(1))
			return lo, hi
		}
	}
}

// floorDiv returns floor(a/b) for a >= 0, b > 0.
func floorDiv(a, b *big.Int) *big.Int { return new(big.Int).Quo(a, b) }

// ceilDiv returns ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b *big.Int) *big.Int {
	q, m := new(big.Int).QuoRem(a, b, new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}
