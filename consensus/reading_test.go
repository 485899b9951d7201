package consensus

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/jsonschema"
	"github.com/feval/feval/protocol"
	"github.com/opencontainers/go-digest"
)

var updateReading = flag.Bool("update-reading", false, "rewrite "+readingVectors+" from the cases of TestReadingVectors")

// readingVectors are the conformance vectors of CONSENSUS.md 8.2: one verdict
// record each, the protocol of the round it is read in, and what a reader
// must make of it. The second verifier reads them too.
const readingVectors = "../scoring/testdata/consensus_reading_vectors.json"

// readingVector is one vector; Record is the record's canonical text.
type readingVector struct {
	Name   string        `json:"name"`
	Why    string        `json:"why"`
	Round  string        `json:"round_protocol"`
	Record string        `json:"record"`
	Expect readingExpect `json:"expect"`
}

// readingExpect is the vote a reading gives, before it is keyed to an entry.
type readingExpect struct {
	// Exclude is "malformed" or "" (the vote goes on to section 3.2).
	Exclude string `json:"exclude"`
	// Status and Score are the vote's ("" and "0" when excluded).
	Status string `json:"status"`
	Score  string `json:"score"`
	// Sequence, Reveal and Submission are what the record names (0, "" and
	// "" when it cannot be read at all).
	Sequence   uint64 `json:"sequence"`
	Reveal     string `json:"reveal"`
	Submission string `json:"submission"`
}

var (
	vecTask       = digest.FromString("task").String()
	vecRound      = digest.FromString("round").String()
	vecCommitment = digest.FromString("commitment").String()
	vecValue      = digest.FromString("commitment value").String()
	vecReveal     = digest.FromString("reveal").String()
	vecSubmission = digest.FromString("submission").String()
	vecMiner      = strings.Repeat("5a", 32)
)

// head is the shared members of the base records, sequence 3.
func vecHead(proto string) string {
	return `"inputs":{"commitment":"` + vecCommitment + `","commitment_value":"` + vecValue + `","miner":"` + vecMiner +
		`","reveal":"` + vecReveal + `","round":"` + vecRound + `","task":"` + vecTask + `"},"protocol":"` + proto + `",` +
		`"reveal_check":{"commit_seen":{"time":"2026-12-01T00:00:00Z"},"reveal_seen":{"time":"2026-12-02T00:00:00Z"},"status":"accepted"},` +
		`"sequence":3,"submission":"` + vecSubmission + `"`
}

// The base records: a passed rollouts verdict (PROTOCOL.md §6, "Building the
// verdict record"), a passed scenarios verdict written from the member table
// of PROTOCOL.md §6c, and a rejected optimizer verdict (OPTIMIZER.md §7).
func baseRollouts() string {
	return `{"audit":{"beacon":{"source":"test","value":"v","verified":false},"full":false,"mismatches":[],` +
		`"rows":[{"claimed":"1","outcome":"match","recomputed":"1","task_id":"math-00001"},{"claimed":"1/2","outcome":"match","recomputed":"1/2","task_id":"if-00002"}],` +
		`"sample_size":2,"seed":"` + strings.Repeat("0f", 32) + `","undetermined":[]},` +
		`"checkers":{"if":"ifeval/2","math":"mathverify/2"},"claimed_score":"3/4",` + vecHead("rollouts") +
		`,"rows":2,"status":"passed","traces":[]}`
}

func baseScenarios() string {
	d := func(s string) string { return digest.FromString(s).String() }
	return `{"cost_micro_usd":1500,"digests":{"harness":"` + d("harness") + `","hidden":"` + d("hidden") + `","pack":"` + vecSubmission +
		`","receipts":"` + d("receipts") + `","run":"` + d("run") + `","task":"` + vecTask + `","trace":"` + d("trace") + `","verifier":"` + d("verifier") + `"},` +
		vecHead("scenarios") + `,"max_score":2,` +
		`"scenarios":[{"cost_micro_usd":1000,"models":[{"calls":2,"cost_micro_usd":1000,"input_tokens":900,"model":"glm-4.5","output_tokens":80}],"name":"01-parse-range","passed":3,"status":"scored","stop":"finish","total":4,"turns":3},` +
		`{"cost_micro_usd":500,"models":[{"calls":1,"cost_micro_usd":500,"input_tokens":400,"model":"kimi-k2-instruct","output_tokens":20}],"name":"02-cli-flag","passed":2,"status":"scored","stop":"answer","total":2,"turns":1}],` +
		`"score":"7/4","status":"passed"}`
}

