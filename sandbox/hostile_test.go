//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/feval/feval/sandbox"
)

// The tests in this file run programs written as an attacker would, each
// against one promise of docs/SANDBOX.md. Every one is bounded to a few
// seconds so that a broken promise does not disturb the host for long.

// probe runs the syscallprobe commands calls in the sandbox under limits.
func probe(t *testing.T, limits sandbox.Limits, calls ...string) sandbox.Result {
	t.Helper()
	bin := goBinaries(t)
	return run(t, sandbox.Spec{
		Args:   append([]string{"/in/bin/syscallprobe"}, calls...),
		Inputs: []sandbox.Mount{{Source: bin, Target: "/in/bin"}},
		Limits: limits,
	})
}

// TestOnlyUnixSockets: the program can make Unix sockets (the granted socket
// and local IPC need them) and nothing else, so no kernel socket memory
// outside the memory cgroup's reach can be queued.
func TestOnlyUnixSockets(t *testing.T) {
	res := probe(t, sandbox.Limits{}, "socket-inet", "socket-inet6", "socket-netlink", "socketpair-inet", "socket-unix", "socketpair-unix")
	expectClass(t, res, sandbox.ClassOK)
	want := "socket-inet: address family not supported by protocol\n" +
		"socket-inet6: address family not supported by protocol\n" +
		"socket-netlink: address family not supported by protocol\n" +
		"socketpair-inet: address family not supported by protocol\n" +
		"socket-unix: ok\nsocketpair-unix: ok\n"
	if string(res.Stdout) != want {
		t.Errorf("got:\n%s\nwant:\n%s", res.Stdout, want)
	}
}

// TestUnixSocketMemoryCounted: data queued in Unix sockets is charged to the
// run's memory limit.
func TestUnixSocketMemoryCounted(t *testing.T) {
	code := `
import socket
pairs = []
total = 0
for i in range(400):
    a, b = socket.socketpair()
    a.setblocking(False)
    try:
        while True:
            total += a.send(b"x" * 65536)
    except BlockingIOError:
        pass
    pairs.append((a, b))
    if i % 20 == 0:
        print(total >> 20, flush=True)
print("queued", total >> 20, "MiB")
`
	res := run(t, sandbox.Spec{Args: py(code), Env: env(), Limits: sandbox.Limits{MemoryBytes: 48 << 20, WallMillis: 20_000}})
	expectClass(t, res, sandbox.ClassOOM)
	if res.PeakMemoryBytes > 48<<20 {
		t.Errorf("peak memory %d above the 48 MiB limit", res.PeakMemoryBytes)
	}
}

// TestDevicesReadOnly: the program can use /dev/null and friends but cannot
// change the host's device nodes (their times are visible to every other run).
func TestDevicesReadOnly(t *testing.T) {
	var before [5]unix.Stat_t
	devs := []string{"null", "zero", "full", "random", "urandom"}
	for i, d := range devs {
		if err := unix.Stat("/dev/"+d, &before[i]); err != nil {
			t.Fatal(err)
		}
	}
	script := `
for d in null zero full random urandom; do
	if touch /dev/$d 2>/dev/null; then echo "touched $d"; fi
	if chmod 0600 /dev/$d 2>/dev/null; then echo "chmod $d"; fi
done
echo data >/dev/null && head -c 4 /dev/zero | wc -c && head -c 4 /dev/urandom | wc -c
`
	res := run(t, sandbox.Spec{Args: sh(script), Env: env()})
	expectClass(t, res, sandbox.ClassOK)
	if got := string(res.Stdout); got != "4\n4\n" {
		t.Errorf("inside the sandbox:\n%s", got)
	}
	for i, d := range devs {
		var after unix.Stat_t
		if err := unix.Stat("/dev/"+d, &after); err != nil {
			t.Fatal(err)
		}
		if after.Mtim != before[i].Mtim || after.Ctim != before[i].Ctim || after.Mode != before[i].Mode {
			t.Errorf("/dev/%s changed on the host: mtime %v -> %v, ctime %v -> %v, mode %o -> %o", d,
				before[i].Mtim, after.Mtim, before[i].Ctim, after.Ctim, before[i].Mode, after.Mode)
		}
	}
}

var countLine = regexp.MustCompile(`(?m)^([a-z ]+): (\d+) `)

func counts(t *testing.T, out string) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, g := range countLine.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(g[2])
		m[g[1]] = n
	}
	return m
}

