package optimizer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/feval/feval/protocol/rollouts"
)

// DerivationV1 names the derivation of a round's run seeds and held-out
// windows from its beacon; task.json pins it in "derivation".
const DerivationV1 = "feval/optimizer/derive/v1"

// ErrNoBeacon reports an evaluation of an accepted reveal without the round's
// beacon: its seeds and held-out windows do not exist without it.
var ErrNoBeacon = errors.New("an optimizer evaluation needs the round's beacon: give --drand-round and --drand-signature (verifiable), or --beacon and --beacon-source (unverified, for tests)")

// Derived is what a round's beacon fixes for every submission of the round:
// the root, the two run seeds and the held-out window starts.
type Derived struct {
	Root    [32]byte
	Seeds   [2]int64
	Windows []uint32
}

// Derive computes the derivation of docs/OPTIMIZER.md §1a from the round's
// beacon, which exists only after the round's commits closed:
//
//	root     = SHA-256(DerivationV1 || 0x00 || source || 0x00 || value)
//	seed i   = (first 8 bytes of SHA-256(root || "seed" || byte(i)), big-endian) >> 11
//	window j = (first 8 bytes of SHA-256(root || "window" || uint64be(j)), big-endian)
//	           mod (pool bytes - context)
//
// The seeds are below 2^53. A window start is the offset in the held-out pool
// of context input bytes followed by the target byte.
func Derive(b rollouts.Beacon, spec Spec) (Derived, error) {
	var d Derived
	if b.Source == "" || b.Value == "" {
		return d, ErrNoBeacon
	}
	span := spec.Data.HeldOutPoolBytes - int64(spec.Model.Context)
	if span <= 0 || span > 1<<32 {
		return d, fmt.Errorf("%w: the held-out pool must hold more than one window and fewer than 2^32 bytes", ErrTask)
	}
	h := sha256.New()
	h.Write([]byte(DerivationV1))
	h.Write([]byte{0})
	h.Write([]byte(b.Source))
	h.Write([]byte{0})
	h.Write([]byte(b.Value))
	h.Sum(d.Root[:0])
	for i := range d.Seeds {
		s := sha256.Sum256(append(append(d.Root[:], "seed"...), byte(i)))
		d.Seeds[i] = int64(binary.BigEndian.Uint64(s[:8]) >> 11)
	}
	d.Windows = make([]uint32, spec.Data.HeldOutWindows)
	msg := append(append(d.Root[:], "window"...), make([]byte, 8)...)
	for j := range d.Windows {
		binary.BigEndian.PutUint64(msg[len(msg)-8:], uint64(j))
		s := sha256.Sum256(msg)
		d.Windows[j] = uint32(binary.BigEndian.Uint64(s[:8]) % uint64(span))
	}
	return d, nil
}

// RootHex is the root as the verdict records it.
func (d Derived) RootHex() string { return hex.EncodeToString(d.Root[:]) }

// windowsFile is the held-out evaluation's list of window starts: 4 bytes
// each, little-endian, in derivation order.
const windowsFile = "windows.bin"

// WindowsBytes is the held-out evaluation's window list (windowsFile).
func (d Derived) WindowsBytes() []byte {
	b := make([]byte, 4*len(d.Windows))
	for i, w := range d.Windows {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}
