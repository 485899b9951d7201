package consensus

import (
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/replay"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
)

// honest writes the three validators' passed verdicts on miner 0 (scores 1/2,
// 3/5, 7/10 with sequence 10) and returns them.
func honest(w *world) []digest.Digest {
	var out []digest.Digest
	for i, s := range []string{"1/2", "3/5", "7/10"} {
		out = append(out, w.verdict(w.keys.vals[i], 0, rollouts.StatusPassed, s, 10, nil))
	}
	return out
}

// TestExclusionReasons adds one verdict per case to an honest round and checks
// that it is excluded with its reason, under the key it is attributed to, and
// that the honest consensus is unchanged.
func TestExclusionReasons(t *testing.T) {
	k := newKeys(t, 2, 4)
	tests := []struct {
		name string
		// add writes the verdict under test and returns its digest.
		add  func(w *world) digest.Digest
		want []string // validator/reason
	}{
		{"unsigned", func(w *world) digest.Digest {
			return w.verdict(nil, 0, rollouts.StatusPassed, "1", 11, nil)
		}, []string{"/unsigned"}},
		{"bad signature", func(w *world) digest.Digest {
			other := w.verdict(nil, 1, rollouts.StatusPassed, "1", 3, nil)
			d := w.verdict(nil, 0, rollouts.StatusPassed, "1", 11, nil)
			w.foreignSignature(w.keys.vals[0], d, other)
			return d
		}, []string{"/bad_signature"}},
		{"unknown validator", func(w *world) digest.Digest {
			return w.verdict(w.keys.rogue, 0, rollouts.StatusPassed, "1", 11, nil)
		}, []string{short(k.rogue.Public().Fingerprint) + "/unknown_validator"}},
		{"zero stake", func(w *world) digest.Digest {
			return w.verdict(w.keys.vals[3], 0, rollouts.StatusPassed, "1", 11, nil)
		}, []string{short(k.vals[3].Public().Fingerprint) + "/zero_stake"}},
		{"duplicate: an earlier sequence number", func(w *world) digest.Digest {
			return w.verdict(w.keys.vals[0], 0, rollouts.StatusPassed, "1", 9, nil)
		}, []string{short(k.vals[0].Public().Fingerprint) + "/duplicate"}},
		{"stale: another submission", func(w *world) digest.Digest {
			return w.verdict(w.keys.vals[0], 0, rollouts.StatusPassed, "1", 11, func(v *rollouts.Verdict) {
				v.Submission = w.miners[1].submission.Digest
			})
		}, []string{short(k.vals[0].Public().Fingerprint) + "/stale"}},
		{"stale: another round", func(w *world) digest.Digest {
			return w.verdict(w.keys.vals[0], 0, rollouts.StatusPassed, "1", 11, func(v *rollouts.Verdict) {
				v.Inputs.Round = w.task.Digest
			})
		}, []string{short(k.vals[0].Public().Fingerprint) + "/stale"}},
		{"stale: a reveal not in the round", func(w *world) digest.Digest {
			return w.verdict(w.keys.vals[0], 0, rollouts.StatusPassed, "1", 11, func(v *rollouts.Verdict) {
				v.Inputs.Reveal = digest.FromString("elsewhere")
			})
		}, []string{short(k.vals[0].Public().Fingerprint) + "/stale"}},
		{"infra_error", func(w *world) digest.Digest {
			return w.verdict(w.keys.vals[0], 1, rollouts.StatusInfraError, "", 11, nil)
		}, []string{short(k.vals[0].Public().Fingerprint) + "/infra_error"}},
		{"undetermined", func(w *world) digest.Digest {
			return w.verdict(w.keys.vals[0], 1, rollouts.StatusUndetermined, "", 11, nil)
		}, []string{short(k.vals[0].Public().Fingerprint) + "/undetermined"}},
		{"malformed: a status outside the schema's", func(w *world) digest.Digest {
			return w.verdict(w.keys.vals[0], 1, "maybe", "", 11, nil)
		}, []string{short(k.vals[0].Public().Fingerprint) + "/malformed"}},
		{"malformed: a claimed_score above 1", func(w *world) digest.Digest {
			return w.verdict(w.keys.vals[0], 1, rollouts.StatusPassed, "2", 11, nil)
		}, []string{short(k.vals[0].Public().Fingerprint) + "/malformed"}},
		{"score above max_score", func(w *world) digest.Digest {
			// A rollouts score is at most 1, so the rules say less.
			rules := scoring.DefaultRules()
			rules.MaxScore = scoring.NewRatio(7, 10)
			rd, err := WriteRules(w.ctx, w.st, w.keys.owner, rules, "")
			if err != nil {
				t.Fatal(err)
			}
			w.rules = rd.Digest
			return w.verdict(w.keys.vals[0], 1, rollouts.StatusPassed, "4/5", 11, nil)
		}, []string{short(k.vals[0].Public().Fingerprint) + "/score_out_of_range"}},
		{"malformed: decimal score", func(w *world) digest.Digest {
			return w.verdict(w.keys.vals[0], 1, rollouts.StatusPassed, "0.5", 11, nil)
		}, []string{short(k.vals[0].Public().Fingerprint) + "/malformed"}},
		{"malformed: not a verdict record", func(w *world) digest.Digest {
			return w.write(w.keys.vals[0], map[string]string{"status": "passed"}, w.miners[1].submission)
		}, []string{short(k.vals[0].Public().Fingerprint) + "/malformed"}},
		{"malformed: another protocol", func(w *world) digest.Digest {
			return w.verdict(w.keys.vals[0], 1, rollouts.StatusPassed, "1", 11, func(v *rollouts.Verdict) { v.Protocol = "scenarios" })
		}, []string{short(k.vals[0].Public().Fingerprint) + "/malformed"}},
		{"co-signed: one vote per valid signer", func(w *world) digest.Digest {
			d := w.verdict(w.keys.rogue, 0, rollouts.StatusPassed, "1", 11, nil)
			desc, _ := w.st.Resolve(w.ctx, d.String())
			if _, err := bundle.Sign(w.ctx, w.st, w.keys.vals[3], desc); err != nil {
				t.Fatal(err)
			}
			return d
		}, []string{short(k.rogue.Public().Fingerprint) + "/unknown_validator", short(k.vals[3].Public().Fingerprint) + "/zero_stake"}},
	}
	base := newWorld(t, k, []string{"a", "b"}, []uint64{100, 200, 300, 0})
	honest(base)
	want := base.compute(nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, k, []string{"a", "b"}, []uint64{100, 200, 300, 0})
			honest(w)
			d := tc.add(w)
			rec := w.compute(nil)
			got := exclusionsOf(rec, d)
			slices.Sort(got)
			slices.Sort(tc.want)
			if !slices.Equal(got, tc.want) {
				t.Errorf("exclusions of the verdict: got %v, want %v", got, tc.want)
			}
			if !slices.ContainsFunc(rec.Inputs.Verdicts, func(v VerdictInput) bool { return v.Verdict == d }) {
				t.Errorf("the verdict is not among the recorded inputs")
			}
			// The honest consensus on miner 0 stands: a duplicate with an
			// earlier sequence number, like every other excluded vote, changes
			// nothing.
			if g, w0 := result(t, rec, w.miners[0].reveal.Digest), result(t, want, base.miners[0].reveal.Digest); g.Score.Cmp(w0.Score) != 0 || g.Status != w0.Status || g.Votes != w0.Votes {
				t.Errorf("miner 0: got %s %s (%d votes), want %s %s (%d votes)", g.Status, g.Score, g.Votes, w0.Status, w0.Score, w0.Votes)
			}
		})
	}
}