func baseOptimizer() string {
	return `{"bar_micro_nats":407000,"detail":"run 0: loss or parameters not finite at step 116","floor_micro_nats":1000,"horizon_steps":300,` +
		vecHead("optimizer") + `,"reason":"diverged","runs":[{"cleared":false,"detail":"loss or parameters not finite at step 116","index":0,"seed":20261201,"status":"diverged","steps":116}],` +
		`"status":"rejected"}`
}

// edit applies f to the decoded record and returns the canonical text.
func edit(t *testing.T, rec string, f func(m map[string]any)) string {
	t.Helper()
	v, err := jsonschema.Decode([]byte(rec))
	if err != nil {
		t.Fatalf("base record: %v", err)
	}
	if f != nil {
		f(v.(map[string]any))
	}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bundle.Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	return string(c)
}

func obj(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		m = m[p].(map[string]any)
	}
	return m
}

// readingCases are the vectors, each with the outcome CONSENSUS.md 8.2
// documents for it.
func readingCases(t *testing.T) []readingVector {
	named := func(status, score string) readingExpect {
		return readingExpect{Status: status, Score: score, Sequence: 3, Reveal: vecReveal, Submission: vecSubmission}
	}
	malformed := readingExpect{Exclude: "malformed", Score: "0", Sequence: 3, Reveal: vecReveal, Submission: vecSubmission}
	unreadable := readingExpect{Exclude: "malformed", Score: "0"}
	set := func(path []string, key string, val any) func(map[string]any) {
		return func(m map[string]any) { obj(m, path...)[key] = val }
	}
	del := func(path []string, key string) func(map[string]any) {
		return func(m map[string]any) { delete(obj(m, path...), key) }
	}
	n := func(s string) json.Number { return json.Number(s) }
	type c struct {
		name, why, round, base string
		f                      func(map[string]any)
		want                   readingExpect
	}
	cases := []c{
		{"rollouts-passed", "a strict passed verdict votes its claimed_score", "rollouts", baseRollouts(), nil, named("passed", "3/4")},
		{"rollouts-rejected", "a rejected verdict votes 0, not its claimed score", "rollouts", baseRollouts(), func(m map[string]any) {
			m["status"], m["reason"] = "rejected", "reward_mismatch"
			row := obj(m, "audit")["rows"].([]any)[1].(map[string]any)
			row["outcome"], row["recomputed"] = "mismatch", "0"
			obj(m, "audit")["mismatches"] = []any{"if-00002"}
		}, named("rejected", "0")},
		{"rollouts-undetermined", "an undetermined verdict is read; section 3.2 excludes it", "rollouts", baseRollouts(), func(m map[string]any) {
			m["status"], m["reason"] = "undetermined", "undetermined_rows"
			row := obj(m, "audit")["rows"].([]any)[1].(map[string]any)
			row["outcome"] = "undetermined"
			delete(row, "recomputed")
			obj(m, "audit")["undetermined"] = []any{"if-00002"}
		}, named("undetermined", "0")},
		{"null-traces", "null where the record has a value (FORMAT.md §2)", "rollouts", baseRollouts(), set(nil, "traces", nil), malformed},
		{"null-audit-rows", "null where the record has a value", "rollouts", baseRollouts(), set([]string{"audit"}, "rows", nil), malformed},
		{"null-audit-mismatches", "null where the record has a value", "rollouts", baseRollouts(), set([]string{"audit"}, "mismatches", nil), malformed},
		{"null-audit-undetermined", "null where the record has a value", "rollouts", baseRollouts(), set([]string{"audit"}, "undetermined", nil), malformed},
		{"claimed-score-above-one", "a reward is in [0, 1] (FORMAT.md §7.3)", "rollouts", baseRollouts(), set(nil, "claimed_score", "3/2"), malformed},
		{"claimed-score-not-reduced", "a reward is reduced", "rollouts", baseRollouts(), set(nil, "claimed_score", "6/8"), malformed},
		{"audit-claimed-above-one", "an audit row's claimed reward is in [0, 1]", "rollouts", baseRollouts(), func(m map[string]any) {
			obj(m, "audit")["rows"].([]any)[0].(map[string]any)["claimed"] = "5/4"
		}, malformed},
		{"rows-negative", "rows has minimum 0", "rollouts", baseRollouts(), set(nil, "rows", n("-1")), malformed},
		{"rows-beyond-int64", "every integer fits a signed 64-bit integer", "rollouts", baseRollouts(), set(nil, "rows", n("9223372036854775808")), malformed},
		{"empty-violations", "an empty optional list is left out, not written (FORMAT.md §7.4)", "rollouts", baseRollouts(), set(nil, "violations", []any{}), malformed},
		{"passed-without-score", "a passed verdict must carry its score", "rollouts", baseRollouts(), del(nil, "claimed_score"), malformed},
		{"unknown-reason", "reason is one of the schema's", "rollouts", baseRollouts(), func(m map[string]any) { m["status"], m["reason"] = "rejected", "unlucky" }, malformed},
		{"reveal-check-maybe", "the head's reveal_check.status is accepted or rejected: the record cannot be read at all", "rollouts", baseRollouts(),
			set([]string{"reveal_check"}, "status", "maybe"), unreadable},
		{"status-maybe", "the head's status is one of four: the record cannot be read at all", "rollouts", baseRollouts(), set(nil, "status", "maybe"), unreadable},
		{"sequence-beyond-uint64", "sequence is below 2^64: the record cannot be read at all", "rollouts", baseRollouts(), set(nil, "sequence", n("18446744073709551616")), unreadable},
		{"sequence-max", "sequence 2^64-1 is a sequence", "rollouts", baseRollouts(), set(nil, "sequence", n("18446744073709551615")),
			readingExpect{Status: "passed", Score: "3/4", Sequence: 1<<64 - 1, Reveal: vecReveal, Submission: vecSubmission}},
		{"upper-case-reveal", "a digest is lower-case hex: the record cannot be read at all", "rollouts", baseRollouts(),
			set([]string{"inputs"}, "reveal", strings.ToUpper(vecReveal)), unreadable},
		{"no-head", "a record without the shared members cannot be read at all", "rollouts", `{"status":"passed"}`, nil, unreadable},
		{"unknown-protocol", "protocol is one of three: the record cannot be read at all", "rollouts", baseRollouts(), set(nil, "protocol", "chess"), unreadable},
		{"rollouts-labelled-optimizer", "another protocol's verdict reports what its head names", "rollouts", baseRollouts(), set(nil, "protocol", "optimizer"), malformed},
		{"rollouts-labelled-scenarios", "another protocol's verdict reports what its head names", "rollouts", baseRollouts(), set(nil, "protocol", "scenarios"), malformed},
		{"optimizer-in-rollouts-round", "a well-formed optimizer verdict in a rollouts round reports its head", "rollouts", baseOptimizer(), set(nil, "sequence", n("7")),
			readingExpect{Exclude: "malformed", Score: "0", Sequence: 7, Reveal: vecReveal, Submission: vecSubmission}},
		{"rollouts-in-scenarios-round", "a rollouts verdict in a scenarios round reports its head", "scenarios", baseRollouts(), nil, malformed},
		{"scenarios-passed", "a scenarios verdict written from PROTOCOL.md §6c votes its score", "scenarios", baseScenarios(), nil, named("passed", "7/4")},
		{"scenarios-infra-error", "no score when a scenario hit an infrastructure failure", "scenarios", baseScenarios(), func(m map[string]any) {
			delete(m, "score")
			m["status"], m["detail"] = "infra_error", "1 of 2 scenarios hit an infrastructure failure"
			sc := m["scenarios"].([]any)[1].(map[string]any)
			sc["status"], sc["detail"], sc["passed"] = "infra_error", "a model call failed upstream after its retries", n("0")
		}, named("infra_error", "0")},
		{"scenarios-rejected", "a rejected pack: no scenarios, every digest empty", "scenarios", baseScenarios(), func(m map[string]any) {
			delete(m, "score")
			m["status"], m["reason"], m["scenarios"], m["cost_micro_usd"], m["max_score"] = "rejected", "commit_late", []any{}, n("0"), n("0")
			obj(m, "reveal_check")["status"], obj(m, "reveal_check")["reason"] = "rejected", "commit_late"
			m["digests"] = map[string]any{"harness": "", "hidden": "", "pack": "", "task": "", "verifier": ""}
		}, named("rejected", "0")},
		{"scenarios-score-above-max", "a scenarios score is at most its max_score", "scenarios", baseScenarios(), set(nil, "score", "5/2"), malformed},
		{"scenarios-passed-above-total", "a scenario passes at most its total", "scenarios", baseScenarios(), func(m map[string]any) {
			m["scenarios"].([]any)[1].(map[string]any)["passed"] = n("3")
		}, malformed},
		{"scenarios-empty-detail", "an empty optional member is left out", "scenarios", baseScenarios(), func(m map[string]any) {
			m["scenarios"].([]any)[0].(map[string]any)["detail"] = ""
		}, malformed},
		{"scenarios-null-models", "null where the record has a value", "scenarios", baseScenarios(), func(m map[string]any) {
			m["scenarios"].([]any)[0].(map[string]any)["models"] = nil
		}, malformed},
		{"optimizer-rejected", "an optimizer verdict is read in an optimizer round", "optimizer", baseOptimizer(), nil, named("rejected", "0")},
		{"optimizer-passed", "an optimizer verdict has no score to vote: a passed one is excluded (optimizer rounds pay by the frontier)", "optimizer", baseOptimizer(), func(m map[string]any) {
			delete(m, "reason")
			delete(m, "detail")
			m["status"], m["outcome"] = "passed", "not_cleared"
			r := m["runs"].([]any)[0].(map[string]any)
			delete(r, "detail")
			r["status"], r["steps"], r["held_out_loss_micro_nats"] = "completed", n("300"), n("420000")
		}, malformed},
	}
	out := make([]readingVector, len(cases))
	for i, c := range cases {
		out[i] = readingVector{Name: c.name, Why: c.why, Round: c.round, Record: edit(t, c.base, c.f), Expect: c.want}
	}
	return out
}

