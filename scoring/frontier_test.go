package scoring

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/feval/feval/internal/detrand"
	"github.com/opencontainers/go-digest"
)

func TestFoldFrontier(t *testing.T) {
	run := func(sub, author string, idx uint64, loss, at int64) Run {
		return Run{Submission: digest.Digest("sha256:" + sub), Author: author, RunIndex: idx, LossMicroNats: loss, AtSec: at}
	}
	// Baseline 3.000000 nats, floor 1000 micro-nats.
	runs := []Run{
		run("a", "alice", 0, 2_990_000, 10),  // clears 3_000_000 by 10_000: pending
		run("a", "alice", 1, 2_995_000, 20),  // confirm: worse run 2_995_000 clears by 5_000: bar moves
		run("b", "bob", 0, 2_994_500, 30),    // beats the bar by 500 < floor: not cleared
		run("b", "bob", 1, 2_980_000, 40),    // b is decided: ignored
		run("c", "carol", 0, 2_990_000, 50),  // pending
		run("c", "carol", 0, 2_990_000, 55),  // same run index again: ignored
		run("d", "dave", 0, 2_985_000, 60),   // pending
		run("d", "dave", 1, 2_986_000, 70),   // confirm: bar 2_995_000 -> 2_986_000 (the worse run)
		run("c", "carol", 1, 2_989_000, 80),  // first run 2_990_000 no longer clears 2_986_000: failed
		run("e", "erin", 0, 2_970_000, 90),   // pending
		run("e", "erin", 1, 2_985_500, 100),  // worse run beats 2_986_000 by 500 only: failed
		run("f", "frank", 0, 2_985_000, 110), // exactly the floor: pending, never confirmed
	}
	h, err := FoldFrontier(3_000_000, runs, FrontierRules{FloorMicroNats: 1000})
	if err != nil {
		t.Fatal(err)
	}
	wantEvents := []FrontierEvent{
		{Height: 1, Submission: "sha256:a", Author: "alice", FirstRun: 0, FirstLossMicroNats: 2_990_000, ConfirmRun: 1, ConfirmLossMicroNats: 2_995_000,
			PreviousBarMicroNats: 3_000_000, BarMicroNats: 2_995_000, ImprovementMicroNats: 5_000, AtSec: 20},
		{Height: 2, Submission: "sha256:d", Author: "dave", FirstRun: 0, FirstLossMicroNats: 2_985_000, ConfirmRun: 1, ConfirmLossMicroNats: 2_986_000,
			PreviousBarMicroNats: 2_995_000, BarMicroNats: 2_986_000, ImprovementMicroNats: 9_000, AtSec: 70},
	}
	if g, w := mustJSON(t, h.Events), mustJSON(t, wantEvents); g != w {
		t.Fatalf("events\n got %s\nwant %s", g, w)
	}
	wantOutcomes := []RunOutcome{RunPending, RunConfirmed, RunNotCleared, RunDecided, RunPending, RunRepeated,
		RunPending, RunConfirmed, RunConfirmFailed, RunPending, RunConfirmFailed, RunPending}
	wantBars := []int64{3_000_000, 3_000_000, 2_995_000, 2_995_000, 2_995_000, 2_995_000,
		2_995_000, 2_995_000, 2_986_000, 2_986_000, 2_986_000, 2_986_000}
	for i, d := range h.Decisions {
		if d.Outcome != wantOutcomes[i] || d.BarMicroNats != wantBars[i] {
			t.Errorf("run %d: outcome %s at bar %d, want %s at bar %d", i, d.Outcome, d.BarMicroNats, wantOutcomes[i], wantBars[i])
		}
	}
	if h.BarMicroNats != 2_986_000 || len(h.Pending) != 1 || h.Pending[0].Submission != "sha256:f" {
		t.Fatalf("bar %d, pending %v; want 2986000 and f pending", h.BarMicroNats, h.Pending)
	}
}

