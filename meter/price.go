package meter

import (
	"errors"
	"math/bits"
	"sync"
)

// Cost is the price in micro-USD of inTokens input and outTokens output tokens
// at the given prices (micro-USD per million tokens), rounded up:
//
//	ceil((inTokens*inPrice + outTokens*outPrice) / 1_000_000)
//
// computed in 128-bit integer arithmetic; a result past MaxInt64 saturates (no
// budget can hold it). Negative inputs count as zero.
func Cost(inTokens, outTokens, inPrice, outPrice int64) int64 {
	hi1, lo1 := bits.Mul64(nonNeg(inTokens), nonNeg(inPrice))
	hi2, lo2 := bits.Mul64(nonNeg(outTokens), nonNeg(outPrice))
	lo, carry := bits.Add64(lo1, lo2, 0)
	hi, _ := bits.Add64(hi1, hi2, carry)
	// ceil(x / 1e6) = floor((x + 999999) / 1e6)
	lo, carry = bits.Add64(lo, 999_999, 0)
	hi += carry
	if hi >= 1_000_000 { // quotient would not fit in 64 bits
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, 1_000_000)
	if q > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(q)
}

func nonNeg(n int64) uint64 {
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// ReserveInputTokens is the meter's own input-token count of a request: the
// number of bytes of its canonical form. Every byte-level BPE token covers at
// least one byte of text, and a chat template's framing is shorter than the JSON
// syntax around each message, so this bounds what an upstream reports (docs/METER.md,
// "Token count").
func ReserveInputTokens(canonical []byte) int64 { return int64(len(canonical)) }

// errCapExceeded reports a reservation that does not fit in what remains.
var errCapExceeded = errors.New("reservation exceeds the remaining budget")

// budget is one scenario's spending ledger. Invariant: spent + reserved <= cap
// at every instant, so the sum of settled costs never passes the cap, whatever
// the interleaving of calls.
type budget struct {
	mu       sync.Mutex
	cap      int64
	spent    int64 // settled costs
	reserved int64 // reservations of calls in flight
}

// reserve takes n micro-USD out of what remains, or fails with errCapExceeded
// leaving the ledger unchanged.
func (b *budget) reserve(n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n < 0 || n > b.cap-b.spent-b.reserved {
		return errCapExceeded
	}
	b.reserved += n
	return nil
}

// settle ends a reservation of r, charging min(cost, r); it returns the charge.
func (b *budget) settle(r, cost int64) int64 {
	if cost > r {
		cost = r
	}
	if cost < 0 {
		cost = 0
	}
	b.mu.Lock()
	b.reserved -= r
	b.spent += cost
	b.mu.Unlock()
	return cost
}

// state returns spent and reserved amounts.
func (b *budget) state() (spent, reserved int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent, b.reserved
}
