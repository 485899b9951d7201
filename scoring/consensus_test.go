package scoring

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"testing"

	"github.com/feval/feval/internal/detrand"
	"github.com/opencontainers/go-digest"
)

func rat(s string) Ratio { return MustParseRatio(s) }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func equalStake(scores ...string) []Sample {
	out := make([]Sample, len(scores))
	for i, s := range scores {
		out[i] = Sample{Score: rat(s), Stake: 1}
	}
	return out
}

var (
	countRule      = Winsorization{Mode: WinsorCount, Lower: NewRatio(1, 10), Upper: NewRatio(9, 10)}
	percentileRule = Winsorization{Mode: WinsorStakePercentile, Lower: NewRatio(1, 10), Upper: NewRatio(9, 10)}
)

// TestWinsorizePublicPeerExample is the example of the public scenario
// competition: six equal votes 2, 8, 8, 8, 8, 10 (one low outlier). The plain mean
// is 44/6 = 22/3 = 7.33; the count rule clips 2 up to 8 and 10 down to 8, so the
// Winsorized mean is 48/6 = 8.
func TestWinsorizePublicPeerExample(t *testing.T) {
	votes := equalStake("2", "8", "8", "8", "8", "10")
	got, err := Winsorize(votes, countRule)
	if err != nil {
		t.Fatal(err)
	}
	if got.Score.String() != "8" || got.Mean.String() != "22/3" {
		t.Fatalf("count rule: score %s, mean %s; want 8 and 22/3", got.Score, got.Mean)
	}
	// By stake mass one vote of six is 1/6 > 1/10, so the 10th/90th percentile
	// rule clips nothing here.
	got, err = Winsorize(votes, percentileRule)
	if err != nil {
		t.Fatal(err)
	}
	if got.Score.String() != "22/3" || got.Low.String() != "2" || got.High.String() != "10" {
		t.Fatalf("percentile rule: score %s in [%s, %s]; want 22/3 in [2, 10]", got.Score, got.Low, got.High)
	}
}

func TestWinsorize(t *testing.T) {
	cases := []struct {
		name                   string
		rule                   Winsorization
		samples                []Sample
		score, mean, low, high string
	}{
		{
			name: "count rule, three votes: plain mean", rule: countRule,
			samples: equalStake("1", "5", "9"),
			score:   "5", mean: "5", low: "1", high: "9",
		},
		{
			name: "count rule, four votes: ends clipped to neighbours", rule: countRule,
			// 0 -> 4 and 20 -> 6: (4+4+6+6)/4 = 5; plain (0+4+6+20)/4 = 15/2.
			samples: equalStake("0", "4", "6", "20"),
			score:   "5", mean: "15/2", low: "4", high: "6",
		},
		{
			name: "count rule, stake-weighted mean after clipping", rule: countRule,
			// Clip to [10, 12]: (3*10 + 10 + 12 + 5*12)/10 = 112/10; plain 122/10.
			samples: []Sample{{rat("0"), 3}, {rat("10"), 1}, {rat("12"), 1}, {rat("20"), 5}},
			score:   "56/5", mean: "61/5", low: "10", high: "12",
		},
		{
			name: "count rule, tied lowest scores", rule: countRule,
			// The second lowest equals the lowest: nothing to raise; 9 -> 7.
			// (5 + 1 + 7 + 7)/8 = 20/8; plain (5 + 1 + 7 + 9)/8 = 22/8.
			samples: []Sample{{rat("1"), 5}, {rat("1"), 1}, {rat("7"), 1}, {rat("9"), 1}},
			score:   "5/2", mean: "11/4", low: "1", high: "7",
		},
		{
			name: "percentile rule, ten equal votes: one clipped each side", rule: percentileRule,
			// The lowest vote holds exactly the bottom tenth of stake: 0 -> 1; the
			// highest the top tenth: 20 -> 8. Sum 56 becomes 56 + 1 - 12 = 45.
			samples: equalStake("0", "1", "2", "3", "4", "5", "6", "7", "8", "20"),
			score:   "9/2", mean: "28/5", low: "1", high: "8",
		},
		{
			name: "percentile rule, majority stake sets both bounds", rule: percentileRule,
			// 0 holds 5 % of stake, below the 10 % mark: raised to 5.
			samples: []Sample{{rat("5"), 95}, {rat("0"), 5}},
			score:   "5", mean: "19/4", low: "5", high: "5",
		},
		{
			name: "percentile rule, boundary mass goes to the clipped side", rule: percentileRule,
			// Score 1 holds exactly 1/10 of stake: C(1) = 1 is not > 1, so Low = 2.
			samples: []Sample{{rat("1"), 1}, {rat("2"), 9}},
			score:   "2", mean: "19/10", low: "2", high: "2",
		},
		{
			name: "percentile rule 0..1: plain weighted mean",
			rule: Winsorization{Mode: WinsorStakePercentile, Lower: Ratio{}, Upper: NewRatio(1, 1)},
			// (1*0 + 2*3 + 3*20)/6 = 66/6.
			samples: []Sample{{rat("0"), 1}, {rat("3"), 2}, {rat("20"), 3}},
			score:   "11", mean: "11", low: "0", high: "20",
		},
		{
			name: "single sample", rule: percentileRule,
			samples: []Sample{{rat("7/20"), 4}},
			score:   "7/20", mean: "7/20", low: "7/20", high: "7/20",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Winsorize(c.samples, c.rule)
			if err != nil {
				t.Fatal(err)
			}
			if got.Score.String() != c.score || got.Mean.String() != c.mean || got.Low.String() != c.low || got.High.String() != c.high {
				t.Fatalf("got score %s mean %s bounds [%s, %s]; want score %s mean %s bounds [%s, %s]",
					got.Score, got.Mean, got.Low, got.High, c.score, c.mean, c.low, c.high)
			}
		})
	}
}

