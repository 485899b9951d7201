package scoring

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"sort"
	"testing"
)

// sampleRowsBySort is the definition of SampleRows: every id ranked by
// SHA-256(seed || id), ties by id, the first n.
func sampleRowsBySort(seed [32]byte, ids []string, n int) []string {
	type ranked struct {
		key [32]byte
		id  string
	}
	rs := make([]ranked, len(ids))
	for i, id := range ids {
		rs[i] = ranked{sha256.Sum256(append(seed[:], id...)), id}
	}
	sort.Slice(rs, func(i, j int) bool {
		if c := bytes.Compare(rs[i].key[:], rs[j].key[:]); c != 0 {
			return c < 0
		}
		return rs[i].id < rs[j].id
	})
	out := []string{}
	for i := 0; i < n && i < len(rs); i++ {
		out = append(out, rs[i].id)
	}
	return out
}

// TestSampleRowsSelection: the partial selection gives exactly the sample the
// full sort defines, for every n, on both sides of the selection threshold.
func TestSampleRowsSelection(t *testing.T) {
	for _, total := range []int{1, 2, 3, 7, 40, 1000, -40} {
		// Negative: ids too long to share the seed's hash block (over 32
		// bytes), and of varying lengths.
		long := total < 0
		total = max(total, -total)
		ids := make([]string, total)
		for i := range ids {
			ids[i] = fmt.Sprintf("task-%05d", i)
			if long {
				ids[i] = fmt.Sprintf("%0*d", 20+i, i)
			}
		}
		for seedByte := range 3 {
			seed := sha256.Sum256([]byte{byte(seedByte)})
			for n := 0; n <= total+1; n += max(1, total/37) {
				got, want := SampleRows(seed, ids, n), sampleRowsBySort(seed, ids, n)
				if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
					t.Fatalf("total %d n %d seed %d: %v, want %v", total, n, seedByte, got, want)
				}
			}
		}
	}
}
