// Package detrand is a deterministic pseudo-random source for generated fixtures and
// any other choice that must be re-derivable from recorded inputs.
//
// The stream is SHA-256 in counter mode: block i is SHA-256(tag || 0x00 || seed ||
// uint64be(i)). It depends only on the tag and the seed, never on the Go version,
// the platform or map order, so a generator driven by it produces the same bytes
// everywhere. It is not for secrets.
package detrand

import (
	"crypto/sha256"
	"encoding/binary"
)

// Source yields a deterministic stream of bits. The zero value is not usable; call New.
type Source struct {
	prefix []byte
	ctr    uint64
	buf    [sha256.Size]byte
	off    int
}

// New returns a Source for the domain tag and seed. Different tags give unrelated
// streams for the same seed.
func New(tag string, seed []byte) *Source {
	p := make([]byte, 0, len(tag)+1+len(seed))
	p = append(p, tag...)
	p = append(p, 0)
	p = append(p, seed...)
	return &Source{prefix: p, off: sha256.Size}
}

// Uint64 returns the next 64 bits of the stream.
func (s *Source) Uint64() uint64 {
	if s.off+8 > sha256.Size {
		h := sha256.New()
		h.Write(s.prefix)
		var c [8]byte
		binary.BigEndian.PutUint64(c[:], s.ctr)
		h.Write(c[:])
		h.Sum(s.buf[:0])
		s.ctr++
		s.off = 0
	}
	v := binary.BigEndian.Uint64(s.buf[s.off:])
	s.off += 8
	return v
}

// Intn returns a uniform integer in [0, n) by rejection sampling. It panics if n <= 0.
func (s *Source) Intn(n int) int {
	if n <= 0 {
		panic("detrand: Intn with n <= 0")
	}
	max := ^uint64(0) - (^uint64(0) % uint64(n))
	for {
		v := s.Uint64()
		if v < max {
			return int(v % uint64(n))
		}
	}
}

// Range returns a uniform integer in [lo, hi]. It panics if hi < lo.
func (s *Source) Range(lo, hi int) int { return lo + s.Intn(hi-lo+1) }

// Pick returns a uniformly chosen element of xs. It panics if xs is empty.
func Pick[T any](s *Source, xs []T) T { return xs[s.Intn(len(xs))] }

// Shuffle permutes xs in place (Fisher-Yates).
func Shuffle[T any](s *Source, xs []T) {
	for i := len(xs) - 1; i > 0; i-- {
		j := s.Intn(i + 1)
		xs[i], xs[j] = xs[j], xs[i]
	}
}