func TestWinsorizeErrors(t *testing.T) {
	if _, err := Winsorize(nil, percentileRule); err == nil {
		t.Error("no samples accepted")
	}
	if _, err := Winsorize([]Sample{{rat("1"), 0}}, percentileRule); err == nil {
		t.Error("zero stake accepted")
	}
	if _, err := Winsorize(equalStake("1"), Winsorization{Mode: "median"}); !errors.Is(err, ErrInvalidRules) {
		t.Errorf("unknown mode: %v", err)
	}
}

// TestWinsorizeMatchesStakeUnits checks the percentile rule against a second
// formulation: expand each sample into one unit per unit of stake, sorted; the
// unit at position floor(Lower*W) (0-based) gives Low and the unit at position
// ceil(Upper*W) - 1 gives High.
func TestWinsorizeMatchesStakeUnits(t *testing.T) {
	src := detrand.New("scoring/winsorize-units", nil)
	fractions := []Ratio{NewRatio(0, 1), NewRatio(1, 10), NewRatio(1, 4), NewRatio(1, 3), NewRatio(1, 2), NewRatio(2, 3), NewRatio(9, 10), NewRatio(1, 1)}
	for i := 0; i < 500; i++ {
		n := src.Range(1, 7)
		samples := make([]Sample, n)
		var units []Ratio
		for j := range samples {
			samples[j] = Sample{Score: NewRatio(int64(src.Range(0, 12)), int64(src.Range(1, 3))), Stake: uint64(src.Range(1, 6))}
			for k := uint64(0); k < samples[j].Stake; k++ {
				units = append(units, samples[j].Score)
			}
		}
		slices.SortFunc(units, Ratio.Cmp)
		lo, hi := detrand.Pick(src, fractions), detrand.Pick(src, fractions)
		if lo.Cmp(hi) >= 0 {
			continue
		}
		got, err := Winsorize(samples, Winsorization{Mode: WinsorStakePercentile, Lower: lo, Upper: hi})
		if err != nil {
			t.Fatal(err)
		}
		w := big.NewRat(int64(len(units)), 1)
		loPos := new(big.Rat).Mul(lo.val(), w)
		hiPos := new(big.Rat).Mul(hi.val(), w)
		loIdx := new(big.Int).Quo(loPos.Num(), loPos.Denom())
		hiIdx := new(big.Int).Quo(new(big.Int).Add(hiPos.Num(), new(big.Int).Sub(hiPos.Denom(), big.NewInt(1))), hiPos.Denom())
		wantLow, wantHigh := units[loIdx.Int64()], units[hiIdx.Int64()-1]
		if got.Low.Cmp(wantLow) != 0 || got.High.Cmp(wantHigh) != 0 {
			t.Fatalf("case %d: %v with [%s, %s]: bounds [%s, %s], want [%s, %s]", i, samples, lo, hi, got.Low, got.High, wantLow, wantHigh)
		}
	}
}