// TestReadingVectors reads every vector's record as consensus does and checks
// the vote against the documented outcome; the vectors file must hold exactly
// these cases (go test ./consensus -run TestReadingVectors -update-reading
// rewrites it).
func TestReadingVectors(t *testing.T) {
	ctx := context.Background()
	vs := readingCases(t)
	want, err := json.MarshalIndent(vs, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *updateReading {
		if err := os.WriteFile(readingVectors, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := os.ReadFile(readingVectors); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s is not the vectors of this test (%v): run go test ./consensus -run TestReadingVectors -update-reading", readingVectors, err)
	}
	st, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		desc, err := bundle.Write(ctx, st, bundle.Artifact{Kind: protocol.KindVerdict, Record: json.RawMessage(v.Record)})
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		r, err := readVerdict(ctx, st, desc, v.Round)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		vote, meta := r.vote()
		got := readingExpect{Exclude: string(vote.Exclude), Status: string(vote.Status), Score: vote.Score.String(), Sequence: vote.Sequence,
			Reveal: meta.reveal.String(), Submission: meta.submission.String()}
		if vote.Exclude != "" {
			got.Status = ""
			got.Score = "0"
		}
		if got != v.Expect {
			t.Errorf("%s (%s): read as %+v, want %+v (reader: %s)", v.Name, v.Why, got, v.Expect, r.malformed)
		}
	}
}
