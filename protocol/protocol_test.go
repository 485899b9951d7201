package protocol

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/opencontainers/go-digest"
)

var (
	vecSub   = digest.Digest("sha256:" + strings.Repeat("a", 64))
	vecMiner = strings.Repeat("b", 64)
	vecRound = digest.Digest("sha256:" + strings.Repeat("c", 64))
)

func vecSalt() []byte {
	s := make([]byte, SaltSize)
	for i := range s {
		s[i] = byte(i)
	}
	return s
}

// TestCommitmentVector pins the construction of docs/PROTOCOL.md §3, computed
// independently:
//
//	python3 -c "import hashlib; print(hashlib.sha256(b'feval/commitment/v1\x00' + b'sha256:' + b'a'*64 + b'\x00' + b'b'*64 + b'\x00' + b'sha256:' + b'c'*64 + b'\x00' + bytes(range(32))).hexdigest())"
func TestCommitmentVector(t *testing.T) {
	got := ComputeCommitment(vecSub, vecMiner, vecRound, vecSalt())
	const want = "sha256:739c3b3a11d0dc662c1d2bb7c01100311c1a1d6f9b95c915c07953ff29746e63"
	if got != want {
		t.Fatalf("commitment = %s, want %s", got, want)
	}
}

func TestRevealOpens(t *testing.T) {
	good := Reveal{Commitment: ComputeCommitment(vecSub, vecMiner, vecRound, vecSalt()), Round: vecRound, Miner: vecMiner,
		Submission: vecSub, Salt: hex.EncodeToString(vecSalt())}
	if err := good.Validate(); err != nil || !good.Opens() {
		t.Fatalf("honest reveal: %v, opens %v", err, good.Opens())
	}
	cases := map[string]func(r *Reveal){
		"other salt":       func(r *Reveal) { r.Salt = strings.Repeat("00", SaltSize) },
		"other submission": func(r *Reveal) { r.Submission = digest.Digest("sha256:" + strings.Repeat("d", 64)) },
		"other miner":      func(r *Reveal) { r.Miner = strings.Repeat("e", 64) },
		"other round":      func(r *Reveal) { r.Round = digest.Digest("sha256:" + strings.Repeat("f", 64)) },
	}
	for name, mutate := range cases {
		r := good
		mutate(&r)
		if r.Opens() {
			t.Errorf("%s: the reveal still opens the commitment", name)
		}
	}
	short := good
	short.Salt = "abcd"
	if short.Validate() == nil {
		t.Error("a 2-byte salt passed validation")
	}
}

func TestParseWindow(t *testing.T) {
	cases := []struct {
		in   string
		want Window
		bad  bool
	}{
		{in: "2026-12-01T00:00:00Z", want: Window{Kind: "time", Time: "2026-12-01T00:00:00Z"}},
		{in: "2026-12-01T02:00:00+02:00", want: Window{Kind: "time", Time: "2026-12-01T00:00:00Z"}},
		{in: "height:4200", want: Window{Kind: "height", Height: 4200}},
		{in: "#7", want: Window{Kind: "height", Height: 7}},
		{in: "height:-1", bad: true},
		{in: "height:01", bad: true},
		{in: "tomorrow", bad: true},
		{in: "", bad: true},
	}
	for _, c := range cases {
		got, err := ParseWindow(c.in)
		if c.bad != (err != nil) || (!c.bad && got != c.want) {
			t.Errorf("ParseWindow(%q) = %+v, %v", c.in, got, err)
		}
	}
}

// FuzzRecords feeds arbitrary bytes to the strict readers of commitment and
// reveal records: they never panic, and whatever they accept re-encodes to the
// same bytes and validates consistently.
func FuzzRecords(f *testing.F) {
	c, _ := bundle.Canonical(Commitment{Commitment: ComputeCommitment(vecSub, vecMiner, vecRound, vecSalt()), Round: vecRound, Miner: vecMiner})
	r, _ := bundle.Canonical(Reveal{Commitment: ComputeCommitment(vecSub, vecMiner, vecRound, vecSalt()), Round: vecRound, Miner: vecMiner, Submission: vecSub, Salt: hex.EncodeToString(vecSalt())})
	f.Add(c)
	f.Add(r)
	f.Add([]byte(`{"commitment":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var cm Commitment
		if bundle.ParseCanonical(b, &cm) == nil {
			again, err := bundle.Canonical(cm)
			if err != nil || (cm.Validate() == nil && string(again) != string(b)) {
				t.Fatalf("commitment %q re-encodes to %q (%v)", b, again, err)
			}
		}
		var rv Reveal
		if bundle.ParseCanonical(b, &rv) == nil && rv.Validate() == nil {
			again, err := bundle.Canonical(rv)
			if err != nil || string(again) != string(b) {
				t.Fatalf("reveal %q re-encodes to %q (%v)", b, again, err)
			}
			_ = rv.Opens()
		}
	})
}