// round1 is the fixture of TestAggregate. Stakes A 40, B 30, C 20, D 10, Z 0:
// active stake 100, quorum 2/5 of it = 40.
var (
	round1Stakes = map[string]uint64{"A": 40, "B": 30, "C": 20, "D": 10, "Z": 0}
	s1, s2, s3   = digest.Digest("sha256:1111"), digest.Digest("sha256:2222"), digest.Digest("sha256:3333")
	round1Votes  = []Vote{
		{Verdict: "v01", Validator: "A", Submission: s1, Sequence: 1, Status: StatusPassed, Score: rat("8")},
		{Verdict: "v02", Validator: "A", Submission: s1, Sequence: 2, Status: StatusPassed, Score: rat("9")},
		{Verdict: "v03", Validator: "B", Submission: s1, Sequence: 1, Status: StatusPassed, Score: rat("7")},
		{Verdict: "v04", Validator: "C", Submission: s1, Sequence: 1, Status: StatusPassed, Score: rat("3"), Exclude: ReasonUnsigned},
		{Verdict: "v05", Validator: "D", Submission: s1, Sequence: 1, Status: StatusInfraError},
		{Verdict: "v06", Validator: "Z", Submission: s1, Sequence: 1, Status: StatusPassed, Score: rat("1")},
		{Verdict: "v07", Validator: "X", Submission: s1, Sequence: 1, Status: StatusPassed, Score: rat("1")},
		{Verdict: "v08", Validator: "C", Submission: "sha256:9999", Sequence: 1, Status: StatusPassed, Score: rat("5")},
		{Verdict: "v09", Validator: "B", Submission: s2, Sequence: 1, Status: StatusPassed, Score: rat("30")},
		{Verdict: "v10", Validator: "B", Submission: s2, Sequence: 2, Status: "finished"},
		{Verdict: "v11", Validator: "C", Submission: s2, Sequence: 3, Status: StatusUndetermined},
		{Verdict: "v12", Validator: "D", Submission: s2, Sequence: 1, Status: StatusRejected},
		{Verdict: "v14", Validator: "A", Submission: s3, Sequence: 7, Status: StatusPassed, Score: rat("10")},
		{Verdict: "v13", Validator: "A", Submission: s3, Sequence: 7, Status: StatusPassed, Score: rat("12")},
		{Verdict: "v15", Validator: "B", Submission: s3, Sequence: 1, Status: StatusRejected},
		{Verdict: "v16", Validator: "C", Submission: s3, Sequence: 1, Status: StatusRejected},
	}
)