func TestFoldFrontierErrors(t *testing.T) {
	ok := Run{Submission: "sha256:a", Author: "alice", LossMicroNats: 1, AtSec: 5}
	cases := []struct {
		name     string
		baseline int64
		floor    int64
		runs     []Run
		is       error
	}{
		{"zero floor", 10, 0, nil, ErrInvalidRules},
		{"negative baseline", -1, 1, nil, nil},
		{"empty submission", 10, 1, []Run{{Author: "alice"}}, nil},
		{"empty author", 10, 1, []Run{{Submission: "sha256:a"}}, nil},
		{"negative loss", 10, 1, []Run{{Submission: "sha256:a", Author: "alice", LossMicroNats: -1}}, nil},
		{"negative time", 10, 1, []Run{{Submission: "sha256:a", Author: "alice", AtSec: -1}}, nil},
		{"out of time order", 10, 1, []Run{ok, {Submission: "sha256:b", Author: "bob", AtSec: 4}}, ErrRunOrder},
		{"author changes", 10, 1, []Run{ok, {Submission: "sha256:a", Author: "mallory", RunIndex: 1, AtSec: 6}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := FoldFrontier(c.baseline, c.runs, FrontierRules{FloorMicroNats: c.floor})
			if err == nil || (c.is != nil && !errors.Is(err, c.is)) {
				t.Fatalf("FoldFrontier() error = %v, want %v", err, c.is)
			}
		})
	}
}

func genRuns(src *detrand.Source) []Run {
	n := src.Range(0, 40)
	runs := make([]Run, n)
	var at int64
	for i := range runs {
		at += int64(src.Intn(3))
		sub := src.Intn(8)
		runs[i] = Run{
			Submission:    digest.Digest(fmt.Sprintf("sha256:%02x", sub)),
			Author:        fmt.Sprintf("author%d", sub%5),
			RunIndex:      uint64(src.Intn(3)),
			LossMicroNats: int64(src.Range(2_900_000, 3_001_000)),
			AtSec:         at,
		}
	}
	return runs
}

func TestFoldFrontierProperties(t *testing.T) {
	rules := FrontierRules{FloorMicroNats: 2000}
	for i := 0; i < 300; i++ {
		runs := genRuns(detrand.New("scoring/frontier-properties", seed(i)))
		h, err := FoldFrontier(3_000_000, runs, rules)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		// The bar only falls, each event by at least the floor, and the events
		// account for the whole fall. Every submission moves it at most once.
		bar, seen := int64(3_000_000), map[digest.Digest]bool{}
		for _, e := range h.Events {
			if e.PreviousBarMicroNats != bar || e.ImprovementMicroNats < rules.FloorMicroNats ||
				e.BarMicroNats != max(e.FirstLossMicroNats, e.ConfirmLossMicroNats) || e.FirstRun == e.ConfirmRun || seen[e.Submission] {
				t.Fatalf("case %d: bad event %+v after bar %d", i, e, bar)
			}
			seen[e.Submission] = true
			bar = e.BarMicroNats
		}
		if bar != h.BarMicroNats || len(h.Decisions) != len(runs) {
			t.Fatalf("case %d: final bar %d, events end at %d; %d decisions for %d runs", i, h.BarMicroNats, bar, len(h.Decisions), len(runs))
		}
		// Append-only: folding any prefix yields a prefix of the chain.
		for k := 0; k <= len(runs); k++ {
			p, err := FoldFrontier(3_000_000, runs[:k], rules)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Events) > len(h.Events) || mustJSON(t, p.Events) != mustJSON(t, h.Events[:len(p.Events)]) ||
				!slices.Equal(outcomes(p.Decisions), outcomes(h.Decisions[:k])) {
				t.Fatalf("case %d: prefix of %d runs is not a prefix of the history", i, k)
			}
		}
	}
}

func outcomes(ds []RunDecision) []RunOutcome {
	out := make([]RunOutcome, len(ds))
	for i, d := range ds {
		out[i] = d.Outcome
	}
	return out
}
