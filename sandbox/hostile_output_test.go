//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/feval/feval/sandbox"
)

// outputBombs are programs whose output takes little room in /out but
// would take much more on the host.
var outputBombs = []struct{ name, script string }{
	{"hard links", `head -c 1000000 /dev/zero >/out/f && i=0; while [ $i -lt 300 ]; do ln /out/f /out/l$i; i=$((i+1)); done`},
	{"sparse file", `truncate -s 300M /out/sparse`},
	{"many names", `touch /out/f && i=0; while [ $i -lt 300 ]; do ln /out/f /out/l$i; i=$((i+1)); done`},
}

// TestOutputBoundedOnHost: what copy-out writes on the host is bounded by the
// output limits, counted as the host will see it (apparent sizes, every name).
func TestOutputBoundedOnHost(t *testing.T) {
	for _, b := range outputBombs {
		t.Run(b.name, func(t *testing.T) {
			out := world(t)
			res := run(t, sandbox.Spec{
				Args:      sh(b.script),
				Env:       env(),
				OutputDir: out,
				Limits:    sandbox.Limits{OutputBytes: 2 << 20, OutputFiles: 100},
			})
			expectClass(t, res, sandbox.ClassOutputExceeded)
			expectEmpty(t, out)
			if res.OutputFiles != 0 || res.OutputBytes != 0 {
				t.Errorf("result says %d files, %d bytes copied", res.OutputFiles, res.OutputBytes)
			}
		})
	}
	t.Run("within", func(t *testing.T) {
		out := world(t)
		res := run(t, sandbox.Spec{
			Args:      sh(`head -c 1000 /dev/zero >/out/f && ln /out/f /out/g`),
			Env:       env(),
			OutputDir: out,
			Limits:    sandbox.Limits{OutputBytes: 2 << 20, OutputFiles: 100},
		})
		expectClass(t, res, sandbox.ClassOK)
		if res.OutputFiles != 2 || res.OutputBytes != 2000 {
			t.Errorf("copied %d files, %d bytes; want 2, 2000", res.OutputFiles, res.OutputBytes)
		}
	})
}

// TestOutputHostFull: when the host runs out of space for the program's
// output, the run is output_exceeded (not an infrastructure failure) and
// nothing is left half-copied.
func TestOutputHostFull(t *testing.T) {
	requireSandbox(t)
	out := world(t)
	// A small file system for the output, mounted in a mount namespace of
	// this thread's own: Run forks the sandbox from the calling thread and
	// copies out from it, and the host never sees the mount. The thread is
	// never unlocked, so it ends with the test.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		t.Skipf("cannot create a mount namespace (not root?): %v", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", out, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		t.Skipf("cannot mount a small file system for the output: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(out, unix.MNT_DETACH) })
	res := run(t, sandbox.Spec{
		Args:      sh(`head -c 600000 /dev/zero >/out/a && head -c 600000 /dev/zero >/out/b`),
		Env:       env(),
		OutputDir: out,
		Limits:    sandbox.Limits{OutputBytes: 4 << 20},
	})
	expectClass(t, res, sandbox.ClassOutputExceeded)
	expectEmpty(t, out)
}

// TestNothingCopiedAfterLimit: a run ended by a limit copies nothing out.
func TestNothingCopiedAfterLimit(t *testing.T) {
	cases := []struct {
		name   string
		script string
		limits sandbox.Limits
		class  sandbox.Class
	}{
		{"output full", `echo x >/out/x; cat /dev/zero >/out/fill 2>/dev/null; exit 0`, sandbox.Limits{OutputBytes: 1 << 20}, sandbox.ClassOutputExceeded},
		{"tmp full", `echo x >/out/x; cat /dev/zero >/tmp/fill 2>/dev/null; exit 0`, sandbox.Limits{TmpBytes: 1 << 20}, sandbox.ClassOutputExceeded},
		{"oom", `echo x >/out/x; python3 -c 'b = [bytearray(1 << 20) for _ in range(200)]'; exit 0`, sandbox.Limits{MemoryBytes: 64 << 20}, sandbox.ClassOOM},
		{"pids", `echo x >/out/x; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 3 & done; wait`, sandbox.Limits{Processes: 4}, sandbox.ClassPidsExceeded},
		{"timeout", `echo x >/out/x; sleep 5`, sandbox.Limits{WallMillis: 300}, sandbox.ClassTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := world(t)
			res := run(t, sandbox.Spec{Args: sh(c.script), Env: env(), OutputDir: out, Limits: c.limits})
			expectClass(t, res, c.class)
			expectEmpty(t, out)
		})
	}
}

// TestOutputTooDeep: output trees whose host paths would pass PATH_MAX, or
// that nest deeper than the sandbox copies, are refused as output_exceeded.
func TestOutputTooDeep(t *testing.T) {
	// Relative steps: inside the sandbox neither tree is a problem.
	nest := "import os\nfor _ in range(%d):\n    os.mkdir(%q); os.chdir(%q)\nopen('f', 'w').write('x')\n"
	cases := []struct{ name, code, detail string }{
		{"deep", fmt.Sprintf(nest, 300, "d", "d"), "deeper than"},
		{"long path", fmt.Sprintf(nest, 30, strings.Repeat("n", 200), strings.Repeat("n", 200)), "longer than the host's limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := world(t)
			res := run(t, sandbox.Spec{Args: py(c.code), Env: env(), OutputDir: out})
			expectClass(t, res, sandbox.ClassOutputExceeded)
			if !strings.Contains(res.Detail, c.detail) {
				t.Errorf("detail %q does not explain", res.Detail)
			}
			expectEmpty(t, out)
		})
	}
}

func expectEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("copied out despite the limit: %v", names)
	}
}