func TestAggregate(t *testing.T) {
	got, err := Aggregate(round1Votes, round1Stakes, DefaultRules(), []digest.Digest{s3, s1, s2, s1})
	if err != nil {
		t.Fatal(err)
	}
	want := Consensus{
		ActiveStake: 100,
		QuorumStake: rat("40"),
		Results: []Result{
			// A 9 (stake 40), B 7 (30): bounds [7, 9] clip nothing;
			// (360 + 210)/70 = 57/7.
			{Submission: s1, Status: StatusPassed, Score: rat("57/7"), Mean: rat("57/7"), ClipLow: rat("7"), ClipHigh: rat("9"),
				Votes: 2, ReportingStake: 70, PassedStake: 70, QuorumMet: true},
			// Only D (10) counts: 10 < 40.
			{Submission: s2, Status: StatusUndetermined, Votes: 1, ReportingStake: 10, RejectedStake: 10},
			// A 12 (40; v13 beats v14 at equal sequence), B 0 (30), C 0 (20):
			// 480/90; rejected stake 50 > passed stake 40.
			{Submission: s3, Status: StatusRejected, Score: rat("16/3"), Mean: rat("16/3"), ClipLow: rat("0"), ClipHigh: rat("12"),
				Votes: 3, ReportingStake: 90, PassedStake: 40, RejectedStake: 50, QuorumMet: true},
		},
		Counted: []Vote{round1Votes[1], round1Votes[2], round1Votes[11], round1Votes[13], round1Votes[14], round1Votes[15]},
		Excluded: []Exclusion{
			{Verdict: "v01", Validator: "A", Submission: s1, Sequence: 1, Reason: ReasonDuplicate},
			{Verdict: "v04", Validator: "C", Submission: s1, Sequence: 1, Reason: ReasonUnsigned},
			{Verdict: "v05", Validator: "D", Submission: s1, Sequence: 1, Reason: ReasonInfraError},
			{Verdict: "v07", Validator: "X", Submission: s1, Sequence: 1, Reason: ReasonUnknownValidator},
			{Verdict: "v06", Validator: "Z", Submission: s1, Sequence: 1, Reason: ReasonZeroStake},
			{Verdict: "v09", Validator: "B", Submission: s2, Sequence: 1, Reason: ReasonScoreOutOfRange},
			{Verdict: "v10", Validator: "B", Submission: s2, Sequence: 2, Reason: ReasonInvalidStatus},
			{Verdict: "v11", Validator: "C", Submission: s2, Sequence: 3, Reason: ReasonUndetermined},
			{Verdict: "v14", Validator: "A", Submission: s3, Sequence: 7, Reason: ReasonDuplicate},
			{Verdict: "v08", Validator: "C", Submission: "sha256:9999", Sequence: 1, Reason: ReasonStale},
		},
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Fatalf("consensus\n got %s\nwant %s", g, w)
	}
}

func TestAggregateDuplicates(t *testing.T) {
	stakes := map[string]uint64{"A": 1}
	cases := []struct {
		name    string
		votes   []Vote
		counted digest.Digest // verdict that counts, "" for none
		score   string        // score of the counted vote, if checked
		reasons map[digest.Digest]Reason
	}{
		{
			name: "highest sequence wins",
			votes: []Vote{
				{Verdict: "v1", Sequence: 9, Status: StatusPassed, Score: rat("1")},
				{Verdict: "v2", Sequence: 10, Status: StatusPassed, Score: rat("2")},
			},
			counted: "v2", reasons: map[digest.Digest]Reason{"v1": ReasonDuplicate},
		},
		{
			name: "equal sequence: smallest verdict digest wins",
			votes: []Vote{
				{Verdict: "sha256:bb", Sequence: 3, Status: StatusPassed, Score: rat("1")},
				{Verdict: "sha256:aa", Sequence: 3, Status: StatusPassed, Score: rat("2")},
			},
			counted: "sha256:aa", reasons: map[digest.Digest]Reason{"sha256:bb": ReasonDuplicate},
		},
		{
			name: "equal sequence and digest: smallest status, then smallest score",
			votes: []Vote{
				{Verdict: "v", Sequence: 3, Status: StatusRejected, Score: rat("0")},
				{Verdict: "v", Sequence: 3, Status: StatusPassed, Score: rat("5")},
				{Verdict: "v", Sequence: 3, Status: StatusPassed, Score: rat("4")},
			},
			// "passed" < "rejected", then 4 < 5; the two losers are reported as
			// duplicates under the same verdict digest.
			counted: "v", score: "4",
		},
		{
			name: "latest verdict is infra_error: it supersedes and is excluded",
			votes: []Vote{
				{Verdict: "v1", Sequence: 1, Status: StatusPassed, Score: rat("3")},
				{Verdict: "v2", Sequence: 2, Status: StatusInfraError},
			},
			reasons: map[digest.Digest]Reason{"v1": ReasonDuplicate, "v2": ReasonInfraError},
		},
		{
			name: "unsigned later verdict does not supersede",
			votes: []Vote{
				{Verdict: "v1", Sequence: 1, Status: StatusPassed, Score: rat("3")},
				{Verdict: "v2", Sequence: 2, Status: StatusPassed, Score: rat("20"), Exclude: ReasonBadSignature},
			},
			counted: "v1", reasons: map[digest.Digest]Reason{"v2": ReasonBadSignature},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.votes {
				c.votes[i].Validator, c.votes[i].Submission = "A", s1
			}
			got, err := Aggregate(c.votes, stakes, DefaultRules(), []digest.Digest{s1})
			if err != nil {
				t.Fatal(err)
			}
			if c.counted == "" {
				if len(got.Counted) != 0 {
					t.Fatalf("counted %v, want none", got.Counted)
				}
			} else if len(got.Counted) != 1 || got.Counted[0].Verdict != c.counted {
				t.Fatalf("counted %v, want %s", got.Counted, c.counted)
			}
			if len(got.Counted)+len(got.Excluded) != len(c.votes) {
				t.Fatalf("%d counted + %d excluded != %d votes", len(got.Counted), len(got.Excluded), len(c.votes))
			}
			for _, e := range got.Excluded {
				want, ok := c.reasons[e.Verdict]
				if !ok {
					want = ReasonDuplicate
				}
				if e.Reason != want {
					t.Errorf("verdict %s excluded as %s, want %s", e.Verdict, e.Reason, want)
				}
			}
			if c.score != "" && got.Counted[0].Score.String() != c.score {
				t.Fatalf("counted score %s, want %s", got.Counted[0].Score, c.score)
			}
		})
	}
}