// TestPerUserCountsBounded: kernel objects counted per user on the host
// (inotify instances and watches, POSIX timers, message queues) are bounded
// by the sandbox, far below what the host allows one user.
func TestPerUserCountsBounded(t *testing.T) {
	res := probe(t, sandbox.Limits{}, "count:inotify", "count:watches", "count:timers", "count:mqueues")
	expectClass(t, res, sandbox.ClassOK)
	got := counts(t, string(res.Stdout))
	t.Logf("%s", res.Stdout)
	bounds := map[string]int{
		"inotify instances": sandbox.MaxInotifyInstances,
		"inotify watches":   sandbox.MaxInotifyWatches,
		"posix timers":      sandbox.MaxPendingSignals,
		"message queues":    0,
	}
	for k, max := range bounds {
		n, ok := got[k]
		if !ok {
			t.Errorf("no count for %s in:\n%s", k, res.Stdout)
			continue
		}
		if n > max {
			t.Errorf("%s: the program got %d, the sandbox's bound is %d", k, n, max)
		}
	}
	// Some of each, where allowed: the limits are limits, not refusals.
	if got["inotify instances"] == 0 || got["posix timers"] == 0 {
		t.Errorf("the program could not use inotify or timers at all:\n%s", res.Stdout)
	}
}

// TestSiblingMemoryRule: the processes of one program are one trust domain.
// They may read each other's memory by either route the kernel offers
// (/proc/PID/mem and process_vm_readv, which are the same permission check);
// the sandbox's init is out of their reach by both.
func TestSiblingMemoryRule(t *testing.T) {
	res := probe(t, sandbox.Limits{WallMillis: 20_000}, "sibling-memory")
	expectClass(t, res, sandbox.ClassOK)
	want := "sibling /proc/PID/mem: read\nsibling process_vm_readv: read\n" +
		"init /proc/PID/mem: refused\ninit process_vm_readv: refused\n"
	if string(res.Stdout) != want {
		t.Errorf("got:\n%s\nwant:\n%s", res.Stdout, want)
	}
}

// TestPendingViolationRecorded: a denied call still waiting for the
// sandbox's answer when the program exits is a violation, every time.
func TestPendingViolationRecorded(t *testing.T) {
	for i := 0; i < 8; i++ {
		res := probe(t, sandbox.Limits{}, "race:ptrace")
		t.Logf("run %d: %s", i, res.Detail)
		if res.Class != sandbox.ClassViolation {
			t.Fatalf("run %d: class %s (%s), want violation; stdout %q", i, res.Class, res.Detail, res.Stdout)
		}
	}
}

// TestLimitsHoldUnderSaturation runs threads that ping-pong through pipes on
// every core: the CPU and wall limits still end the run on time.
func TestLimitsHoldUnderSaturation(t *testing.T) {
	t.Run("cpu", func(t *testing.T) {
		res := probe(t, sandbox.Limits{CPUMillis: 1000, WallMillis: 8000, Processes: 512}, "pingpong")
		t.Logf("cpu %d ms, wall %d ms, %s", res.CPUMillis, res.WallMillis, res.Detail)
		expectClass(t, res, sandbox.ClassTimeout)
		if !strings.Contains(res.Detail, "CPU") {
			t.Errorf("detail %q does not name the CPU limit", res.Detail)
		}
		if res.CPUMillis > 1500 {
			t.Errorf("%d ms of CPU under a 1000 ms limit", res.CPUMillis)
		}
	})
	t.Run("wall", func(t *testing.T) {
		quotas := make(chan []string, 1)
		stop := make(chan struct{})
		go func() { quotas <- watchCPUQuotas(stop) }()
		res := probe(t, sandbox.Limits{CPUMillis: sandbox.NoLimit, WallMillis: 1500, Processes: 512}, "pingpong")
		t.Logf("cpu %d ms, wall %d ms, %s", res.CPUMillis, res.WallMillis, res.Detail)
		expectClass(t, res, sandbox.ClassTimeout)
		if !strings.Contains(res.Detail, "wall") {
			t.Errorf("detail %q does not name the wall limit", res.Detail)
		}
		if res.WallMillis > 2500 {
			t.Errorf("ran %d ms under a 1500 ms wall limit", res.WallMillis)
		}
		// Every core but one (half of a single core): the supervisor keeps
		// a core's share. One period of slack.
		share := float64(runtime.NumCPU() - 1)
		if share < 1 {
			share = 0.5
		}
		if max := int64(share*float64(res.WallMillis)) + 100; res.CPUMillis > max {
			t.Errorf("%d ms of CPU in %d ms of wall time: more than %.1f cores", res.CPUMillis, res.WallMillis, share)
		}
		// The cap is the kernel's (a loaded host may hide its absence above).
		close(stop)
		seen := <-quotas
		want := fmt.Sprintf("%d %d", int64(share*100_000), 100_000)
		if len(seen) == 0 {
			t.Error("no CPU bandwidth limit seen on the run's cgroup")
		}
		for _, q := range seen {
			if q != want {
				t.Errorf("run cgroup CPU bandwidth %q, want %q (quota, period in µs)", q, want)
			}
		}
	})
}

