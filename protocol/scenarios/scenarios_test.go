package scenarios_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/feval/feval/consensus"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/internal/roundtest"

	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/feval/feval/replay"
	"github.com/feval/feval/scoring"
)

// TestGoodAndPoorPolicies evaluates two single-model packs on a few scenarios:
// the strong model scores more and costs differently, every scenario is
// scored against its declared tests, and the verdict replays identical with
// the meter answering from the trace.
func TestGoodAndPoorPolicies(t *testing.T) {
	w := newWorld(t, scenariotask.Config{Scenarios: []string{"01-parse-range", "08-roman", "16-normpath", "20-env-settings"}})
	strong, strongOut := w.evaluate(w.submit(pack(t, "kimi-k2-instruct")))
	weak, _ := w.evaluate(w.submit(pack(t, "llama-4-maverick-17b-128e-instruct")))
	for _, v := range []scenarios.Verdict{strong, weak} {
		roundtest.MatchesSchema(t, "verdict-scenarios.schema.json", v)
		if v.Status != protocol.VerdictPassed || len(v.Scenarios) != 4 || v.MaxScore != 4 {
			t.Fatalf("verdict %s %s with %d scenarios: %+v", v.Status, v.Detail, len(v.Scenarios), v.Scenarios)
		}
		for _, s := range v.Scenarios {
			t.Logf("%s: %d/%d %s turns=%d cost=%d", s.Name, s.Passed, s.Total, s.Stop, s.Turns, s.CostMicroUSD)
		}
	}
	t.Logf("strong %s cost %d; weak %s cost %d", strong.Score, strong.CostMicroUSD, weak.Score, weak.CostMicroUSD)
	if strong.Score == weak.Score || strong.CostMicroUSD == weak.CostMicroUSD {
		t.Fatalf("strong %s (%d micro-USD) and weak %s (%d micro-USD) do not differ", strong.Score, strong.CostMicroUSD, weak.Score, weak.CostMicroUSD)
	}
	// Consensus takes the scenario verdicts: the strong pack takes the vacant
	// seat and, under the scenarios weight rule, every unit of weight.
	stakes := fmt.Sprintf(`{"stakes": {%q: 100}}`, w.key.Public().Fingerprint)
	cons, err := consensus.Run(w.ctx, w.validator, w.key, consensus.Options{Round: w.round.Digest.String(), Stakes: consensus.Input{JSON: []byte(stakes)}})
	if err != nil {
		t.Fatal(err)
	}
	rec := cons.Record
	if rec.Seat.Holder != strong.Submission || rec.Seat.Outcome != scoring.SeatTaken || rec.Seat.HolderScore.String() != strong.Score {
		t.Fatalf("seat %+v, want the strong pack %s at %s", rec.Seat, strong.Submission, strong.Score)
	}
	if len(rec.Weights.Miners) != 1 || rec.Weights.Miners[0].Submission != strong.Submission || rec.Weights.Miners[0].Units != consensus.UnitsTotal {
		t.Fatalf("weights %+v, want every unit to the seat holder", rec.Weights)
	}

	calls := w.up.Calls()
	res, err := replay.RunWith(w.ctx, w.validator, strongOut.Artifact.OCI(), w.trusted(), w.options())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != replay.Identical {
		t.Fatalf("replay %s: %+v", res.Outcome, res.Diffs)
	}
	if w.up.Calls() != calls {
		t.Fatalf("replay called the upstream %d times", w.up.Calls()-calls)
	}
}

// faultTransport answers HTTP 402 to every upstream call of one scenario (found
// by its fixture hook) and passes the others to the fixture upstream.
type faultTransport struct{ scenario string }

