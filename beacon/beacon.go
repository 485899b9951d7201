// Package beacon verifies public randomness that a validator cannot choose: a
// round of a drand chain whose beacons are unchained BLS signatures (drand's
// quicknet). A round's signature is a BLS12-381 signature on G1 of
// SHA-256(round as 8 big-endian bytes) under the chain's public key on G2
// (hash-to-curve domain "BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_", RFC 9380),
// so it verifies offline with the chain's public key alone; its randomness is
// SHA-256(signature). A round's time follows from the chain's genesis time and
// period: genesis + (round-1) * period, so whether a round could exist before a
// given moment is a computation, not a claim. docs/PROTOCOL.md specifies how
// feval records and checks a beacon.
package beacon

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/cloudflare/circl/sign/bls"
)

// Chain is a drand chain's public parameters, as its /info document publishes
// them.
type Chain struct {
	Name      string // beaconID
	Hash      string // chain hash, 64 lower-case hex
	PublicKey string // compressed G2 point, 192 lower-case hex
	Genesis   int64  // Unix seconds of round 1
	Period    int64  // seconds between rounds
	Scheme    string // drand schemeID
}

// Quicknet is the League of Entropy's quicknet chain.
var Quicknet = Chain{
	Name:      "quicknet",
	Hash:      "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971",
	PublicKey: "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a",
	Genesis:   1692803367,
	Period:    3,
	Scheme:    "bls-unchained-g1-rfc9380",
}

// Chains are the chains feval verifies, by chain hash.
var Chains = map[string]Chain{Quicknet.Hash: Quicknet}

// SignatureSize is the length of a compressed G1 signature in bytes.
const SignatureSize = 48

// Errors callers test.
var (
	// ErrUnknownChain: the chain hash names no chain feval knows.
	ErrUnknownChain = errors.New("unknown drand chain")
	// ErrMalformed: a round or signature that does not have the required form.
	ErrMalformed = errors.New("malformed drand beacon")
	// ErrBadSignature: the signature is not the chain's signature of the round.
	ErrBadSignature = errors.New("drand signature does not verify with the chain's public key")
	// ErrTooEarly: the round could exist before the moment it must follow.
	ErrTooEarly = errors.New("drand round is too early")
)

// Drand is a drand round as feval records it.
type Drand struct {
	Chain     string `json:"chain"`     // chain hash, 64 lower-case hex
	Round     uint64 `json:"round"`     // round number, >= 1
	Signature string `json:"signature"` // compressed G1 signature, 96 lower-case hex
}

// Source is the beacon source text of a drand round in the audit seed:
// "drand:<chain hash>:<round>".
func (d Drand) Source() string { return fmt.Sprintf("drand:%s:%d", d.Chain, d.Round) }

// Verify checks the round's signature with its chain's public key and returns
// the chain and the round's randomness, SHA-256(signature).
func (d Drand) Verify() (Chain, [32]byte, error) {
	c, ok := Chains[d.Chain]
	if !ok {
		return Chain{}, [32]byte{}, fmt.Errorf("%w: chain %q (known: quicknet %s)", ErrUnknownChain, d.Chain, Quicknet.Hash)
	}
	if d.Round == 0 || d.Round > 1<<40 {
		return c, [32]byte{}, fmt.Errorf("%w: round %d", ErrMalformed, d.Round)
	}
	sig, err := lowerHex(d.Signature, SignatureSize)
	if err != nil {
		return c, [32]byte{}, fmt.Errorf("%w: signature: %v", ErrMalformed, err)
	}
	pkb, err := hex.DecodeString(c.PublicKey)
	if err != nil {
		return c, [32]byte{}, err
	}
	var pk bls.PublicKey[bls.KeyG2SigG1]
	if err := pk.UnmarshalBinary(pkb); err != nil {
		return c, [32]byte{}, fmt.Errorf("chain %s public key: %w", c.Name, err)
	}
	if !bls.Verify(&pk, Message(d.Round), sig) {
		return c, [32]byte{}, fmt.Errorf("%w: %s round %d", ErrBadSignature, c.Name, d.Round)
	}
	return c, sha256.Sum256(sig), nil
}

// Message is what an unchained chain signs for a round: SHA-256 of the round
// number as 8 big-endian bytes.
func Message(round uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], round)
	m := sha256.Sum256(b[:])
	return m[:]
}

// RoundTime is when the round is produced: genesis + (round-1) * period.
func (c Chain) RoundTime(round uint64) time.Time {
	return time.Unix(c.Genesis+int64(round-1)*c.Period, 0).UTC()
}

// FirstRoundAfter is the first round produced strictly after t: no earlier
// round can have existed later than t, and this one did not exist at t.
func (c Chain) FirstRoundAfter(t time.Time) uint64 {
	s := t.Unix()
	if s < c.Genesis {
		return 1
	}
	return uint64((s-c.Genesis)/c.Period) + 2
}

// lowerHex decodes exactly n bytes of lower-case hex (one spelling per value).
func lowerHex(s string, n int) ([]byte, error) {
	if len(s) != 2*n {
		return nil, fmt.Errorf("want %d hex digits, got %d", 2*n, len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, fmt.Errorf("%q is not lower-case hex", s)
		}
	}
	return hex.DecodeString(s)
}
