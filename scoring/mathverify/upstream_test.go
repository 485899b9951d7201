package mathverify

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// upstreamFile holds the public Math-Verify project's own test cases, converted
// by scripts/mathverify-upstream.py (source commit and license in the file), and
// every case where this checker deliberately decides otherwise, with the reason.
const upstreamFile = "mathverify_upstream.json"

type upstreamCase struct {
	ID       string         `json:"id"`
	Gold     string         `json:"gold"`
	Pred     string         `json:"pred"`
	Expected int            `json:"expected"`
	Options  map[string]any `json:"options"`
}

// upstreamDifferencesFile lists the cases this checker decides differently on
// purpose, each with the class of its reason.
const upstreamDifferencesFile = "mathverify_upstream_differences.json"

// The agreement recorded in docs/PROTOCOL.md: of upstreamCases cases,
// upstreamAgree are decided as upstream decides them and the rest are listed
// differences.
const (
	upstreamCases = 270
	upstreamAgree = 216
)

type upstreamDifference struct {
	ID      string  `json:"id"`
	Outcome Outcome `json:"outcome"` // what this checker decides
	Class   string  `json:"class"`   // a key of reasons
}

type upstreamData struct {
	Source   map[string]any      `json:"source"`
	Excluded []map[string]string `json:"excluded"`
	Cases    []upstreamCase      `json:"cases"`
}

type upstreamDifferences struct {
	About       string               `json:"about"`
	Reasons     map[string]string    `json:"reasons"`
	Differences []upstreamDifference `json:"differences"`
}

func readJSON[T any](t *testing.T, name string) T {
	t.Helper()
	var v T
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("parsing %s: %v", name, err)
	}
	return v
}

// upstreamOutcome decides one upstream case the way a feval task would: the gold
// text is reduced to its answer by the same extraction as a response (upstream
// parses both sides alike), then the prediction is scored against it.
func upstreamOutcome(c upstreamCase) Check {
	gold := c.Gold
	if ans, _, ok := Extract(gold); ok {
		gold = ans
	}
	return Score(gold, c.Pred, DefaultFuel)
}

// TestUpstreamParity runs the public Math-Verify project's own test cases and
// requires the upstream verdict (equal or not) on every case that is not a
// listed deliberate difference, and exactly the listed decision on those.
func TestUpstreamParity(t *testing.T) {
	d := readJSON[upstreamData](t, upstreamFile)
	x := readJSON[upstreamDifferences](t, upstreamDifferencesFile)
	if len(d.Cases) != upstreamCases {
		t.Fatalf("%s has %d cases, want %d", upstreamFile, len(d.Cases), upstreamCases)
	}
	if d.Source["commit"] == nil || d.Source["license"] == nil {
		t.Fatalf("%s does not name its source commit and license", upstreamFile)
	}
	diffs := map[string]upstreamDifference{}
	for _, v := range x.Differences {
		if x.Reasons[v.Class] == "" {
			t.Errorf("difference %s: class %q has no reason", v.ID, v.Class)
		}
		if _, dup := diffs[v.ID]; dup {
			t.Errorf("difference %s listed twice", v.ID)
		}
		diffs[v.ID] = v
	}
	agree := 0
	seen := map[string]bool{}
	for _, c := range d.Cases {
		seen[c.ID] = true
		got := upstreamOutcome(c)
		same := (got.Result.Outcome == Equal) == (c.Expected == 1)
		v, listed := diffs[c.ID]
		switch {
		case same && listed:
			t.Errorf("%s: listed as a difference (%s) but now agrees with upstream (%v): remove it", c.ID, v.Class, got.Result.Outcome)
		case same:
			agree++
		case !listed:
			t.Errorf("%s: gold %q pred %q: upstream %d, checker %v (%s; answer %q)", c.ID, c.Gold, c.Pred, c.Expected, got.Result.Outcome, got.Result.Reason, got.Answer)
		case got.Result.Outcome != v.Outcome:
			t.Errorf("%s: listed difference decides %v, checker now %v (%s)", c.ID, v.Outcome, got.Result.Outcome, got.Result.Reason)
		}
	}
	for id := range diffs {
		if !seen[id] {
			t.Errorf("difference %s names no case", id)
		}
	}
	if agree != upstreamAgree || len(diffs) != upstreamCases-upstreamAgree {
		t.Errorf("agreement %d of %d with %d listed differences; docs/PROTOCOL.md records %d and %d", agree, len(d.Cases), len(diffs), upstreamAgree, upstreamCases-upstreamAgree)
	}
}