func TestAggregateQuorumAndStatus(t *testing.T) {
	vote := func(v string, st Status, score string) Vote {
		return Vote{Verdict: digest.Digest("v-" + v), Validator: v, Submission: s1, Sequence: 1, Status: st, Score: rat(score)}
	}
	cases := []struct {
		name   string
		stakes map[string]uint64
		quorum Ratio
		votes  []Vote
		status Status
		met    bool
	}{
		{"exactly the quorum", map[string]uint64{"A": 40, "B": 60}, NewRatio(2, 5), []Vote{vote("A", StatusPassed, "1")}, StatusPassed, true},
		{"just below the quorum", map[string]uint64{"A": 39, "B": 61}, NewRatio(2, 5), []Vote{vote("A", StatusPassed, "1")}, StatusUndetermined, false},
		{"no votes", map[string]uint64{"A": 1}, NewRatio(2, 5), nil, StatusUndetermined, false},
		{"zero quorum still needs a vote", map[string]uint64{"A": 1}, Ratio{}, nil, StatusUndetermined, false},
		{"zero quorum with a vote", map[string]uint64{"A": 1, "B": 1000}, Ratio{}, []Vote{vote("A", StatusPassed, "1")}, StatusPassed, true},
		{"empty stake table", map[string]uint64{}, NewRatio(2, 5), []Vote{vote("A", StatusPassed, "1")}, StatusUndetermined, false},
		{"equal passed and rejected stake is rejected", map[string]uint64{"A": 5, "B": 5}, NewRatio(2, 5),
			[]Vote{vote("A", StatusPassed, "10"), vote("B", StatusRejected, "0")}, StatusRejected, true},
		{"passed stake majority", map[string]uint64{"A": 6, "B": 5}, NewRatio(2, 5),
			[]Vote{vote("A", StatusPassed, "10"), vote("B", StatusRejected, "0")}, StatusPassed, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rules := DefaultRules()
			rules.Quorum = c.quorum
			got, err := Aggregate(c.votes, c.stakes, rules, []digest.Digest{s1})
			if err != nil {
				t.Fatal(err)
			}
			if r := got.Results[0]; r.Status != c.status || r.QuorumMet != c.met {
				t.Fatalf("status %s, quorum met %v; want %s, %v", r.Status, r.QuorumMet, c.status, c.met)
			}
		})
	}
}

