package consensus

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/fixtures/optask"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/scoring"
)

// TestRunsFromVerdicts turns signed optimizer verdicts into frontier runs: the
// higher loss of two validators counts (and the runs they report differently
// are listed as reconciled), untrusted and unsigned verdicts and
// rejected ones do not, at_sec is the reveal's first-seen time after launch,
// and the fold confirms the submission whose two runs clear the bar.
func TestRunsFromVerdicts(t *testing.T) {
	ctx := context.Background()
	k := newKeys(t, 3, 2)
	dir := t.TempDir()
	st, err := cas.Init(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, st: st, keys: k, dir: dir}
	taskDir := filepath.Join(dir, "task")
	if err := optask.Generate(taskDir, optask.Config{}); err != nil {
		t.Fatal(err)
	}
	if w.task, err = protocol.CreateTask(ctx, st, k.owner, "optimizer", taskDir, ""); err != nil {
		t.Fatal(err)
	}
	cu, _ := protocol.ParseWindow("2026-12-01T00:00:00Z")
	ru, _ := protocol.ParseWindow("2026-12-02T00:00:00Z")
	if w.round, err = protocol.OpenRound(ctx, st, k.owner, w.task, cu, ru, ""); err != nil {
		t.Fatal(err)
	}
	for i, c := range []string{"a", "b", "c"} {
		w.miners = append(w.miners, w.reveal(k.miners[i], c, w.round, byte(i)))
	}
	verdict := func(s *bundle.Signer, m int, status, seen string, losses ...int64) {
		e := w.miners[m]
		v := optimizer.Verdict{VerdictHead: protocol.VerdictHead{Protocol: "optimizer", Status: status,
			Submission:  e.submission.Digest,
			Inputs:      protocol.Inputs{Task: w.task.Digest, Round: w.round.Digest, Reveal: e.reveal.Digest, Miner: e.key.Public().Fingerprint},
			RevealCheck: protocol.RevealCheck{Status: protocol.StatusAccepted, RevealSeen: protocol.Seen{Time: seen}}},
			BarMicroNats: optask.ReferenceBaseline, FloorMicroNats: 1000, Runs: []optimizer.Run{}}
		for i, l := range losses {
			l := l
			v.Runs = append(v.Runs, optimizer.Run{Index: i, Status: optimizer.RunCompleted, HeldOutLossMicroNats: &l})
		}
		w.write(s, v, e.submission)
	}
	verdict(k.vals[0], 0, "passed", "2026-12-01T06:00:00Z", 380_000, 390_000)
	verdict(k.vals[1], 0, "passed", "2026-12-01T07:00:00Z", 381_000, 392_000)
	verdict(k.vals[0], 1, "passed", "2026-12-01T05:00:00Z", 500_000)
	verdict(k.rogue, 1, "passed", "2026-12-01T05:00:00Z", 600_000)
	verdict(nil, 1, "passed", "2026-12-01T05:00:00Z", 700_000)
	verdict(k.vals[0], 2, "rejected", "2026-12-01T05:00:00Z")

	launch, _ := time.Parse(time.RFC3339, "2026-12-01T00:00:00Z")
	trusted := []*bundle.PublicKey{k.vals[0].Public(), k.vals[1].Public()}
	got, err := RunsFromVerdicts(ctx, st, RunsRequest{Round: w.round.Digest, Launch: launch, Trusted: trusted})
	if err != nil {
		t.Fatal(err)
	}
	a, b := w.miners[0].submission.Digest, w.miners[1].submission.Digest
	want := []scoring.Run{
		{Submission: b, Author: k.miners[1].Public().Fingerprint, RunIndex: 0, LossMicroNats: 500_000, AtSec: 5 * 3600},
		{Submission: a, Author: k.miners[0].Public().Fingerprint, RunIndex: 0, LossMicroNats: 381_000, AtSec: 7 * 3600},
		{Submission: a, Author: k.miners[0].Public().Fingerprint, RunIndex: 1, LossMicroNats: 392_000, AtSec: 7 * 3600},
	}
	if len(got.Runs) != len(want) || got.BaselineMicroNats != optask.ReferenceBaseline || len(got.Verdicts) != 3 {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got.Runs[i] != want[i] {
			t.Errorf("run %d: got %+v, want %+v", i, got.Runs[i], want[i])
		}
	}
	// The two validators report a's runs differently (as two machines whose
	// budget allowed different steps would): each run is listed with both
	// reports; b's single trusted report is not.
	if len(got.Reconciled) != 2 || got.Reconciled[0].Submission != a || got.Reconciled[0].RunIndex != 0 || got.Reconciled[1].RunIndex != 1 {
		t.Fatalf("reconciled: %+v", got.Reconciled)
	}
	for i, r := range got.Reconciled {
		if len(r.Reports) != 2 {
			t.Fatalf("reconciled run %d: %+v", i, r.Reports)
		}
		l0, l1 := r.Reports[0].LossMicroNats, r.Reports[1].LossMicroNats
		if min(l0, l1) != []int64{380_000, 390_000}[i] || max(l0, l1) != got.Runs[i+1].LossMicroNats {
			t.Errorf("reconciled run %d: %+v", i, r.Reports)
		}
	}
	h, err := scoring.FoldFrontier(got.BaselineMicroNats, got.Runs, scoring.DefaultRules().Frontier)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 1 || h.Events[0].Submission != a || h.BarMicroNats != 392_000 {
		t.Fatalf("frontier: %+v", h)
	}

	// What was left out, by reason: the rogue's verdict, the unsigned one and
	// the rejected one.
	if want := map[string]int{LeftUntrusted: 1, LeftUnsigned: 1, LeftNotPassed: 1}; !maps.Equal(got.LeftOut, want) {
		t.Errorf("left out %v, want %v", got.LeftOut, want)
	}

	// Trusting the rogue alone counts its verdict, and leaves out the others.
	rogue, err := RunsFromVerdicts(ctx, st, RunsRequest{Round: w.round.Digest, Launch: launch, Trusted: []*bundle.PublicKey{k.rogue.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rogue.Runs) != 1 || rogue.Runs[0].Submission != b || rogue.Runs[0].LossMicroNats != 600_000 || rogue.LeftOut[LeftUntrusted] != 4 {
		t.Fatalf("trusting the rogue: %+v", rogue)
	}

	// Without trusted keys nothing is counted: an aggregate never trusts
	// whoever signed.
	if _, err := RunsFromVerdicts(ctx, st, RunsRequest{Round: w.round.Digest, Launch: launch}); !errors.Is(err, ErrInput) {
		t.Fatalf("no trusted keys: %v, want ErrInput", err)
	}
}
