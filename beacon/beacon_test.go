package beacon

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

// Published quicknet rounds, as the chain's HTTP relays serve them at
// /52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971/public/<round>.
// The randomness of round 9683710 is the relay's own "randomness" field, so the
// test checks the derivation against the chain, not against this package.
var published = []struct {
	round      uint64
	signature  string
	randomness string // "" where the relay's value is not at hand
}{
	{2, "b6b6a585449b66eb12e875b64fcbab3799861a00e4dbf092d99e969a5eac57dd3f798acf61e705fe4f093db926626807", ""},
	{3, "b3fab6df720b68cc47175f2c777e86d84187caab5770906f515ff1099cb01e4deaa027075d860823e49477b93c72bd64", ""},
	{9683710, "b0a8b04e009cf72534321aca0f50048da596a3feec1172a0244d9a4a623a3123d0402da79854d4c705e94bc73224c342",
		"87f03ef5f62885390defedf60d5b8132b4dc2115b1efc6e99d166a37ab2f3a02"},
}

func TestPublishedRoundsVerify(t *testing.T) {
	for _, p := range published {
		d := Drand{Chain: Quicknet.Hash, Round: p.round, Signature: p.signature}
		c, r, err := d.Verify()
		if err != nil {
			t.Fatalf("round %d: %v", p.round, err)
		}
		if c.Name != "quicknet" {
			t.Errorf("round %d: chain %q", p.round, c.Name)
		}
		if p.randomness != "" && hex.EncodeToString(r[:]) != p.randomness {
			t.Errorf("round %d: randomness %x, the relay says %s", p.round, r, p.randomness)
		}
	}
}

func TestForgeriesFail(t *testing.T) {
	good := published[2]
	flip := func(s string, i int) string {
		b, _ := hex.DecodeString(s)
		b[i] ^= 1
		return hex.EncodeToString(b)
	}
	cases := []struct {
		name string
		d    Drand
		want error
	}{
		{"another round's signature", Drand{Quicknet.Hash, good.round + 1, good.signature}, ErrBadSignature},
		{"round 2's signature for round 3", Drand{Quicknet.Hash, 3, published[0].signature}, ErrBadSignature},
		{"a flipped bit", Drand{Quicknet.Hash, good.round, flip(good.signature, 47)}, nil}, // not a point, or a wrong one
		{"upper-case hex", Drand{Quicknet.Hash, good.round, strings.ToUpper(good.signature)}, ErrMalformed},
		{"short signature", Drand{Quicknet.Hash, good.round, good.signature[:94]}, ErrMalformed},
		{"round 0", Drand{Quicknet.Hash, 0, good.signature}, ErrMalformed},
		{"unknown chain", Drand{strings.Repeat("ab", 32), good.round, good.signature}, ErrUnknownChain},
		{"upper-case chain", Drand{strings.ToUpper(Quicknet.Hash), good.round, good.signature}, ErrUnknownChain},
	}
	for _, c := range cases {
		_, _, err := c.d.Verify()
		if err == nil {
			t.Errorf("%s: verified", c.name)
			continue
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestRoundTime(t *testing.T) {
	if got := Quicknet.RoundTime(1); got != time.Unix(1692803367, 0).UTC() {
		t.Errorf("round 1 at %s", got)
	}
	// 1692803367 + 3 * 9683709 = 1721854494
	if got := Quicknet.RoundTime(9683710).Format(time.RFC3339); got != "2024-07-24T20:54:54Z" {
		t.Errorf("round 9683710 at %s", got)
	}
	for _, c := range []struct {
		at   string
		want uint64
	}{
		{"2024-07-24T20:54:51Z", 9683710}, // exactly round 9683709's time: the next one
		{"2024-07-24T20:54:52Z", 9683710},
		{"2024-07-24T20:54:53Z", 9683710},
		{"2024-07-24T20:54:54Z", 9683711}, // 9683710 exists at its own time
		{"2020-01-01T00:00:00Z", 1},
	} {
		at, _ := time.Parse(time.RFC3339, c.at)
		got := Quicknet.FirstRoundAfter(at)
		if got != c.want {
			t.Errorf("FirstRoundAfter(%s) = %d, want %d", c.at, got, c.want)
		}
		if !Quicknet.RoundTime(got).After(at) || (got > 1 && Quicknet.RoundTime(got-1).After(at)) {
			t.Errorf("FirstRoundAfter(%s) = %d is not the first round after it", c.at, got)
		}
	}
}

func TestSource(t *testing.T) {
	d := Drand{Chain: Quicknet.Hash, Round: 9683710}
	if got := d.Source(); got != "drand:"+Quicknet.Hash+":9683710" {
		t.Errorf("source %q", got)
	}
}

// FuzzVerify: any round and signature text verifies or fails, never panics,
// and only the published signature of a round verifies for it.
func FuzzVerify(f *testing.F) {
	for _, p := range published {
		f.Add(p.round, p.signature)
	}
	f.Add(uint64(1), strings.Repeat("00", SignatureSize))
	f.Add(uint64(7), "c0"+strings.Repeat("00", SignatureSize-1)) // the point at infinity
	f.Fuzz(func(t *testing.T, round uint64, sig string) {
		_, _, err := Drand{Chain: Quicknet.Hash, Round: round, Signature: sig}.Verify()
		if err != nil {
			return
		}
		for _, p := range published {
			if p.round == round && p.signature != sig {
				t.Fatalf("round %d verified with another signature %s", round, sig)
			}
		}
	})
}
