package scenarios_test

import (
	"path/filepath"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/internal/testenv"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/replay"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestTwentyScenarios evaluates one pack on all twenty reference scenarios
// (the only test that runs them all), publishes the verdict and its evidence
// to a registry, and has an auditor with a fresh store fetch and replay it:
// identical, with the meter answering from the trace and no upstream call;
// then identical again re-running only the verifiers.
func TestTwentyScenarios(t *testing.T) {
	w := newWorld(t, scenariotask.Config{})
	reveal := w.submit(pack(t, "deepseek-v3.1"))
	v, out := w.evaluate(reveal)
	if v.Status != protocol.VerdictPassed || len(v.Scenarios) != 20 || v.MaxScore != 20 {
		t.Fatalf("verdict %s (%s) with %d scenarios", v.Status, v.Detail, len(v.Scenarios))
	}
	scored, full := 0, 0
	for _, s := range v.Scenarios {
		if s.Status != "scored" || s.Total == 0 || s.CostMicroUSD <= 0 || len(s.Models) != 1 || s.Models[0].Model != "deepseek-v3.1" {
			t.Errorf("%s: %+v", s.Name, s)
		}
		if s.Passed > 0 {
			scored++
		}
		if s.Passed == s.Total {
			full++
		}
		t.Logf("%s: %d/%d %s turns=%d cost=%d", s.Name, s.Passed, s.Total, s.Stop, s.Turns, s.CostMicroUSD)
	}
	t.Logf("score %s of 20, cost %d micro-USD", v.Score, v.CostMicroUSD)
	if full == 20 || scored == 0 {
		t.Fatalf("a middling model solved %d of 20 scenarios fully and %d at all", full, scored)
	}

	reg := testenv.StartRegistry(t)
	ref, err := cas.ParseRemote(reg.Addr + "/competition/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	remote, err := cas.OpenRemote(ref, cas.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := w.validator.Resolve(w.ctx, v.Submission.String())
	if err != nil {
		t.Fatal(err)
	}
	published := []ocispec.Descriptor{w.task, w.round, reveal, sub, w.hidden}
	for _, e := range out.Evidence {
		published = append(published, e.OCI())
	}
	published = append(published, out.Artifact.OCI())
	for _, d := range published {
		if _, err := cas.Copy(w.ctx, w.validator, remote, d, cas.CopyOptions{Subjects: true, Referrers: true}); err != nil {
			t.Fatal(err)
		}
	}
	auditor, err := cas.Init(filepath.Join(t.TempDir(), "auditor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := replay.Fetch(w.ctx, remote, auditor, out.Artifact.OCI()); err != nil {
		t.Fatal(err)
	}
	calls := w.up.Calls()
	for _, opts := range []evaluate.Options{w.options(), {VerifyOnly: true}} {
		res, err := replay.RunWith(w.ctx, auditor, out.Artifact.OCI(), w.trusted(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != replay.Identical || res.Recomputed != out.Artifact.Digest {
			t.Fatalf("replay (verify-only %t): %s %+v", opts.VerifyOnly, res.Outcome, res.Diffs)
		}
	}
	if w.up.Calls() != calls {
		t.Fatalf("replay called the upstream %d times", w.up.Calls()-calls)
	}
}
