package scenarios

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

const junitDoc = `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5" time="0.1" timestamp="2026-12-01T00:00:00" hostname="sandbox">` +
	`<testcase classname="test_a" name="test_ok" time="0.001"/>` +
	`<testcase classname="test_a" name="test_fail" time="0.001"><failure message="assert">trace</failure></testcase>` +
	`<testcase classname="test_a" name="test_err" time="0.001"><error message="boom">trace</error></testcase>` +
	`<testcase classname="test_a" name="test_skip" time="0.001"><skipped message="skip"/></testcase>` +
	`<testcase classname="test_a" name="test_twice" time="0.001"/><testcase classname="test_a" name="test_twice" time="0.001"/>` +
	`<testcase classname="test_b" name="test_extra" time="0.001"/>` +
	`</testsuite></testsuites>`

func TestParseJUnit(t *testing.T) {
	declared := []string{"test_a::test_ok", "test_a::test_fail", "test_a::test_err", "test_a::test_skip", "test_a::test_twice", "test_a::test_missing"}
	r, err := ParseJUnit([]byte(junitDoc), declared)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{TestPassed, TestFailed, TestFailed, TestSkipped, TestOther, TestOther}
	for i, tr := range r.Tests {
		if tr.Name != declared[i] || tr.Status != want[i] {
			t.Errorf("test %d: %s %s, want %s %s", i, tr.Name, tr.Status, declared[i], want[i])
		}
	}
	if s := r.Summary; s != (Summary{Tests: 6, Passed: 1, Failed: 2, Skipped: 1, Other: 2}) {
		t.Errorf("summary %+v", s)
	}
	for name, doc := range map[string]string{
		"not xml":     "passed: 5",
		"no suite":    `<testcase classname="a" name="b"/>`,
		"unclosed":    `<testsuites><testsuite><testcase classname="a" name="b">`,
		"too large":   "<testsuites>" + strings.Repeat(" ", maxReportBytes) + "</testsuites>",
		"bad element": `<testsuites><testsuite><testcase classname="a" name="b"><failure></testcase></testsuite></testsuites>`,
	} {
		if _, err := ParseJUnit([]byte(doc), declared); !errors.Is(err, ErrReport) {
			t.Errorf("%s: %v, want ErrReport", name, err)
		}
	}
}

func FuzzParseJUnit(f *testing.F) {
	f.Add([]byte(junitDoc))
	f.Add([]byte(`<testsuites><testsuite/></testsuites>`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		r, err := ParseJUnit(doc, []string{"test_a::test_ok", "test_a::test_fail"})
		if err != nil {
			return
		}
		s := r.Summary
		if s.Tests != 2 || s.Passed+s.Failed+s.Skipped+s.Other != 2 || len(r.Tests) != 2 {
			t.Fatalf("summary %+v of %d tests", s, len(r.Tests))
		}
	})
}

// TestLoadTaskPins: a task whose harness is not the pinned one, or whose
// models are not the meter's, is refused.
func TestLoadTaskPins(t *testing.T) {
	write := func(dir, rel, s string) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(s), 0o644)
	}
	dir := t.TempDir()
	write(dir, HarnessFile, string(Harness()))
	write(dir, VerifierFile, string(Verifier()))
	write(dir, "meter.json", `{"format":"feval.meter.v1","models":[{"name":"m","input_micro_usd_per_mtok":1,"output_micro_usd_per_mtok":1,"upstream":""}],"cap_micro_usd":300000,"default_max_tokens":4096,"max_request_bytes":1048576,"max_response_bytes":4194304,"timeouts":{"connect_millis":1,"header_millis":1,"idle_millis":1,"attempt_millis":1},"retry":{"max_attempts":1,"initial_backoff_millis":0,"max_backoff_millis":0},"rate":{"max_concurrent":8,"calls":120,"window_millis":60000}}`)
	for _, p := range []string{"scenarios/s1/instruction.md", "scenarios/s1/workspace/a.py"} {
		write(dir, p, "x\n")
	}
	task := func(harness digest.Digest, model string) string {
		return `{"format":"feval.scenarios.task.v1","protocol":"scenarios","models":["` + model + `"],` +
			`"harness":{"digest":"` + harness.String() + `","max_turns":4,"max_tokens":100,"wall_millis":5000},` +
			`"verifier":{"digest":"` + digest.FromBytes(Verifier()).String() + `","wall_millis":5000},` +
			`"hidden":"` + digest.FromString("hidden tests").String() + `",` +
			`"scenarios":[{"name":"s1","tests":["test_a::test_x"]}]}`
	}
	write(dir, TaskFile, task(digest.FromBytes(Harness()), "m"))
	if _, err := LoadTask(os.DirFS(dir)); err != nil {
		t.Fatalf("a valid task: %v", err)
	}
	for name, body := range map[string]string{
		"other harness": task(digest.FromString("another harness"), "m"),
		"other models":  task(digest.FromBytes(Harness()), "n"),
		"unknown field": strings.Replace(task(digest.FromBytes(Harness()), "m"), `"protocol"`, `"extra":1,"protocol"`, 1),
	} {
		write(dir, TaskFile, body)
		if _, err := LoadTask(os.DirFS(dir)); !errors.Is(err, ErrTask) {
			t.Errorf("%s: %v, want ErrTask", name, err)
		}
	}
	// Hidden tests inside the task would be readable by every miner.
	write(dir, TaskFile, task(digest.FromBytes(Harness()), "m"))
	write(dir, "scenarios/s1/hidden/test_a.py", "def test_x(): pass\n")
	if _, err := LoadTask(os.DirFS(dir)); !errors.Is(err, ErrTask) || !strings.Contains(err.Error(), "publish them apart") {
		t.Errorf("a task with hidden tests: %v", err)
	}
}
