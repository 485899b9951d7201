package scenarios_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/protocol/scenarios"
)

// verifierTask writes the reference task with every scenario's hidden tests
// where the verifier mounts them (scenarios/NAME/hidden).
func verifierTask(t *testing.T) (string, scenarios.Spec) {
	t.Helper()
	needPytest(t)
	dir, hidden := filepath.Join(t.TempDir(), "task"), filepath.Join(t.TempDir(), "hidden")
	if err := scenariotask.Generate(dir, hidden, scenariotask.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "staged"), os.DirFS(filepath.Join(hidden, scenarios.ScenarioDir))); err != nil {
		t.Fatal(err)
	}
	spec, err := scenarios.LoadTask(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range spec.Scenarios {
		if err := os.Rename(filepath.Join(dir, "staged", sc.Name), filepath.Join(dir, scenarios.ScenarioDir, sc.Name, "hidden")); err != nil {
			t.Fatal(err)
		}
	}
	return dir, spec
}

func runVerifier(t *testing.T, dir string, spec scenarios.Spec, sc scenarios.ScenarioSpec, ws string) scenarios.Report {
	t.Helper()
	r, infra, control := scenarios.RunVerifier(context.Background(), spec, dir, sc, ws)
	if r == nil || control != "" {
		t.Fatalf("%s: no report of its own (%s%s)", sc.Name, infra, control)
	}
	return *r
}

