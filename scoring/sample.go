package scoring

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// AuditSeedDomain is the domain tag of the audit seed.
const AuditSeedDomain = "feval/audit-seed/v1"

// AuditSeed derives the seed of an audit sample from a beacon that did not exist
// when the commitment was made:
//
//	SHA-256(domain || 0x00 || source || 0x00 || value || 0x00 || commitment || 0x00 || submission)
//
// Every input is recorded in the verdict, so anyone can re-derive the sample.
func AuditSeed(beaconSource, beaconValue, commitment, submission string) [32]byte {
	h := sha256.New()
	for i, part := range []string{AuditSeedDomain, beaconSource, beaconValue, commitment, submission} {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(part))
	}
	var s [32]byte
	h.Sum(s[:0])
	return s
}

// SampleRows returns the n row ids with the smallest SHA-256(seed || id), in that
// rank order (ties, which need a hash collision, by id). It depends on the set of
// ids only, never on their order. n larger than len(ids) selects all.
func SampleRows(seed [32]byte, ids []string, n int) []string {
	// Ranks compare by the first 8 bytes of the hash as an integer first (the
	// same order as bytes.Compare, much cheaper); only when those are equal
	// are the whole hashes computed again and compared, then the ids. Only
	// the n smallest are kept in order: partial selection, then a sort of
	// those alone. Each rank is 16 bytes, so 10,000 ids rank in 160 KB.
	type ranked struct {
		hi uint64
		i  int
	}
	rs := make([]ranked, len(ids))
	var buf [64]byte
	copy(buf[:], seed[:])
	key := func(id string) [32]byte {
		if len(id) <= len(buf)-len(seed) {
			return sha256.Sum256(append(buf[:len(seed)], id...))
		}
		return sha256.Sum256(append(append(make([]byte, 0, len(seed)+len(id)), seed[:]...), id...))
	}
	for i, id := range ids {
		k := key(id)
		rs[i] = ranked{binary.BigEndian.Uint64(k[:8]), i}
	}
	compare := func(a, b *ranked) int {
		if a.hi != b.hi {
			return cmp.Compare(a.hi, b.hi)
		}
		ka, kb := key(ids[a.i]), key(ids[b.i])
		if c := bytes.Compare(ka[:], kb[:]); c != 0 {
			return c
		}
		return strings.Compare(ids[a.i], ids[b.i])
	}
	if n > len(rs) {
		n = len(rs)
	}
	if n < len(rs)/4 {
		selectSmallest(rs, n, func(i, j int) int { return compare(&rs[i], &rs[j]) })
		rs = rs[:n]
	}
	slices.SortFunc(rs, func(a, b ranked) int { return compare(&a, &b) })
	out := make([]string, n)
	for i := range out {
		out[i] = ids[rs[i].i]
	}
	return out
}

// selectSmallest reorders xs so that its n smallest elements under compare
// (a total order on indices) come first, in any order (Hoare's quickselect,
// pivot the median of three).
func selectSmallest[T any](xs []T, n int, compare func(i, j int) int) {
	lo, hi := 0, len(xs)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		// Median of three into xs[hi] as the pivot.
		if compare(mid, lo) < 0 {
			xs[mid], xs[lo] = xs[lo], xs[mid]
		}
		if compare(hi, lo) < 0 {
			xs[hi], xs[lo] = xs[lo], xs[hi]
		}
		if compare(mid, hi) < 0 {
			xs[mid], xs[hi] = xs[hi], xs[mid]
		}
		p := lo
		for i := lo; i < hi; i++ {
			if compare(i, hi) < 0 {
				xs[i], xs[p] = xs[p], xs[i]
				p++
			}
		}
		xs[p], xs[hi] = xs[hi], xs[p]
		switch {
		case p == n || p == n-1:
			return
		case p < n:
			lo = p + 1
		default:
			hi = p - 1
		}
	}
}

// SeedHex is the seed as lower-case hex, as verdicts record it.
func SeedHex(seed [32]byte) string { return hex.EncodeToString(seed[:]) }

// DetectionProbability is the exact probability that a sample of n rows drawn
// without replacement from total rows contains at least one of the cheat rows:
// 1 - C(total-cheat, n) / C(total, n).
func DetectionProbability(total, cheat, n int) (*big.Rat, error) {
	if total <= 0 || cheat < 0 || cheat > total || n < 0 || n > total {
		return nil, fmt.Errorf("detection probability: need 0 <= cheat <= total, 0 <= n <= total (total %d, cheat %d, n %d)", total, cheat, n)
	}
	miss := big.NewRat(1, 1)
	for i := 0; i < n; i++ {
		if total-cheat-i <= 0 {
			miss.SetInt64(0)
			break
		}
		miss.Mul(miss, big.NewRat(int64(total-cheat-i), int64(total-i)))
	}
	return new(big.Rat).Sub(big.NewRat(1, 1), miss), nil
}