func TestAggregateErrors(t *testing.T) {
	bad := DefaultRules()
	bad.Quorum = NewRatio(2, 1)
	cases := []struct {
		name       string
		stakes     map[string]uint64
		rules      Rules
		considered []digest.Digest
		is         error
	}{
		{"invalid rules", map[string]uint64{"A": 1}, bad, []digest.Digest{s1}, ErrInvalidRules},
		{"empty considered digest", map[string]uint64{"A": 1}, DefaultRules(), []digest.Digest{s1, ""}, nil},
		{"empty fingerprint", map[string]uint64{"": 1}, DefaultRules(), []digest.Digest{s1}, nil},
		{"stake overflow", map[string]uint64{"A": math.MaxUint64, "B": 1}, DefaultRules(), []digest.Digest{s1}, ErrStakeOverflow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Aggregate(nil, c.stakes, c.rules, c.considered)
			if err == nil || (c.is != nil && !errors.Is(err, c.is)) {
				t.Fatalf("Aggregate() error = %v, want %v", err, c.is)
			}
		})
	}
}

// genRound draws a random round: validators with stakes (some zero), submissions
// under consideration, and votes with every kind of defect.
func genRound(src *detrand.Source) ([]Vote, map[string]uint64, []digest.Digest) {
	stakes := make(map[string]uint64)
	nv := src.Range(1, 8)
	validators := make([]string, 0, nv+1)
	for i := 0; i < nv; i++ {
		v := fmt.Sprintf("val%02d", i)
		validators = append(validators, v)
		if src.Intn(8) == 0 {
			stakes[v] = 0
		} else {
			stakes[v] = uint64(src.Range(1, 1000))
		}
	}
	validators = append(validators, "stranger")
	ns := src.Range(1, 4)
	subs := make([]digest.Digest, ns)
	for i := range subs {
		subs[i] = digest.Digest(fmt.Sprintf("sha256:%04x", i))
	}
	statuses := []Status{StatusPassed, StatusPassed, StatusPassed, StatusRejected, StatusUndetermined, StatusInfraError}
	nvotes := src.Range(0, 30)
	votes := make([]Vote, nvotes)
	for i := range votes {
		sub := detrand.Pick(src, subs)
		if src.Intn(10) == 0 {
			sub = "sha256:stale"
		}
		v := Vote{
			Verdict:    digest.Digest(fmt.Sprintf("sha256:v%03d", src.Intn(40))),
			Validator:  detrand.Pick(src, validators),
			Submission: sub,
			Sequence:   uint64(src.Intn(4)),
			Status:     detrand.Pick(src, statuses),
			Score:      NewRatio(int64(src.Range(0, 21)), int64(src.Range(1, 4))),
		}
		if src.Intn(12) == 0 {
			v.Exclude = ReasonUnsigned
		}
		votes[i] = v
	}
	return votes, stakes, subs
}

func seed(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }

func TestAggregateProperties(t *testing.T) {
	modes := []Winsorization{percentileRule, countRule}
	for i := 0; i < 300; i++ {
		src := detrand.New("scoring/aggregate-properties", seed(i))
		votes, stakes, subs := genRound(src)
		rules := DefaultRules()
		rules.Winsorization = modes[i%2]
		base, err := Aggregate(votes, stakes, rules, subs)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		baseJSON := mustJSON(t, base)

		if len(base.Counted)+len(base.Excluded) != len(votes) {
			t.Fatalf("round %d: %d counted + %d excluded != %d votes", i, len(base.Counted), len(base.Excluded), len(votes))
		}
		for _, r := range base.Results {
			if r.Votes > 0 && (r.Score.Cmp(r.ClipLow) < 0 || r.Score.Cmp(r.ClipHigh) > 0) {
				t.Fatalf("round %d: score %s outside its clip bounds [%s, %s]", i, r.Score, r.ClipLow, r.ClipHigh)
			}
		}

		// Permuting votes and considered digests, and rebuilding the stake map,
		// changes nothing.
		pv, ps := slices.Clone(votes), slices.Clone(subs)
		detrand.Shuffle(src, pv)
		detrand.Shuffle(src, ps)
		pstakes := make(map[string]uint64, len(stakes))
		for k, v := range stakes {
			pstakes[k] = v
		}
		perm, err := Aggregate(pv, pstakes, rules, ps)
		if err != nil {
			t.Fatal(err)
		}
		if g := mustJSON(t, perm); g != baseJSON {
			t.Fatalf("round %d: permuted input changed the consensus\n%s\n%s", i, baseJSON, g)
		}

		// A zero-stake validator and its votes change nothing but add exclusions.
		zs := make(map[string]uint64, len(stakes)+1)
		for k, v := range stakes {
			zs[k] = v
		}
		zs["zero-stake"] = 0
		zv := slices.Clone(votes)
		for j := 0; j < 3; j++ {
			zv = append(zv, Vote{Verdict: digest.Digest(fmt.Sprintf("sha256:z%d", j)), Validator: "zero-stake",
				Submission: detrand.Pick(src, subs), Sequence: uint64(j), Status: StatusPassed, Score: NewRatio(int64(j), 1)})
		}
		detrand.Shuffle(src, zv)
		zc, err := Aggregate(zv, zs, rules, subs)
		if err != nil {
			t.Fatal(err)
		}
		if mustJSON(t, zc.Results) != mustJSON(t, base.Results) || mustJSON(t, zc.Counted) != mustJSON(t, base.Counted) ||
			zc.ActiveStake != base.ActiveStake || zc.QuorumStake.Cmp(base.QuorumStake) != 0 {
			t.Fatalf("round %d: a zero-stake validator changed the consensus", i)
		}
		extra := []Exclusion{}
		for _, e := range zc.Excluded {
			if e.Validator == "zero-stake" {
				if e.Reason != ReasonZeroStake {
					t.Fatalf("round %d: zero-stake vote excluded as %s", i, e.Reason)
				}
				continue
			}
			extra = append(extra, e)
		}
		if mustJSON(t, extra) != mustJSON(t, base.Excluded) {
			t.Fatalf("round %d: a zero-stake validator changed other exclusions", i)
		}
	}
}

// TestAggregateVectors checks rounds computed by an independent implementation
// of docs/CONSENSUS.md, among them the public peer's example under both modes.
func TestAggregateVectors(t *testing.T) {
	var cases []struct {
		Name       string            `json:"name"`
		Rules      json.RawMessage   `json:"rules"`
		Stakes     map[string]uint64 `json:"stakes"`
		Considered []digest.Digest   `json:"considered"`
		Votes      []Vote            `json:"votes"`
		Want       struct {
			ActiveStake uint64          `json:"active_stake"`
			QuorumStake Ratio           `json:"quorum_stake"`
			Results     []Result        `json:"results"`
			Counted     []digest.Digest `json:"counted"`
			Excluded    []Exclusion     `json:"excluded"`
		} `json:"want"`
	}
	readJSON(t, "testdata/consensus_aggregate_vectors.json", &cases)
	if len(cases) == 0 {
		t.Fatal("no aggregate vectors")
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			rules := DefaultRules()
			if err := json.Unmarshal(c.Rules, &rules); err != nil {
				t.Fatal(err)
			}
			got, err := Aggregate(c.Votes, c.Stakes, rules, c.Considered)
			if err != nil {
				t.Fatal(err)
			}
			counted := make([]digest.Digest, len(got.Counted))
			for i, v := range got.Counted {
				counted[i] = v.Verdict
			}
			w := c.Want
			if got.ActiveStake != w.ActiveStake || got.QuorumStake.Cmp(w.QuorumStake) != 0 {
				t.Fatalf("active %d quorum %s; want %d %s", got.ActiveStake, got.QuorumStake, w.ActiveStake, w.QuorumStake)
			}
			for _, pair := range [][2]any{{got.Results, w.Results}, {counted, w.Counted}, {got.Excluded, w.Excluded}} {
				if g, w := mustJSON(t, pair[0]), mustJSON(t, pair[1]); g != w {
					t.Fatalf("\n got %s\nwant %s", g, w)
				}
			}
		})
	}
}