// watchCPUQuotas reads, until stop closes, the CPU bandwidth limits ("quota
// period" in µs) of the run cgroups that exist meanwhile.
func watchCPUQuotas(stop <-chan struct{}) []string {
	seen := map[string]string{}
	for {
		select {
		case <-stop:
			var out []string
			for _, q := range seen {
				out = append(out, q)
			}
			return out
		case <-time.After(20 * time.Millisecond):
		}
		for _, h := range sandbox.CgroupHomes() {
			dirs, _ := filepath.Glob(filepath.Join(h, fmt.Sprintf("feval-sandbox-%d-*", os.Getpid())))
			for _, d := range dirs {
				if b, err := os.ReadFile(filepath.Join(d, "cpu.max")); err == nil {
					seen[d] = strings.TrimSpace(string(b))
					continue
				}
				q, err1 := os.ReadFile(filepath.Join(d, "cpu.cfs_quota_us"))
				p, err2 := os.ReadFile(filepath.Join(d, "cpu.cfs_period_us"))
				if err1 == nil && err2 == nil {
					seen[d] = strings.TrimSpace(string(q)) + " " + strings.TrimSpace(string(p))
				}
			}
		}
	}
}

// TestInputPathsHidden: the host paths of the inputs (user names, home
// directories, the store's layout) do not show in the sandbox's mount table,
// nor in the init's.
func TestInputPathsHidden(t *testing.T) {
	base, err := os.MkdirTemp("/var/tmp", "feval-secret-layout-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "store-dir")
	file := filepath.Join(base, "store-file")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "data"), file} {
		if err := os.WriteFile(p, []byte("input"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := run(t, sandbox.Spec{
		Args:   sh(`cat /proc/self/mountinfo /proc/self/mounts /proc/1/mountinfo 2>/dev/null; cat /in/d/data /in/f`),
		Env:    env(),
		Inputs: []sandbox.Mount{{Source: dir, Target: "/in/d"}, {Source: file, Target: "/in/f"}},
	})
	expectClass(t, res, sandbox.ClassOK)
	out := string(res.Stdout)
	if !strings.HasSuffix(out, "inputinput") {
		t.Errorf("inputs not readable:\n%s", out)
	}
	// A file input's own name shows (it is bound from an overlay of its
	// directory), nothing above it; a directory input shows nothing.
	if strings.Contains(out, "feval-secret-layout") || strings.Contains(out, "store-dir") || strings.Contains(out, "/var/tmp") {
		t.Errorf("host paths of the inputs visible in the mount table:\n%s", out)
	}
}

// TestInputDirectoriesList: a directory input lists its entries at every
// level, its top included (Python's import system, among others, depends on
// listing), and the empty layer behind it leaves nothing in the root.
func TestInputDirectoriesList(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "pkg", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"top.py", "pkg/__init__.py", "pkg/sub/leaf.py"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("x = 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := run(t, sandbox.Spec{
		Args:   sh(`ls /in/d; echo --; ls /in/d/pkg; echo --; ls /in/d/pkg/sub; echo --; ls -a / | grep -c feval-staging || true`),
		Env:    env(),
		Inputs: []sandbox.Mount{{Source: dir, Target: "/in/d"}},
	})
	expectClass(t, res, sandbox.ClassOK)
	if got, want := string(res.Stdout), "pkg\ntop.py\n--\n__init__.py\nsub\n--\nleaf.py\n--\n0\n"; got != want {
		t.Errorf("listing of a directory input:\n%s\nwant:\n%s", got, want)
	}
}

// TestRlimitBackstops: every process carries the per-process limits behind
// the cgroup's: RLIMIT_CPU just above the CPU budget, no message queues,
// bounded queued signals.
func TestRlimitBackstops(t *testing.T) {
	code := `import resource as r
for n in ("RLIMIT_CPU", "RLIMIT_MSGQUEUE", "RLIMIT_SIGPENDING"):
    print(n, *r.getrlimit(getattr(r, n)))`
	res := run(t, sandbox.Spec{Args: py(code), Env: env(), Limits: sandbox.Limits{CPUMillis: 1500}})
	expectClass(t, res, sandbox.ClassOK)
	want := fmt.Sprintf("RLIMIT_CPU 3 4\nRLIMIT_MSGQUEUE 0 0\nRLIMIT_SIGPENDING %d %d\n", sandbox.MaxPendingSignals, sandbox.MaxPendingSignals)
	if string(res.Stdout) != want {
		t.Errorf("got:\n%s\nwant:\n%s", res.Stdout, want)
	}
	res = run(t, sandbox.Spec{Args: py(code), Env: env(), Limits: sandbox.Limits{CPUMillis: sandbox.NoLimit}})
	if !strings.HasPrefix(string(res.Stdout), "RLIMIT_CPU -1 -1\n") {
		t.Errorf("without a CPU limit:\n%s", res.Stdout)
	}
}
