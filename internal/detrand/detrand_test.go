package detrand

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
)

func TestStreamDependsOnTagAndSeedOnly(t *testing.T) {
	a, b := New("t", []byte("s")), New("t", []byte("s"))
	for i := 0; i < 100; i++ {
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("draw %d: %x != %x", i, x, y)
		}
	}
	if New("t", []byte("s")).Uint64() == New("u", []byte("s")).Uint64() {
		t.Fatal("different tags gave the same first draw")
	}
}

// TestGolden pins the stream so that generated fixtures cannot drift silently.
func TestGolden(t *testing.T) {
	s := New("feval/detrand/test", []byte{1, 2, 3})
	got := []uint64{s.Uint64(), s.Uint64(), s.Uint64(), s.Uint64(), s.Uint64()}
	want := []uint64{0x9350e3b3df4eeed2, 0x3228bc07f164c238, 0xeb3d1bb1d29ef600, 0xb4b477f4197d7c27, 0xbac090c6e288dfd9}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("draw %d = %x, want %x", i, got[i], want[i])
		}
	}
	// The spec: block 0 is SHA-256(tag || 0 || seed || uint64be(0)).
	sum := sha256.Sum256([]byte("feval/detrand/test\x00\x01\x02\x03\x00\x00\x00\x00\x00\x00\x00\x00"))
	if binary.BigEndian.Uint64(sum[:8]) != got[0] {
		t.Fatal("first draw does not follow the documented construction")
	}
}

func TestIntnRangeAndCoverage(t *testing.T) {
	s := New("t", nil)
	seen := make([]int, 7)
	for i := 0; i < 7000; i++ {
		v := s.Intn(7)
		if v < 0 || v >= 7 {
			t.Fatalf("Intn(7) = %d", v)
		}
		seen[v]++
	}
	for v, n := range seen {
		if n < 800 || n > 1200 {
			t.Errorf("value %d drawn %d times of 7000", v, n)
		}
	}
}