// TestConsensusFigures checks the record of a small round by hand: stakes 100,
// 200, 300 (quorum 2/5 of 600 = 240); miner 0 passed by all three (1/2, 3/5,
// 7/10), miner 1 rejected by the validator of stake 300 only, miner 2 passed
// by the validator of stake 100 only (quorum not met).
func TestConsensusFigures(t *testing.T) {
	k := newKeys(t, 3, 3)
	w := newWorld(t, k, []string{"a", "b", "c"}, []uint64{100, 200, 300})
	honest(w)
	w.verdict(k.vals[2], 1, rollouts.StatusRejected, "9/10", 11, nil) // a rejected verdict votes 0, not its claim
	w.verdict(k.vals[0], 2, rollouts.StatusPassed, "1", 11, nil)
	rec := w.compute(nil)

	if rec.ActiveStake != 600 || rec.QuorumStake.String() != "240" {
		t.Errorf("active %d quorum %s, want 600 and 240", rec.ActiveStake, rec.QuorumStake)
	}
	// Stake percentile 10/90 over 100+200+300: lower point 60 falls in the
	// 1/2 vote, upper point 540 in the 7/10 vote: no clipping.
	// (100*1/2 + 200*3/5 + 300*7/10)/600 = 380/600 = 19/30.
	r0 := result(t, rec, w.miners[0].reveal.Digest)
	if r0.Status != scoring.StatusPassed || r0.Score.String() != "19/30" || r0.ReportingStake != 600 {
		t.Errorf("miner 0: %s %s stake %d, want passed 19/30 stake 600", r0.Status, r0.Score, r0.ReportingStake)
	}
	r1 := result(t, rec, w.miners[1].reveal.Digest)
	if r1.Status != scoring.StatusRejected || r1.Score.String() != "0" || r1.RejectedStake != 300 {
		t.Errorf("miner 1: %s %s rejected stake %d, want rejected 0 with 300", r1.Status, r1.Score, r1.RejectedStake)
	}
	r2 := result(t, rec, w.miners[2].reveal.Digest)
	if r2.Status != scoring.StatusUndetermined || r2.QuorumMet {
		t.Errorf("miner 2: %s quorum %v, want undetermined without quorum", r2.Status, r2.QuorumMet)
	}
	if rec.Seat.Outcome != scoring.SeatTaken || rec.Seat.Holder != w.miners[0].submission.Digest || rec.Seat.HolderScore.String() != "19/30" {
		t.Errorf("seat %+v, want taken by miner 0 at 19/30", rec.Seat)
	}
	// Only miner 0 passed: all 65535 units, nothing burnt.
	wantW := Weights{Miners: []MinerWeight{{Miner: k.miners[0].Public().Fingerprint, Reveal: w.miners[0].reveal.Digest,
		Submission: w.miners[0].submission.Digest, Score: scoring.NewRatio(19, 30), Weight: scoring.NewRatio(1, 1), Units: 65535}}}
	if got, want := encodeAny(t, rec.Weights), encodeAny(t, wantW); got != want {
		t.Errorf("weights %s, want %s", got, want)
	}
	if len(rec.Counted) != 5 || len(rec.Excluded) != 0 {
		t.Errorf("%d counted, %d excluded; want 5 and 0", len(rec.Counted), len(rec.Excluded))
	}

	// An incumbent recorded at 3/5 defends with 3/5 x 1.03 = 309/500 < 19/30:
	// taken. One recorded at 2/3 (d = 3/100 still) needs more than 103/150 >
	// 19/30: kept. A recorded score above max_score is refused.
	old := digest.FromString("old champion")
	for _, tc := range []struct {
		score   scoring.Ratio
		outcome scoring.SeatOutcome
	}{{scoring.NewRatio(3, 5), scoring.SeatTaken}, {scoring.NewRatio(2, 3), scoring.SeatKept}} {
		if got := w.compute(&Incumbent{Submission: old, Score: tc.score}).Seat; got.Outcome != tc.outcome {
			t.Errorf("incumbent at %s: %s (threshold %s), want %s", tc.score, got.Outcome, got.Threshold, tc.outcome)
		}
	}
	_, err := Compute(w.ctx, w.st, Request{Round: w.round.Digest, Stakes: w.stakes, Rules: w.rules, Incumbent: &Incumbent{Submission: old, Score: scoring.NewRatio(2, 1)}})
	if !errors.Is(err, ErrInput) {
		t.Errorf("incumbent above max_score: %v, want ErrInput", err)
	}
}