func (f faultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if strings.Contains(string(body), "[fixture-task:"+f.scenario+"]") {
		return &http.Response{StatusCode: http.StatusPaymentRequired, Header: http.Header{"Content-Type": {"application/json"}},
			Body:    io.NopCloser(strings.NewReader(`{"error":{"message":"no credits","type":"insufficient_quota","code":"insufficient_quota"}}`)),
			Request: r}, nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return http.DefaultTransport.RoundTrip(r)
}

// TestFailuresStayInTheirScenario: an upstream that runs out of credits in one
// scenario makes it infra_error (never a score of 0) and the verdict
// infra_error, while the other scenarios are scored, among them a workspace
// whose module hangs on import and one whose module exits on import: workspace
// code runs only in the verifier's child processes, so both fail their tests
// (0 passed) instead of failing the verifier; a pack routed to a model off the allowlist
// scores 0 without being an infrastructure failure; a replay whose policy
// sends other requests names the scenario, the request and the field.
func TestFailuresStayInTheirScenario(t *testing.T) {
	w := newWorld(t, scenariotask.Config{Scenarios: []string{"05-config-repair", "09-temperature", "13-date-month", "19-semver"}, VerifierWallMillis: 6000})
	w.up.AddScript("13-date-month", upstream.Script{Steps: []upstream.Step{
		{Tool: "write_file", Arguments: `{"content":"import time\ntime.sleep(600)\n","path":"dates.py"}`},
		{Tool: "finish", Arguments: `{"summary":"done"}`}}})
	w.up.AddScript("19-semver", upstream.Script{Steps: []upstream.Step{
		{Tool: "write_file", Arguments: `{"content":"import os\nos._exit(3)\n","path":"semver.py"}`},
		{Tool: "finish", Arguments: `{"summary":"done"}`}}})
	reveal := w.submit(pack(t, "kimi-k2-instruct"))
	opts := w.options()
	opts.Scenarios.Transport = faultTransport{"05-config-repair"}
	out, err := evaluate.Evaluate(w.ctx, w.validator, w.key, evaluate.Request{Reveal: reveal.Digest.String(),
		Task: w.task.Digest.String(), Obs: at("2026-12-01T06:00:00Z"), Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	v := out.Verdict.(scenarios.Verdict)
	roundtest.MatchesSchema(t, "verdict-scenarios.schema.json", v)
	if v.Status != protocol.VerdictInfraError || v.Score != "" {
		t.Fatalf("verdict %s score %q, want infra_error without a score", v.Status, v.Score)
	}
	want := map[string]string{"05-config-repair": scenarios.ScenarioInfraError, "09-temperature": scenarios.ScenarioScored,
		"13-date-month": scenarios.ScenarioScored, "19-semver": scenarios.ScenarioScored}
	for _, s := range v.Scenarios {
		if s.Status != want[s.Name] {
			t.Errorf("%s: %s (%s), want %s", s.Name, s.Status, s.Detail, want[s.Name])
		}
	}
	if s := v.Scenarios[1]; s.Passed != s.Total || s.Total != 3 {
		t.Errorf("09-temperature: %d/%d, want 3/3", s.Passed, s.Total)
	}
	for _, s := range v.Scenarios[2:] {
		if s.Passed != 0 || s.Total == 0 {
			t.Errorf("%s: %d/%d, want 0 passed", s.Name, s.Passed, s.Total)
		}
	}

	// A pack whose model is not allowlisted is rejected by the gate before
	// anything runs.
	calls := w.up.Calls()
	off, _ := w.evaluate(w.submit(pack(t, "gpt-4o")))
	roundtest.MatchesSchema(t, "verdict-scenarios.schema.json", off)
	if off.Status != protocol.VerdictRejected || off.Reason != protocol.ReasonGateFailed || len(off.Scenarios) != 0 || w.up.Calls() != calls {
		t.Fatalf("off-allowlist pack: %s %s with %d scenarios", off.Status, off.Reason, len(off.Scenarios))
	}

	// Replaying the first verdict with a policy that picks another model:
	// the first request of each scenario is missing from the trace.
	ropts := w.options()
	ropts.Scenarios.Policy = func(ctx context.Context, pack fs.FS, models []string) (scenarios.Policy, error) {
		return scenarios.SingleModelPolicy(ctx, fstest.MapFS{"policy.json": {Data: []byte(`{"routes":[{"name":"default","steps":[{"model":"glm-4.5"}]}]}`)}}, models)
	}
	res, err := replay.RunWith(w.ctx, w.validator, out.Artifact.OCI(), w.trusted(), ropts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != replay.Differs {
		t.Fatalf("replay with another policy: %s", res.Outcome)
	}
	found := false
	for _, d := range res.Diffs {
		if d.Path == "scenarios/09-temperature/requests/1/request/model" && d.Recorded == `"kimi-k2-instruct"` && d.Recomputed == `"glm-4.5"` {
			found = true
		}
	}
	if !found {
		t.Fatalf("no divergence naming scenario, request and field: %+v", res.Diffs)
	}
}
