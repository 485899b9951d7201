//go:build linux

package sandbox_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/feval/feval/sandbox"
)

// TestCheckTellsTheTruth compares Check with what a run actually uses and
// with the kernel's own answers.
func TestCheckTellsTheTruth(t *testing.T) {
	requireSandbox(t)
	c := sandbox.Check()
	if _, err := json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	t.Logf("capabilities: %+v", c)

	// The kernel's own answer on Landlock.
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		abi = 0
	}
	if c.LandlockABI != int(abi) || c.Landlock != (abi > 0) {
		t.Errorf("Check says Landlock %v ABI %d, the kernel says %d", c.Landlock, c.LandlockABI, abi)
	}

	holds := map[string]bool{}
	for _, g := range c.Guarantees() {
		holds[g.Name] = g.Holds
		if g.Holds != (len(g.Missing) == 0) {
			t.Errorf("%s: holds %v but missing %v", g.Name, g.Holds, g.Missing)
		}
	}
	if len(holds) != 9 {
		t.Errorf("%d guarantees, want 9", len(holds))
	}

	// Where Check says every guarantee holds, a default run must succeed and
	// use exactly the mechanisms Check found.
	for name, ok := range holds {
		if !ok {
			t.Skipf("guarantee %s does not hold here; the runs below would fail by design", name)
		}
	}
	res := run(t, sandbox.Spec{Args: []string{"/bin/true"}})
	used := map[string]bool{}
	for _, m := range res.Mechanisms {
		used[m] = true
	}
	want := []string{"user-namespace", "network-namespace", "pid-namespace", "mount-namespace",
		"cgroup-" + c.MemoryCgroup + "-memory", "cgroup-" + c.PidsCgroup + "-pids", "cgroup-" + c.CPUCgroup + "-cpu",
		"cgroup-" + c.CPUQuotaCgroup + "-cpu-quota"}
	if c.Landlock {
		want = append(want, "landlock-abi-"+strconv.Itoa(c.LandlockABI))
	}
	if c.SeccompUserNotify {
		want = append(want, "seccomp-user-notify")
	} else {
		want = append(want, "seccomp-kill")
	}
	for _, w := range want {
		if !used[w] {
			t.Errorf("Check promises %s but the run used %v", w, res.Mechanisms)
		}
	}
	if used["landlock-abi-"+strconv.Itoa(c.LandlockABI)] != c.Landlock {
		t.Errorf("landlock in run %v, in Check %v", res.Mechanisms, c.Landlock)
	}
}