func encodeAny(t *testing.T, v any) string {
	t.Helper()
	b, err := bundle.Canonical(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWeightsRounding checks the u16 vector: units are floored, the burn entry
// takes the remainder, and the vector sums to 65535.
func TestWeightsRounding(t *testing.T) {
	res := []Result{
		{Reveal: "sha256:a1", Miner: "m1", Status: scoring.StatusPassed, Score: scoring.NewRatio(1, 3)},
		{Reveal: "sha256:a2", Miner: "m2", Status: scoring.StatusPassed, Score: scoring.NewRatio(1, 3)},
		{Reveal: "sha256:a3", Miner: "m3", Status: scoring.StatusPassed, Score: scoring.NewRatio(1, 3)},
		{Reveal: "sha256:a4", Miner: "m1", Status: scoring.StatusPassed, Score: scoring.NewRatio(1, 6)}, // m1's worse entry
		{Reveal: "sha256:a5", Miner: "m4", Status: scoring.StatusRejected, Score: scoring.NewRatio(1, 1)},
	}
	w := weights(res, scoring.SeatDecision{}, scoring.WeightsProportional)
	// Each of three equal miners: 65535/3 = 21845 exactly, no burn.
	var sum int
	for _, m := range w.Miners {
		if m.Units != 21845 || m.Weight.String() != "1/3" {
			t.Errorf("%s: %d units, weight %s; want 21845, 1/3", m.Miner, m.Units, m.Weight)
		}
		sum += int(m.Units)
	}
	if len(w.Miners) != 3 || w.Miners[0].Reveal != "sha256:a1" || sum+int(w.BurnUnits) != UnitsTotal || w.BurnUnits != 0 {
		t.Errorf("weights %+v", w)
	}
	// 1 : 1 : 2 of 65535: 16383.75, 16383.75, 32767.5 floor to 16383, 16383,
	// 32767; the burn gets 2.
	w = weights([]Result{
		{Reveal: "sha256:b1", Miner: "m1", Status: scoring.StatusPassed, Score: scoring.NewRatio(1, 4)},
		{Reveal: "sha256:b2", Miner: "m2", Status: scoring.StatusPassed, Score: scoring.NewRatio(1, 4)},
		{Reveal: "sha256:b3", Miner: "m3", Status: scoring.StatusPassed, Score: scoring.NewRatio(1, 2)},
	}, scoring.SeatDecision{}, scoring.WeightsProportional)
	got := []uint16{w.Miners[0].Units, w.Miners[1].Units, w.Miners[2].Units, w.BurnUnits}
	if !slices.Equal(got, []uint16{16383, 16383, 32767, 2}) {
		t.Errorf("units %v, want [16383 16383 32767 2]", got)
	}
	// No passed entry, or only zero scores: everything burns.
	for _, rs := range [][]Result{nil, {{Reveal: "sha256:c1", Miner: "m1", Status: scoring.StatusPassed}}} {
		w := weights(rs, scoring.SeatDecision{}, scoring.WeightsProportional)
		if w.BurnUnits != UnitsTotal || (len(w.Miners) == 1 && w.Miners[0].Units != 0) {
			t.Errorf("weights of %v: %+v, want all burnt", rs, w)
		}
	}
}

// TestSeatWeights: under the seat rule the holder's miner takes every unit,
// whatever the other scores; a vacant seat, or a holder without an entry in
// the round, burns everything.
func TestSeatWeights(t *testing.T) {
	res := []Result{
		{Reveal: "sha256:a1", Submission: "sha256:s1", Miner: "m1", Status: scoring.StatusPassed, Score: scoring.NewRatio(15, 1)},
		{Reveal: "sha256:a2", Submission: "sha256:s2", Miner: "m2", Status: scoring.StatusPassed, Score: scoring.NewRatio(14, 1)},
	}
	w := weights(res, scoring.SeatDecision{Holder: "sha256:s2"}, scoring.WeightsSeat)
	if len(w.Miners) != 1 || w.Miners[0].Miner != "m2" || w.Miners[0].Units != UnitsTotal || w.BurnUnits != 0 || w.Miners[0].Score.String() != "14" {
		t.Errorf("held seat: %+v", w)
	}
	for _, holder := range []string{"", "sha256:elsewhere"} {
		w := weights(res, scoring.SeatDecision{Holder: digest.Digest(holder)}, scoring.WeightsSeat)
		if len(w.Miners) != 0 || w.BurnUnits != UnitsTotal {
			t.Errorf("holder %q: %+v, want all burnt", holder, w)
		}
	}
}

// TestCopiesDoNotShareVotes: two miners reveal the same submission; the
// validators pass the original and reject the copy later. The copy's verdicts
// are not duplicates of the original's: each entry keeps its own consensus.
func TestCopiesDoNotShareVotes(t *testing.T) {
	k := newKeys(t, 2, 3)
	w := newWorld(t, k, []string{"same", "same"}, []uint64{100, 200, 300})
	if w.miners[0].submission.Digest != w.miners[1].submission.Digest {
		t.Fatal("the fixture should make one submission revealed twice")
	}
	for i := range 3 {
		w.verdict(k.vals[i], 0, rollouts.StatusPassed, "1/2", 1, nil)
		w.verdict(k.vals[i], 1, rollouts.StatusRejected, "", 2, func(v *rollouts.Verdict) { v.Reason = protocol.ReasonCopy })
	}
	rec := w.compute(nil)
	if r := result(t, rec, w.miners[0].reveal.Digest); r.Status != scoring.StatusPassed || r.Votes != 3 {
		t.Errorf("original: %s with %d votes, want passed with 3", r.Status, r.Votes)
	}
	if r := result(t, rec, w.miners[1].reveal.Digest); r.Status != scoring.StatusRejected || r.Votes != 3 {
		t.Errorf("copy: %s with %d votes, want rejected with 3", r.Status, r.Votes)
	}
	if len(rec.Excluded) != 0 {
		t.Errorf("excluded %+v, want none", rec.Excluded)
	}
}

// TestEntryChecks: reveals that do not open their commitment, or are not signed
// by the committing key, are not entries of the round, and verdicts on them
// are not gathered.
func TestEntryChecks(t *testing.T) {
	k := newKeys(t, 2, 1)
	w := newWorld(t, k, []string{"a", "b"}, []uint64{1})
	sec, err := protocol.LoadSecret(w.st, mustCommitment(t, w, 1))
	if err != nil {
		t.Fatal(err)
	}
	commit, _ := w.st.Resolve(w.ctx, sec.CommitmentArtifact.String())
	forged := []struct {
		name   string
		signer *bundle.Signer
		rec    protocol.Reveal
	}{
		{"wrong salt", k.miners[1], protocol.Reveal{Commitment: sec.Commitment, Round: sec.Round, Miner: sec.Miner, Submission: sec.Submission, Salt: strings.Repeat("00", protocol.SaltSize)}},
		{"wrong submission", k.miners[1], protocol.Reveal{Commitment: sec.Commitment, Round: sec.Round, Miner: sec.Miner, Submission: w.miners[0].submission.Digest, Salt: sec.Salt}},
		{"another key", k.rogue, protocol.Reveal{Commitment: sec.Commitment, Round: sec.Round, Miner: sec.Miner, Submission: sec.Submission, Salt: sec.Salt}},
	}
	for _, f := range forged {
		d, err := bundle.WriteSigned(w.ctx, w.st, f.signer, bundle.Artifact{Kind: protocol.KindReveal, Record: f.rec, Subject: &commit, Created: "1970-01-01T00:00:01Z"})
		if err != nil {
			t.Fatal(err)
		}
		if e, ok, err := checkEntry(w.ctx, w.st, w.round.Digest, d); err != nil || ok {
			t.Errorf("%s: checkEntry = %v, %v, %v; want not an entry", f.name, e, ok, err)
		}
	}
	rec := w.compute(nil)
	want := []digest.Digest{w.miners[0].reveal.Digest, w.miners[1].reveal.Digest}
	slices.Sort(want)
	if !slices.Equal(rec.Inputs.Reveals, want) {
		t.Errorf("reveals %v, want the two honest ones %v", rec.Inputs.Reveals, want)
	}
}

func mustCommitment(t *testing.T, w *world, m int) string {
	t.Helper()
	var rv protocol.Reveal
	if _, err := protocol.LoadAs(w.ctx, w.st, w.miners[m].reveal, protocol.KindReveal, &rv); err != nil {
		t.Fatal(err)
	}
	return rv.Commitment
}

// TestPermutationInvariance: the same artifacts written in different orders into
// different stores, and the candidates handed to derive in any order, give the
// same record bytes.
func TestPermutationInvariance(t *testing.T) {
	k := newKeys(t, 3, 3)
	type v struct {
		val, miner int
		status     string
		score      string
		seq        uint64
	}
	vs := []v{
		{0, 0, rollouts.StatusPassed, "1/2", 1}, {1, 0, rollouts.StatusPassed, "3/5", 1}, {2, 0, rollouts.StatusPassed, "7/10", 1},
		{0, 1, rollouts.StatusRejected, "", 2}, {1, 1, rollouts.StatusPassed, "1", 2}, {2, 1, rollouts.StatusPassed, "9/10", 2},
		{0, 0, rollouts.StatusPassed, "1/4", 3}, {2, 2, rollouts.StatusInfraError, "", 3}, {1, 2, rollouts.StatusPassed, "1/3", 3},
	}
	var records [][]byte
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 3 {
		w := newWorld(t, k, []string{"a", "b", "c"}, []uint64{100, 200, 300})
		order := rng.Perm(len(vs))
		if trial == 0 {
			order = []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
		}
		for _, i := range order {
			w.verdict(k.vals[vs[i].val], vs[i].miner, vs[i].status, vs[i].score, vs[i].seq, nil)
		}
		records = append(records, encode(t, w.compute(nil)))

		// Candidates in shuffled order, directly.
		round, err := loadRound(w.ctx, w.st, w.round.Digest)
		if err != nil {
			t.Fatal(err)
		}
		reveals, err := discoverReveals(w.ctx, w.st, round.desc)
		if err != nil {
			t.Fatal(err)
		}
		rng.Shuffle(len(reveals), func(i, j int) { reveals[i], reveals[j] = reveals[j], reveals[i] })
		rec, err := derive(w.ctx, w.st, round, reveals, func(es []entry) ([]verdictCandidate, error) {
			c, err := discoverVerdicts(w.ctx, w.st, es)
			rng.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
			return c, err
		}, Request{Round: w.round.Digest, Stakes: w.stakes, Rules: w.rules})
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, encode(t, rec))
	}
	for i := 1; i < len(records); i++ {
		if string(records[i]) != string(records[0]) {
			t.Fatalf("record %d differs from record 0:\n%s\n%s", i, records[i], records[0])
		}
	}
}

// TestRunReplay writes a record with Run, publishes it to another store, fetches
// it into a third and replays it there: identical. Verdicts and signatures added
// later do not change the replay; an altered record re-signed by the same key
// differs, and the difference is named.
func TestRunReplay(t *testing.T) {
	k := newKeys(t, 2, 3)
	w := newWorld(t, k, []string{"a", "b"}, []uint64{100, 200, 300})
	honest(w)
	w.verdict(k.vals[0], 1, rollouts.StatusRejected, "", 11, nil)
	auditor := newSigner(t)
	inc := &Incumbent{Submission: digest.FromString("old champion"), Score: scoring.NewRatio(3, 5)}
	// The stake table is the owner's artifact: the auditor must say it trusts
	// the owner's key.
	_, err := Run(w.ctx, w.st, auditor, Options{Round: w.round.Digest.String(), Stakes: Input{Ref: w.stakes.String()},
		Rules: Input{JSON: []byte(`{"max_score":"1"}`)}, Incumbent: inc})
	if !errors.Is(err, bundle.ErrNoTrustedSignature) || !strings.Contains(err.Error(), "stake table") ||
		!strings.Contains(err.Error(), "signed by "+k.owner.Public().Fingerprint[:16]) {
		t.Fatalf("a stake table signed by an untrusted key: %v", err)
	}
	trusted := []*bundle.PublicKey{auditor.Public(), k.owner.Public()}
	out, err := Run(w.ctx, w.st, auditor, Options{Round: w.round.Digest.String(), Stakes: Input{Ref: w.stakes.String()},
		Rules: Input{JSON: []byte(`{"max_score":"1"}`)}, Incumbent: inc, Trusted: []*bundle.PublicKey{k.owner.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	// 19/30 > 3/5 x 1.03 = 309/500: the challenger takes the seat.
	if out.Record.Seat.Outcome != scoring.SeatTaken || out.Record.Seat.Threshold.String() != "309/500" {
		t.Errorf("seat %+v, want taken over the threshold 309/500", out.Record.Seat)
	}
	// The same inputs written again give the same artifact.
	again, err := Run(w.ctx, w.st, auditor, Options{Round: w.round.Digest.String(), Stakes: Input{Ref: w.stakes.String()},
		Rules: Input{JSON: []byte(`{"max_score":"1"}`)}, Incumbent: inc, Trusted: []*bundle.PublicKey{k.owner.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	if again.Artifact.Digest != out.Artifact.Digest {
		t.Errorf("second run wrote %s, first %s", again.Artifact.Digest, out.Artifact.Digest)
	}

	shared, err := cas.Init(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := Publish(w.ctx, w.st, shared, out); err != nil {
		t.Fatal(err)
	}
	if err := shared.Flush(); err != nil {
		t.Fatal(err)
	}
	fresh, err := cas.Init(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := Fetch(w.ctx, shared, fresh, out.Artifact.OCI()); err != nil {
		t.Fatal(err)
	}
	// Trusting the record's signer is not enough: the stake table must be
	// signed by a trusted key too.
	if _, err := Replay(w.ctx, fresh, out.Artifact.Digest, []*bundle.PublicKey{auditor.Public()}); !errors.Is(err, bundle.ErrNoTrustedSignature) ||
		!strings.Contains(err.Error(), "stake table") {
		t.Fatalf("replay trusting only the record's signer: %v", err)
	}
	if _, err := Replay(w.ctx, fresh, out.Artifact.Digest, nil); !errors.Is(err, replay.ErrNoTrustedKeys) {
		t.Fatalf("replay trusting no key: %v", err)
	}
	res, err := Replay(w.ctx, fresh, out.Artifact.Digest, trusted)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != replay.Identical || res.Recomputed != out.Artifact.Digest {
		t.Fatalf("replay in a fresh store: %+v", res)
	}

	// Later verdicts and signatures are not inputs of the record.
	late := w.verdict(k.vals[1], 1, rollouts.StatusPassed, "1", 12, nil)
	desc, _ := w.st.Resolve(w.ctx, w.verdict(k.vals[2], 1, rollouts.StatusPassed, "1", 13, nil).String())
	if _, err := bundle.Sign(w.ctx, w.st, k.vals[0], desc); err != nil {
		t.Fatal(err)
	}
	if res, err := Replay(w.ctx, w.st, out.Artifact.Digest, trusted); err != nil || res.Outcome != replay.Identical {
		t.Fatalf("replay after later verdicts (%s): %+v, %v", late, res, err)
	}

	if _, err := Replay(w.ctx, w.st, out.Artifact.Digest, []*bundle.PublicKey{k.rogue.Public()}); !errors.Is(err, replay.ErrUntrusted) {
		t.Errorf("replay trusting another key: %v, want ErrUntrusted", err)
	}

	// An altered record, signed by the same key: differs at the altered field.
	forged := out.Record
	forged.Results = slices.Clone(forged.Results)
	forged.Results[0].Score = scoring.NewRatio(1, 1)
	round, err := loadRound(w.ctx, w.st, w.round.Digest)
	if err != nil {
		t.Fatal(err)
	}
	subj := round.desc
	fd, err := writeRecord(w.ctx, w.st, auditor, forged, subj, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err = Replay(w.ctx, w.st, fd.Digest, trusted)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != replay.Differs || res.Recomputed != out.Artifact.Digest || len(res.Diffs) != 1 || res.Diffs[0].Path != "results[0].score" {
		t.Errorf("replay of an altered record: %+v", res)
	}
}

// TestReplayMissingInput: a record whose verdict was never fetched is an error
// naming the missing input, not a difference.
func TestReplayMissingInput(t *testing.T) {
	k := newKeys(t, 1, 3)
	w := newWorld(t, k, []string{"a"}, []uint64{100, 200, 300})
	honest(w)
	s := newSigner(t)
	trusted := []*bundle.PublicKey{s.Public(), k.owner.Public()}
	out, err := Run(w.ctx, w.st, s, Options{Round: w.round.Digest.String(), Stakes: Input{Ref: w.stakes.String()}, Trusted: trusted})
	if err != nil {
		t.Fatal(err)
	}
	partial, err := cas.Init(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Only the record and its subject graph: no verdicts, no stakes, no rules.
	if _, err := cas.Copy(w.ctx, w.st, partial, out.Artifact.OCI(), cas.CopyOptions{Subjects: true, Referrers: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := Replay(w.ctx, partial, out.Artifact.Digest, trusted); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("replay without inputs: %v, want ErrNotFound", err)
	}
}

// TestLeaderboard: cells by status, the latest verdict per validator, carried
// results from an earlier round, reward status and seat from the latest
// consensus record a trusted key signed, and only trusted signers counted.
func TestLeaderboard(t *testing.T) {
	k := newKeys(t, 3, 3)
	w := newWorld(t, k, []string{"a", "b", "c"}, []uint64{100, 200, 300})
	honest(w)
	w.verdict(k.vals[0], 1, rollouts.StatusPassed, "1", 1, nil)
	w.verdict(k.vals[0], 1, rollouts.StatusRejected, "", 2, nil) // the latest
	w.verdict(k.vals[1], 1, rollouts.StatusInfraError, "", 3, nil)
	w.verdict(k.vals[1], 2, rollouts.StatusPassed, "1", 1, func(v *rollouts.Verdict) { v.Submission = w.miners[0].submission.Digest }) // stale: never shown
	w.verdict(k.rogue, 2, rollouts.StatusPassed, "1", 1, nil)                                                                          // not in the stake table

	// An earlier round where validator 2 passed miner 1.
	cu, _ := protocol.ParseWindow("2026-11-01T00:00:00Z")
	ru, _ := protocol.ParseWindow("2026-11-02T00:00:00Z")
	earlier, err := protocol.OpenRound(w.ctx, w.st, k.owner, w.task, cu, ru, "")
	if err != nil {
		t.Fatal(err)
	}
	old := w.reveal(k.miners[1], "b-old", earlier, 9)
	v := w.record(old, earlier.Digest, rollouts.StatusPassed, "4/5", 1)
	oldVerdict := w.write(k.vals[2], v, old.submission)

	out, err := Run(w.ctx, w.st, k.owner, Options{Round: w.round.Digest.String(), Stakes: Input{Ref: w.stakes.String()}, Rules: Input{JSON: []byte(`{"max_score":"1"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	keys := func(ss ...*bundle.Signer) []*bundle.PublicKey {
		var out []*bundle.PublicKey
		for _, s := range ss {
			out = append(out, s.Public())
		}
		return out
	}
	staked := keys(k.vals[0], k.vals[1], k.vals[2], k.owner)
	if _, err := Leaderboard(w.ctx, w.st, BoardRequest{Round: w.round.Digest.String()}); !errors.Is(err, ErrInput) {
		t.Errorf("no trusted key: %v, want ErrInput", err)
	}
	b, err := Leaderboard(w.ctx, w.st, BoardRequest{Round: w.round.Digest.String(), Trusted: staked, CarryFrom: earlier.Digest.String()})
	if err != nil {
		t.Fatal(err)
	}
	if b.Consensus != out.Artifact.Digest || b.Seat == nil || b.Seat.HolderMiner != k.miners[0].Public().Fingerprint {
		t.Errorf("consensus %s, seat %+v: want the owner's record, miner 0 holding the seat", b.Consensus, b.Seat)
	}
	if want := map[string]int{LeftUntrusted: 1, LeftOtherEntry: 1, LeftSuperseded: 1}; !maps.Equal(b.LeftOut, want) {
		t.Errorf("left out %v, want %v (the rogue's, the stale and the superseded verdict)", b.LeftOut, want)
	}
	col := map[string]int{}
	for i, fp := range b.Validators {
		col[fp] = i
	}
	if len(b.Validators) != 3 || slices.Contains(b.Validators, k.rogue.Public().Fingerprint) {
		t.Fatalf("validators %v, want the three of the stake table", b.Validators)
	}
	rows := map[string]scoring.Row{}
	for _, r := range b.Rows {
		rows[r.Miner] = r
	}
	m0, m1, m2 := rows[k.miners[0].Public().Fingerprint], rows[k.miners[1].Public().Fingerprint], rows[k.miners[2].Public().Fingerprint]
	if m0.Reward != scoring.RewardRewarded || m0.Score.String() != "19/30" || m0.Audit.Passed != 3 {
		t.Errorf("miner 0 row %+v", m0)
	}
	cells := m1.Cells
	if c := cells[col[k.vals[0].Public().Fingerprint]]; c.Status != scoring.CellRejected || c.Score.Sign() != 0 {
		t.Errorf("miner 1, validator 0: %+v, want rejected 0 (the latest verdict)", c)
	}
	if c := cells[col[k.vals[1].Public().Fingerprint]]; c.Status != scoring.CellInProgress {
		t.Errorf("miner 1, validator 1: %+v, want in progress", c)
	}
	if c := cells[col[k.vals[2].Public().Fingerprint]]; c.Status != scoring.CellCarried || c.CarriedFrom != earlier.Digest.String() || c.Score.String() != "4/5" || c.Verdict != oldVerdict {
		t.Errorf("miner 1, validator 2: %+v, want carried 4/5 from the earlier round", c)
	}
	if m1.Reward != scoring.RewardUnrewarded {
		t.Errorf("miner 1 reward %s, want unrewarded", m1.Reward)
	}
	if m2.Audit.Empty != 3 || m2.Reward != scoring.RewardUnrewarded {
		t.Errorf("miner 2 row %+v, want three empty cells", m2)
	}

	// Trusting the rogue but not the record's signer: every trusted signer
	// has a column, reward is pending, and the record cannot be named.
	withRogue := keys(k.vals[0], k.vals[1], k.vals[2], k.rogue)
	b, err = Leaderboard(w.ctx, w.st, BoardRequest{Round: w.round.Digest.String(), Trusted: withRogue})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Validators) != 4 || !slices.Contains(b.Validators, k.rogue.Public().Fingerprint) || b.Consensus != "" || b.Seat != nil {
		t.Errorf("validators %v, consensus %q: want the three and the rogue, no record", b.Validators, b.Consensus)
	}
	for _, r := range b.Rows {
		if r.Reward != scoring.RewardPending || r.Scored {
			t.Errorf("row %s: reward %s, scored %v; want pending, unscored", short(r.Miner), r.Reward, r.Scored)
		}
	}
	if _, err := Leaderboard(w.ctx, w.st, BoardRequest{Round: w.round.Digest.String(), Trusted: withRogue, Consensus: out.Artifact.Digest.String()}); !errors.Is(err, ErrInput) {
		t.Errorf("a record no trusted key signed: %v, want ErrInput", err)
	}
	// Trusting the rogue and the record's signer: the stake table leaves the
	// rogue out.
	b, err = Leaderboard(w.ctx, w.st, BoardRequest{Round: w.round.Digest.String(), Trusted: keys(k.rogue, k.owner)})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Validators) != 0 || b.LeftOut[LeftNotStaked] != 1 || b.LeftOut[LeftUntrusted] == 0 {
		t.Errorf("validators %v, left out %v: want none, the rogue's not staked", b.Validators, b.LeftOut)
	}
}

// TestSeatHolderRejectedThisRound: under the seat rule, a holder that keeps
// the seat on its recorded score while its own entry is rejected this round
// is paid, and its weight entry carries the entry's result score of this
// round, 0; the seat shows the recorded score (CONSENSUS.md 8.3).
func TestSeatHolderRejectedThisRound(t *testing.T) {
	k := newKeys(t, 2, 3)
	w := newWorld(t, k, []string{"a", "b"}, []uint64{100, 200, 300})
	rules := scoring.DefaultRules()
	rules.MaxScore = scoring.NewRatio(1, 1)
	rules.Weights.Rollouts = scoring.WeightsSeat
	rd, err := WriteRules(w.ctx, w.st, k.owner, rules, "")
	if err != nil {
		t.Fatal(err)
	}
	w.rules = rd.Digest
	for i := range 3 {
		w.verdict(k.vals[i], 0, rollouts.StatusRejected, "", 1, nil)
		w.verdict(k.vals[i], 1, rollouts.StatusPassed, "1/2", 1, nil)
	}
	rec := w.compute(&Incumbent{Submission: w.miners[0].submission.Digest, Score: scoring.NewRatio(3, 5)})
	if rec.Seat.Outcome != scoring.SeatKept || rec.Seat.Holder != w.miners[0].submission.Digest || rec.Seat.HolderScore.String() != "3/5" {
		t.Fatalf("seat %+v, want kept by miner 0's submission at 3/5", rec.Seat)
	}
	if r := result(t, rec, w.miners[0].reveal.Digest); r.Status != scoring.StatusRejected {
		t.Fatalf("miner 0's entry %s, want rejected", r.Status)
	}
	want := `{"burn_units":0,"miners":[{"miner":"` + k.miners[0].Public().Fingerprint + `","reveal":"` + w.miners[0].reveal.Digest.String() +
		`","score":"0","submission":"` + w.miners[0].submission.Digest.String() + `","units":65535,"weight":"1"}]}`
	if got := encodeAny(t, rec.Weights); got != want {
		t.Errorf("weights %s, want %s", got, want)
	}
}
