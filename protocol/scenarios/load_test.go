package scenarios_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/scenarios"
)

// busy keeps the machine loaded: twice as many processes as CPUs, each
// spinning until stop is called or, whatever happens to the test, until
// seconds have passed (so a killed test leaves no load behind for long).
func busy(t *testing.T, seconds int) (stop func()) {
	t.Helper()
	spin := fmt.Sprintf("import time\nend = time.monotonic() + %d\nwhile time.monotonic() < end:\n    pass\n", seconds)
	var cmds []*exec.Cmd
	for range 2 * runtime.NumCPU() {
		cmd := exec.Command("/usr/bin/python3", "-c", spin)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestLoadNeverDecides: a solved pack scores the same on a machine kept busy
// (twice as many spinning processes as CPUs) as on a quiet one: every
// scenario scored, none infra_error, the same tests passed. The wall-clock
// bounds are generous enough for load alone never to decide (PROTOCOL.md
// §6c, "Load").
func TestLoadNeverDecides(t *testing.T) {
	w := newWorld(t, scenariotask.Config{Scenarios: []string{"13-date-month", "09-temperature"}})
	evaluate := func(skill string) scenarios.Verdict {
		t.Helper()
		dir := pack(t, "kimi-k2-instruct")
		if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("# Repair skill, "+skill+"\n\nRead the code, make the smallest fix.\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		v, _ := w.evaluate(w.submit(dir))
		if v.Status != protocol.VerdictPassed {
			t.Fatalf("%s: verdict %s (%s %s), want passed", skill, v.Status, v.Reason, v.Detail)
		}
		return v
	}
	quiet := evaluate("quiet")
	stop := busy(t, 300)
	loaded := evaluate("loaded")
	stop()
	for i, q := range quiet.Scenarios {
		l := loaded.Scenarios[i]
		if q.Passed != q.Total {
			t.Errorf("%s on a quiet machine: %d of %d passed, want the scripted solution to pass all", q.Name, q.Passed, q.Total)
		}
		if l.Status != scenarios.ScenarioScored || l.Passed != q.Passed || l.Stop != q.Stop || l.Turns != q.Turns {
			t.Errorf("%s under load: %s, %d of %d passed, stop %s after %d turns (%s); quiet: %d passed, stop %s after %d turns",
				l.Name, l.Status, l.Passed, l.Total, l.Stop, l.Turns, l.Detail, q.Passed, q.Stop, q.Turns)
		}
	}
}
