package protocol

import (
	"encoding/hex"
	"errors"
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
	upper := good
	upper.Salt = strings.ToUpper(upper.Salt)
	if upper.Validate() == nil {
		t.Error("an upper-case salt passed validation")
	}
	upper = good
	upper.Miner = strings.ToUpper(upper.Miner)
	if upper.Validate() == nil || (Commitment{Commitment: good.Commitment, Round: good.Round, Miner: upper.Miner}).Validate() == nil {
		t.Error("an upper-case fingerprint passed validation")
	}
}

// TestRecordsStrict: records are read exactly as FORMAT.md spells them. Each
// case is canonical JSON that encoding/json would decode into the record.
func TestRecordsStrict(t *testing.T) {
	good := Reveal{Commitment: ComputeCommitment(vecSub, vecMiner, vecRound, vecSalt()), Round: vecRound, Miner: vecMiner,
		Submission: vecSub, Salt: hex.EncodeToString(vecSalt())}
	raw, err := bundle.Canonical(good)
	if err != nil {
		t.Fatal(err)
	}
	var back Reveal
	if err := bundle.ParseCanonical(raw, &back); err != nil || back != good {
		t.Fatalf("the canonical reveal: %v", err)
	}
	for name, mutate := range map[string]func(string) string{
		"a field name in another case": func(s string) string { return strings.Replace(s, `"commitment":`, `"Commitment":`, 1) },
		"an unknown field":             func(s string) string { return strings.Replace(s, `"commitment":`, `"comment":"x","commitment":`, 1) },
		"a missing field":              func(s string) string { return strings.Replace(s, `"miner":"`+vecMiner+`",`, ``, 1) },
		"a null field":                 func(s string) string { return strings.Replace(s, `"miner":"`+vecMiner+`"`, `"miner":null`, 1) },
	} {
		in := []byte(mutate(string(raw)))
		if string(in) == string(raw) {
			t.Fatalf("%s: nothing changed", name)
		}
		if c, err := bundle.Canonicalize(in); err != nil || string(c) != string(in) {
			t.Fatalf("%s: the case is not canonical JSON (%v)", name, err)
		}
		var rv Reveal
		if err := bundle.ParseCanonical(in, &rv); !errors.Is(err, bundle.ErrMalformedRecord) {
			t.Errorf("%s: ParseCanonical(%s) = %v, want ErrMalformedRecord", name, in, err)
		}
	}
	// Hex in upper case is a second spelling: the record parses, but does not
	// validate.
	upper := strings.Replace(string(raw), good.Salt, strings.ToUpper(good.Salt), 1)
	var rv Reveal
	if err := bundle.ParseCanonical([]byte(upper), &rv); err != nil || rv.Validate() == nil {
		t.Errorf("an upper-case salt: parse %v, validates", err)
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
	// Spellings encoding/json alone accepts: another case, both cases, a
	// missing field, upper-case hex.
	f.Add([]byte(strings.Replace(string(r), `"miner"`, `"Miner"`, 1)))
	f.Add([]byte(strings.Replace(string(c), `"commitment":`, `"COMMITMENT":"x","commitment":`, 1)))
	f.Add([]byte(strings.Replace(string(c), `"miner":"`+vecMiner+`",`, ``, 1)))
	f.Add([]byte(strings.Replace(string(r), hex.EncodeToString(vecSalt()), strings.ToUpper(hex.EncodeToString(vecSalt())), 1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Whatever parses re-encodes to the same bytes: one spelling per record.
		var cm Commitment
		if bundle.ParseCanonical(b, &cm) == nil {
			again, err := bundle.Canonical(cm)
			if err != nil || string(again) != string(b) {
				t.Fatalf("commitment %q re-encodes to %q (%v)", b, again, err)
			}
			if cm.Validate() == nil && strings.ToLower(string(b)) != string(b) {
				t.Fatalf("commitment %q with upper-case letters validates", b)
			}
		}
		var rv Reveal
		if bundle.ParseCanonical(b, &rv) == nil {
			again, err := bundle.Canonical(rv)
			if err != nil || string(again) != string(b) {
				t.Fatalf("reveal %q re-encodes to %q (%v)", b, again, err)
			}
			if rv.Validate() == nil && strings.ToLower(string(b)) != string(b) {
				t.Fatalf("reveal %q with upper-case letters validates", b)
			}
			_ = rv.Opens()
		}
	})
}
