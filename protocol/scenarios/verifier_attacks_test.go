package scenarios_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/feval/feval/replay"
	"github.com/opencontainers/go-digest"
)

// workspaceAttacks are final workspaces' convert.py for 09-temperature that
// attack the verification instead of solving the scenario, each as its module
// runs in a ws call.
var workspaceAttacks = map[string]string{
	// Reads the hidden tests and answers their literals.
	"oracle": `import glob, re
_table = {}
for _p in glob.glob("/in/tests/**/*.py", recursive=True):
    try:
        for _n, _a, _w in re.findall(r'ws\.call\("convert", "(\w+)", ([^)]*)\) == (\S+)', open(_p).read()):
            _table[(_n, _a)] = int(_w)
    except (OSError, ValueError):
        pass
def c_to_f(c):
    return _table.get(("c_to_f", repr(c)))
def f_to_c(f):
    return _table.get(("f_to_c", repr(f)))
`,
	// Leaves a process behind, in a session of its own, that writes an
	// all-passed report wherever pytest writes its own.
	"forger": `import os, time
REPORT = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="0" skipped="0" tests="3">'
          '<testcase classname="test_convert" name="test_boil"/><testcase classname="test_convert" name="test_freeze"/>'
          '<testcase classname="test_convert" name="test_round_trip"/></testsuite></testsuites>')
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for _ in range(400):
            for p in ("/out/junit.xml", "/out/report.xml"):
                try:
                    with open(p, "w") as f:
                        f.write(REPORT)
                except OSError:
                    pass
            time.sleep(0.05)
    os._exit(0)
def c_to_f(c):
    return -1
def f_to_c(f):
    return -1
`,
	// Kills the verifier: its parent, and everything else in reach.
	"verifier-killer": `import os, signal
for pid in (os.getppid(), -1):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
def c_to_f(c):
    return -1
def f_to_c(f):
    return -1
`,
	// Answers every call with an exception whose message is as long as an
	// answer may be, so that the failures' text outgrows the report's bound.
	"report-flooder": `import json, os
os.write(3, json.dumps({"raised": ["ValueError", "Exception"], "message": "x" * 1000000}).encode())
os._exit(0)
`,
	// Puts a directory where pytest writes its report.
	"report-blocker": `import os
for p in ("/out/junit.xml", "/tmp/junit.xml"):
    try:
        os.makedirs(p, exist_ok=True)
    except OSError:
        pass
def c_to_f(c):
    return -1
def f_to_c(f):
    return -1
`,
}

