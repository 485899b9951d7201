package scoring

import (
	"fmt"
	"math/big"
	"testing"

	"github.com/feval/feval/internal/detrand"
)

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("row-%05d", i)
	}
	return out
}

func TestSampleRowsIsReproducibleAndOrderFree(t *testing.T) {
	seed := AuditSeed("drand", "round 1234: abcd", "sha256:c0ffee", "sha256:5ub")
	all := ids(10000)
	a := SampleRows(seed, all, 320)
	shuffled := append([]string(nil), all...)
	detrand.Shuffle(detrand.New("t", nil), shuffled)
	b := SampleRows(seed, shuffled, 320)
	if len(a) != 320 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("the sample depends on input order")
	}
	seen := map[string]bool{}
	for _, id := range a {
		if seen[id] {
			t.Fatalf("%s sampled twice", id)
		}
		seen[id] = true
	}
}

// TestEveryBeaconBitMatters flips each bit of the beacon value in turn: every
// flip must change the sample.
func TestEveryBeaconBitMatters(t *testing.T) {
	all := ids(10000)
	value := []byte("0123456789abcdef")
	base := fmt.Sprint(SampleRows(AuditSeed("drand", string(value), "c", "s"), all, 320))
	for i := 0; i < len(value)*8; i++ {
		v := append([]byte(nil), value...)
		v[i/8] ^= 1 << (i % 8)
		if fmt.Sprint(SampleRows(AuditSeed("drand", string(v), "c", "s"), all, 320)) == base {
			t.Fatalf("flipping beacon bit %d left the sample unchanged", i)
		}
	}
	for _, other := range [][4]string{{"other", string(value), "c", "s"}, {"drand", string(value), "c2", "s"}, {"drand", string(value), "c", "s2"}} {
		if fmt.Sprint(SampleRows(AuditSeed(other[0], other[1], other[2], other[3]), all, 320)) == base {
			t.Fatalf("changing an input %v left the sample unchanged", other)
		}
	}
}

// TestAuditSeedVector pins the construction.
func TestAuditSeedVector(t *testing.T) {
	got := SeedHex(AuditSeed("drand", "42", "sha256:aa", "sha256:bb"))
	// python3 -c "import hashlib; print(hashlib.sha256(b'feval/audit-seed/v1\x00drand\x0042\x00sha256:aa\x00sha256:bb').hexdigest())"
	const want = "90540050e3fc3541a4b6fd15401c0d0fead2841954cf3ccb0e952b0f969379dd"
	if got != want {
		t.Fatalf("seed = %s, want %s", got, want)
	}
}

func TestDetectionProbability(t *testing.T) {
	// One cheat row in ten, sample one: 1/10.
	p, err := DetectionProbability(10, 1, 1)
	if err != nil || p.Cmp(big.NewRat(1, 10)) != 0 {
		t.Fatalf("got %v, %v", p, err)
	}
	// Sampling everything always catches.
	if p, _ := DetectionProbability(50, 1, 50); p.Cmp(big.NewRat(1, 1)) != 0 {
		t.Fatalf("full sample: %v", p)
	}
	// 1 % of 10,000 rows, 320 sampled: at least the with-replacement bound 1-0.99^320 (~0.9599).
	p, _ = DetectionProbability(10000, 100, 320)
	f, _ := p.Float64()
	if f < 0.9599 || f > 0.97 {
		t.Fatalf("1%% cheat, 320 of 10,000: %v", f)
	}
	if _, err := DetectionProbability(10, 11, 1); err == nil {
		t.Fatal("impossible arguments accepted")
	}
}
