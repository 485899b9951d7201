package scoring

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"sort"
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
	type ranked struct {
		key [32]byte
		id  string
	}
	rs := make([]ranked, len(ids))
	buf := make([]byte, 0, 64)
	for i, id := range ids {
		buf = append(append(buf[:0], seed[:]...), id...)
		rs[i] = ranked{sha256.Sum256(buf), id}
	}
	sort.Slice(rs, func(i, j int) bool {
		if c := bytes.Compare(rs[i].key[:], rs[j].key[:]); c != 0 {
			return c < 0
		}
		return rs[i].id < rs[j].id
	})
	if n > len(rs) {
		n = len(rs)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = rs[i].id
	}
	return out
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