// TestWorkspaceCodeCannotReachTheVerifier: workspace code runs in the
// workspace broker's sandboxes, apart from the verifier (PROTOCOL.md §6c), so
// an oracle that reads the hidden tests, a report forger that outlives its
// call, a verifier killer, a report-path blocker and a report flooder each
// score what a pack that does nothing scores, and none makes the scenario
// infra_error or needs the control run. Each is
// a pack committed, revealed and evaluated, whose model writes the attack.
func TestWorkspaceCodeCannotReachTheVerifier(t *testing.T) {
	w := newWorld(t, scenariotask.Config{Scenarios: []string{"09-temperature"}, VerifierWallMillis: 20_000})
	evaluate := func(name, module string) scenarios.ScenarioResult {
		t.Helper()
		steps := []upstream.Step{{Tool: "finish", Arguments: `{"summary":"done"}`}}
		if module != "" {
			args, _ := json.Marshal(map[string]string{"path": "convert.py", "content": module})
			steps = append([]upstream.Step{{Tool: "write_file", Arguments: string(args)}}, steps...)
		}
		w.up.AddScript("09-temperature", upstream.Script{Steps: steps})
		dir := pack(t, "kimi-k2-instruct")
		// another skill text: another submission (the same one from two miners is a copy)
		if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("# Repair skill: "+name+"\n\nRead the code, make the smallest fix.\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		v, _ := w.evaluate(w.submit(dir))
		if v.Status != protocol.VerdictPassed || len(v.Scenarios) != 1 {
			t.Fatalf("%s: verdict %s (%s %s), want passed", name, v.Status, v.Reason, v.Detail)
		}
		return v.Scenarios[0]
	}
	nothing := evaluate("nothing", "")
	if nothing.Status != scenarios.ScenarioScored {
		t.Fatalf("the pack that does nothing: %s (%s)", nothing.Status, nothing.Detail)
	}
	for name, module := range workspaceAttacks {
		s := evaluate(name, module)
		if s.Status != scenarios.ScenarioScored || s.Passed > nothing.Passed {
			t.Errorf("%s: %s, %d of %d passed (%s); doing nothing passes %d", name, s.Status, s.Passed, s.Total, s.Detail, nothing.Passed)
		}
		if s.Detail != "" { // the verifier reported on its own: no control run was needed
			t.Errorf("%s: %s", name, s.Detail)
		}
	}
}

// TestForgedReportDiffers: the report a forger hoped for (every test passed),
// published as a validator's own (the run record rewritten, it and the
// verdict re-signed with the validator's key), is caught by replay
// --verify-only, which runs the verifier again on the recorded workspace and
// names the scenario's report.
func TestForgedReportDiffers(t *testing.T) {
	w := newWorld(t, scenariotask.Config{Scenarios: []string{"09-temperature"}, VerifierWallMillis: 20_000})
	args, _ := json.Marshal(map[string]string{"path": "convert.py", "content": workspaceAttacks["forger"]})
	w.up.AddScript("09-temperature", upstream.Script{Steps: []upstream.Step{{Tool: "write_file", Arguments: string(args)}, {Tool: "finish", Arguments: `{"summary":"done"}`}}})
	v, out := w.evaluate(w.submit(pack(t, "kimi-k2-instruct")))
	if v.Status != protocol.VerdictPassed || v.Scenarios[0].Passed == v.Scenarios[0].Total {
		t.Fatalf("the forger's own verdict: %s, %d of %d passed", v.Status, v.Scenarios[0].Passed, v.Scenarios[0].Total)
	}
	load := func(d digest.Digest, into any) *bundle.Loaded {
		t.Helper()
		desc, err := w.validator.Resolve(w.ctx, d.String())
		if err != nil {
			t.Fatal(err)
		}
		art, err := bundle.Load(w.ctx, w.validator, desc)
		if err != nil {
			t.Fatal(err)
		}
		if err := art.Decode(into); err != nil {
			t.Fatal(err)
		}
		return art
	}
	var run scenarios.RunRecord
	runArt := load(v.Digests.Run, &run)
	r := run.Scenarios[0].Report
	for i := range r.Tests {
		r.Tests[i].Status = scenarios.TestPassed
	}
	r.Summary = scenarios.Summary{Tests: len(r.Tests), Passed: len(r.Tests)}
	forgedRun, err := bundle.WriteSigned(w.ctx, w.validator, w.key, bundle.Artifact{Kind: scenarios.KindRun, Record: run,
		Layers: runArt.Payloads, Subject: runArt.Manifest.Subject})
	if err != nil {
		t.Fatal(err)
	}
	var forged scenarios.Verdict
	verdictArt := load(out.Artifact.Digest, &forged)
	forged.Digests.Run = forgedRun.Digest
	forged.Scenarios[0].Passed = forged.Scenarios[0].Total
	forged.Score = "1"
	desc, err := bundle.WriteSigned(w.ctx, w.validator, w.key, bundle.Artifact{Kind: protocol.KindVerdict, Record: forged,
		Subject: verdictArt.Manifest.Subject})
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay.RunWith(w.ctx, w.validator, desc, w.trusted(), evaluate.Options{VerifyOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != replay.Differs {
		t.Fatalf("verify-only replay of a forged report: %s, want differs", res.Outcome)
	}
	named := false
	for _, d := range res.Diffs {
		named = named || d.Path == "scenarios/09-temperature/report"
	}
	if !named {
		t.Errorf("the differences do not name the scenario: %+v", res.Diffs)
	}
}
