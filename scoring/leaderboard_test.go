package scoring

import (
	"errors"
	"slices"
	"testing"

	"github.com/feval/feval/internal/detrand"
)

var boardEntries = []Entry{
	{Miner: "m2", Validator: "v2", Sequence: 1, Status: CellInProgress},
	{Miner: "m2", Validator: "v2", Sequence: 2, Status: CellPassed, Score: rat("3/4"), Verdict: "sha256:e2"},
	{Miner: "m2", Validator: "v1", Sequence: 1, Status: CellCarried, Score: rat("1/2"), CarriedFrom: "round-7"},
	{Miner: "m1", Validator: "v1", Sequence: 4, Status: CellRejected, Score: rat("0")},
	{Miner: "m1", Validator: "v1", Sequence: 4, Status: CellRejected, Score: rat("0")}, // identical duplicate
	{Miner: "m3", Validator: "v3", Sequence: 1, Status: CellInProgress},
}

var boardStandings = []Standing{
	{Miner: "m1", Score: rat("1/5"), Reward: RewardUnrewarded},
	{Miner: "m2", Score: rat("3/4"), Reward: RewardRewarded},
	{Miner: "m4", Score: rat("1/5"), Reward: RewardPending},
}

func TestLeaderboard(t *testing.T) {
	got, err := Leaderboard(boardEntries, boardStandings)
	if err != nil {
		t.Fatal(err)
	}
	empty := Cell{}
	want := Board{
		Validators: []string{"v1", "v2", "v3"},
		Rows: []Row{
			// Scored rows by score descending (m1 and m4 tie at 1/5: by miner),
			// then the unscored m3.
			{Miner: "m2", Scored: true, Score: rat("3/4"), Reward: RewardRewarded,
				Audit: Audit{Passed: 1, Carried: 1, Empty: 1},
				Cells: []Cell{{Status: CellCarried, Score: rat("1/2"), CarriedFrom: "round-7"}, {Status: CellPassed, Score: rat("3/4"), Verdict: "sha256:e2"}, empty}},
			{Miner: "m1", Scored: true, Score: rat("1/5"), Reward: RewardUnrewarded,
				Audit: Audit{Rejected: 1, Empty: 2},
				Cells: []Cell{{Status: CellRejected, Score: rat("0")}, empty, empty}},
			{Miner: "m4", Scored: true, Score: rat("1/5"), Reward: RewardPending,
				Audit: Audit{Empty: 3}, Cells: []Cell{empty, empty, empty}},
			{Miner: "m3", Reward: RewardPending,
				Audit: Audit{InProgress: 1, Empty: 2}, Cells: []Cell{empty, empty, {Status: CellInProgress}}},
		},
	}
	if g, w := mustJSON(t, got), mustJSON(t, want); g != w {
		t.Fatalf("board\n got %s\nwant %s", g, w)
	}
}

func TestLeaderboardOrderDoesNotMatter(t *testing.T) {
	base, err := Leaderboard(boardEntries, boardStandings)
	if err != nil {
		t.Fatal(err)
	}
	src := detrand.New("scoring/leaderboard-order", nil)
	for i := 0; i < 50; i++ {
		e, s := slices.Clone(boardEntries), slices.Clone(boardStandings)
		detrand.Shuffle(src, e)
		detrand.Shuffle(src, s)
		got, err := Leaderboard(e, s)
		if err != nil {
			t.Fatal(err)
		}
		if mustJSON(t, got) != mustJSON(t, base) {
			t.Fatalf("shuffle %d changed the board", i)
		}
	}
}

func TestLeaderboardErrors(t *testing.T) {
	cases := []struct {
		name      string
		entries   []Entry
		standings []Standing
		is        error
	}{
		{"empty miner", []Entry{{Validator: "v", Status: CellPassed}}, nil, nil},
		{"empty validator", []Entry{{Miner: "m", Status: CellPassed}}, nil, nil},
		{"unknown status", []Entry{{Miner: "m", Validator: "v", Status: "done"}}, nil, nil},
		{"empty status", []Entry{{Miner: "m", Validator: "v"}}, nil, nil},
		{"carried without round", []Entry{{Miner: "m", Validator: "v", Status: CellCarried}}, nil, nil},
		{"round on a passed entry", []Entry{{Miner: "m", Validator: "v", Status: CellPassed, CarriedFrom: "r1"}}, nil, nil},
		{"conflict at the same sequence", []Entry{
			{Miner: "m", Validator: "v", Sequence: 3, Status: CellPassed, Score: rat("1")},
			{Miner: "m", Validator: "v", Sequence: 3, Status: CellRejected},
		}, nil, ErrConflictingEntries},
		{"conflict below a later entry", []Entry{
			{Miner: "m", Validator: "v", Sequence: 9, Status: CellPassed},
			{Miner: "m", Validator: "v", Sequence: 3, Status: CellPassed, Score: rat("1")},
			{Miner: "m", Validator: "v", Sequence: 3, Status: CellRejected},
		}, nil, ErrConflictingEntries},
		{"standing without miner", nil, []Standing{{Reward: RewardPending}}, nil},
		{"unknown reward", nil, []Standing{{Miner: "m", Reward: "paid"}}, nil},
		{"two standings", nil, []Standing{{Miner: "m", Reward: RewardPending}, {Miner: "m", Reward: RewardPending}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Leaderboard(c.entries, c.standings)
			if err == nil || (c.is != nil && !errors.Is(err, c.is)) {
				t.Fatalf("Leaderboard() error = %v, want %v", err, c.is)
			}
		})
	}
}
