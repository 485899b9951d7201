package scoring

import (
	"testing"

	"github.com/opencontainers/go-digest"
)

func TestSeatMargin(t *testing.T) {
	// Defaults: M = 20, d0 = 3/100, full margin up to 7/10 x 20 = 14.
	cases := []struct{ s, want string }{
		{"0", "3/100"},
		{"10", "3/100"},
		{"14", "3/100"},
		{"17", "3/200"},   // 3/100 x (20-17)/(20-14) = 3/100 x 1/2
		{"18", "1/100"},   // 3/100 x 2/6
		{"19", "1/200"},   // 3/100 x 1/6
		{"39/2", "1/400"}, // 3/100 x (1/2)/6
		{"20", "0"},
	}
	for _, c := range cases {
		t.Run("s="+c.s, func(t *testing.T) {
			got, err := SeatMargin(rat(c.s), DefaultRules())
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != c.want {
				t.Fatalf("d(%s) = %s, want %s", c.s, got, c.want)
			}
		})
	}
	r := DefaultRules()
	r.Seat.FullMarginUpTo = NewRatio(1, 1)
	if got, err := SeatMargin(rat("199/10"), r); err != nil || got.String() != "3/100" {
		t.Fatalf("with full margin up to the maximum, d(19.9) = %s, %v; want 3/100", got, err)
	}
	// At s = M both "s <= k*M" and "s >= M" hold; the maximum wins: d = 0
	// (CONSENSUS.md section 4).
	if got, err := SeatMargin(rat("20"), r); err != nil || got.Sign() != 0 {
		t.Fatalf("with full margin up to the maximum, d(20) = %s, %v; want 0", got, err)
	}
}

func TestSeat(t *testing.T) {
	inc := digest.Digest("sha256:incumbent")
	a, b := digest.Digest("sha256:aaaa"), digest.Digest("sha256:bbbb")
	passed := func(d digest.Digest, score string) Result {
		return Result{Submission: d, Status: StatusPassed, Score: rat(score), QuorumMet: true}
	}
	cases := []struct {
		name        string
		incumbent   digest.Digest
		recorded    string
		challengers []Result
		holder      digest.Digest
		holderScore string
		outcome     SeatOutcome
		threshold   string
	}{
		{
			name: "tie with the threshold keeps the incumbent", incumbent: inc, recorded: "10",
			challengers: []Result{passed(a, "103/10")}, // 10 x 1.03 = 10.3
			holder:      inc, holderScore: "10", outcome: SeatKept, threshold: "103/10",
		},
		{
			name: "above the threshold takes the seat", incumbent: inc, recorded: "10",
			challengers: []Result{passed(a, "1031/100"), passed(b, "10")},
			holder:      a, holderScore: "1031/100", outcome: SeatTaken, threshold: "103/10",
		},
		{
			name: "undetermined challenger (quorum failure) keeps the incumbent", incumbent: inc, recorded: "10",
			challengers: []Result{{Submission: a, Status: StatusUndetermined, Score: rat("20")}},
			holder:      inc, holderScore: "10", outcome: SeatKept, threshold: "103/10",
		},
		{
			name: "rejected challenger keeps the incumbent", incumbent: inc, recorded: "10",
			challengers: []Result{{Submission: a, Status: StatusRejected, Score: rat("20"), QuorumMet: true}},
			holder:      inc, holderScore: "10", outcome: SeatKept, threshold: "103/10",
		},
		{
			name: "incumbent defends with its recorded score, not a new consensus", incumbent: inc, recorded: "10",
			challengers: []Result{passed(inc, "5"), passed(a, "258/25")},
			holder:      a, holderScore: "258/25", outcome: SeatTaken, threshold: "103/10",
		},
		{
			name: "incumbent's own higher rerun does not replace its recorded score", incumbent: inc, recorded: "10",
			challengers: []Result{passed(inc, "19")},
			holder:      inc, holderScore: "10", outcome: SeatKept, threshold: "103/10",
		},
		{
			name: "shrunken margin above the knee", incumbent: inc, recorded: "18",
			// d(18) = 1/100, threshold 18.18; 18.2 would not beat 18 x 1.03 = 18.54.
			challengers: []Result{passed(a, "91/5")},
			holder:      a, holderScore: "91/5", outcome: SeatTaken, threshold: "909/50",
		},
		{
			name: "perfect incumbent cannot be beaten", incumbent: inc, recorded: "20",
			challengers: []Result{passed(a, "20")},
			holder:      inc, holderScore: "20", outcome: SeatKept, threshold: "20",
		},
		{
			name: "vacant seat goes to the best challenger, ties to the smallest digest", recorded: "0",
			challengers: []Result{passed(b, "7"), passed(a, "7"), passed("sha256:cccc", "6")},
			holder:      a, holderScore: "7", outcome: SeatTaken, threshold: "0",
		},
		{
			name: "vacant seat without eligible challengers stays vacant", recorded: "0",
			challengers: []Result{{Submission: a, Status: StatusUndetermined, Score: rat("7")}},
			holder:      "", holderScore: "0", outcome: SeatVacant, threshold: "0",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Seat(c.incumbent, rat(c.recorded), c.challengers, DefaultRules())
			if err != nil {
				t.Fatal(err)
			}
			if got.Holder != c.holder || got.HolderScore.String() != c.holderScore || got.Outcome != c.outcome || got.Threshold.String() != c.threshold {
				t.Fatalf("got holder %q score %s outcome %s threshold %s; want %q %s %s %s",
					got.Holder, got.HolderScore, got.Outcome, got.Threshold, c.holder, c.holderScore, c.outcome, c.threshold)
			}
		})
	}
}

func TestSeatChallengerOrderDoesNotMatter(t *testing.T) {
	cs := []Result{
		{Submission: "sha256:bbbb", Status: StatusPassed, Score: rat("12")},
		{Submission: "sha256:aaaa", Status: StatusPassed, Score: rat("12")},
		{Submission: "sha256:cccc", Status: StatusPassed, Score: rat("11")},
	}
	first, err := Seat("sha256:inc", rat("10"), cs, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	cs[0], cs[1], cs[2] = cs[2], cs[0], cs[1]
	second, err := Seat("sha256:inc", rat("10"), cs, DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, first) != mustJSON(t, second) || first.Holder != "sha256:aaaa" {
		t.Fatalf("order changed the decision: %+v vs %+v", first, second)
	}
}

func TestSeatErrors(t *testing.T) {
	if _, err := Seat("sha256:inc", rat("21"), nil, DefaultRules()); err == nil {
		t.Error("recorded score above the maximum accepted")
	}
	if _, err := Seat("sha256:inc", rat("-1"), nil, DefaultRules()); err == nil {
		t.Error("negative recorded score accepted")
	}
	r := DefaultRules()
	r.Seat.Margin = NewRatio(-1, 10)
	if _, err := Seat("sha256:inc", rat("1"), nil, r); err == nil {
		t.Error("negative margin accepted")
	}
}