// TestReferenceSolutions runs the verifier on every scenario twice: on the
// untouched workspace at least one declared test fails, and on the workspace
// with the scenario's scripted solution applied every declared test passes.
func TestReferenceSolutions(t *testing.T) {
	dir, spec := verifierTask(t)
	scripts, err := scenariotask.Scripts()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range spec.Scenarios {
		ws := filepath.Join(dir, scenarios.ScenarioDir, sc.Name, "workspace")
		if r := runVerifier(t, dir, spec, sc, ws); r.Summary.Passed == r.Summary.Tests {
			t.Errorf("%s: the untouched workspace passes %+v", sc.Name, r.Summary)
		}
		solved := filepath.Join(t.TempDir(), sc.Name)
		if err := os.CopyFS(solved, os.DirFS(ws)); err != nil {
			t.Fatal(err)
		}
		for _, step := range scripts[sc.Name].Steps {
			if step.Tool != "write_file" {
				continue
			}
			var a struct{ Path, Content string }
			if err := json.Unmarshal([]byte(step.Arguments), &a); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(solved, filepath.FromSlash(a.Path))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(a.Content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if r := runVerifier(t, dir, spec, sc, solved); r.Summary.Passed != r.Summary.Tests || r.Summary.Tests != len(sc.Tests) {
			t.Errorf("%s: the reference solution scores %+v: %+v", sc.Name, r.Summary, r.Tests)
		}
	}
}

// hostile is a workspace module that, once imported, patches pytest in memory
// to report every test as passed and writes a junit.xml claiming all passes.
const hostile = `import sys
FAKE = '<testsuites><testsuite>' + ''.join('<testcase classname="test_ranges" name="%s"/>' % n for n in
    ("test_inclusive", "test_single", "test_same_ends", "test_spaces")) + '</testsuite></testsuites>'
try:
    import _pytest.reports, _pytest.junitxml
    _pytest.reports.TestReport.passed = property(lambda self: True)
    _pytest.reports.TestReport.failed = property(lambda self: False)
    _pytest.junitxml.LogXML.pytest_sessionfinish = lambda self: open(self.logfile, "w").write(FAKE)
except Exception:
    pass
for p in ("/out/junit.xml",):
    try:
        open(p, "w").write(FAKE)
    except OSError:
        pass
def parse_range(text):
    return [int(text)]
`

// TestHostileWorkspace verifies a workspace whose module tampers with pytest
// and the report when imported: the tests run it only in child processes, so
// the score is the honest one (only test_single passes), and a module that
// kills its own process fails its tests instead of the verifier.
func TestHostileWorkspace(t *testing.T) {
	dir, spec := verifierTask(t)
	sc := spec.Scenarios[0]
	if sc.Name != "01-parse-range" {
		t.Fatalf("first scenario %s", sc.Name)
	}
	for name, src := range map[string]string{
		"tamper": hostile,
		"crash":  "import os\nos.kill(os.getpid(), 9)\n" + hostile,
		"hang":   "import time\ntime.sleep(3600)\n",
	} {
		if name == "hang" && testing.Short() {
			continue
		}
		ws := filepath.Join(t.TempDir(), name)
		os.MkdirAll(ws, 0o755)
		if err := os.WriteFile(filepath.Join(ws, "ranges.py"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runVerifier(t, dir, spec, sc, ws)
		want := 1
		if name != "tamper" {
			want = 0
		}
		if r.Summary.Tests != 4 || r.Summary.Passed != want || r.Summary.Failed != 4-want {
			var b strings.Builder
			json.NewEncoder(&b).Encode(r)
			t.Errorf("%s: report %s, want %d of 4 passed", name, b.String(), want)
		}
	}
}

// TestVerifierFailuresAreInfraError: when the verifier itself fails (it
// crashes, runs past its wall time, or writes no report) and fails the same
// way in the control run, where no workspace code runs, the scenario is
// infra_error, never a score. The task's verifier program is replaced in a
// copy of the task to make it fail; the workspace is the scenario's own,
// untouched.
func TestVerifierFailuresAreInfraError(t *testing.T) {
	dir, spec := verifierTask(t)
	sc := spec.Scenarios[0]
	ws := filepath.Join(dir, scenarios.ScenarioDir, sc.Name, "workspace")
	spec.Verifier.WallMillis = 1500
	defer scenarios.SetVerifierGrace(1500)()
	for _, c := range []struct{ name, program, want string }{
		{"crash", "import sys\nsys.exit(3)\n", "crashed"},
		{"timeout", "import time\ntime.sleep(60)\n", "timed out"},
		{"no report", "print('nothing')\n", "no report"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(scenarios.VerifierFile)), []byte(c.program), 0o644); err != nil {
				t.Fatal(err)
			}
			r, infra, control := scenarios.RunVerifier(context.Background(), spec, dir, sc, ws)
			if r != nil || control != "" || !strings.Contains(infra, c.want) || !strings.Contains(infra, "control run") {
				t.Fatalf("verifier that fails (%s): report %v, infra %q, control %q; want infra_error saying %q and that the control run failed too", c.name, r, infra, control, c.want)
			}
		})
	}
}

// crashesOnAnswers is a verifier that asks the broker for one workspace call
// and crashes when the call answers anything: a verifier with a weakness that
// the workspace's answers reach. In the control run, every call fails at once
// and it writes a report.
const crashesOnAnswers = `import base64, http.client, json, socket, sys
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect("/run/feval.sock")
c = Unix("localhost", timeout=60)
c.request("POST", "/feval/ws", body=json.dumps({"args": ["/usr/bin/python3", "-c", "print('an answer')"],
          "stdin": "", "env": {}, "files": "", "seconds": 5}), headers={"Content-Type": "application/json"})
answer = json.loads(c.getresponse().read())
if base64.b64decode(answer.get("stdout") or ""):
    sys.exit(3)
with open("/out/junit.xml", "w") as f:
    f.write('<testsuites><testsuite name="pytest"></testsuite></testsuites>')
`

// TestControlRunChargesThePack: a verifier that fails only with the
// workspace's answers reports in the control run, so the failure is the
// pack's: every declared test counts as failed, the reason is recorded, and
// the scenario is not infra_error.
func TestControlRunChargesThePack(t *testing.T) {
	dir, spec := verifierTask(t)
	sc := spec.Scenarios[0]
	ws := filepath.Join(dir, scenarios.ScenarioDir, sc.Name, "workspace")
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(scenarios.VerifierFile)), []byte(crashesOnAnswers), 0o644); err != nil {
		t.Fatal(err)
	}
	r, infra, control := scenarios.RunVerifier(context.Background(), spec, dir, sc, ws)
	if infra != "" || r == nil {
		t.Fatalf("a verifier that crashes only on the workspace's answers: infra %q, want the pack's result", infra)
	}
	if !strings.Contains(control, "crashed") || !strings.Contains(control, "control run") {
		t.Errorf("control finding %q: want it to name the crash and the control run", control)
	}
	if r.Summary.Tests != len(sc.Tests) || r.Summary.Failed != len(sc.Tests) || r.Summary.Passed != 0 {
		t.Errorf("report %+v: want all %d declared tests failed", r.Summary, len(sc.Tests))
	}
}
