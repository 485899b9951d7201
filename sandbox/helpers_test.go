//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/feval/feval/sandbox"
)

// requireSandbox skips the test where the host cannot isolate at all; where it
// can, every guarantee test runs.
func requireSandbox(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox needs Linux")
	}
}

// run runs spec and fails the test if Run reports an error.
func run(t testing.TB, spec sandbox.Spec) sandbox.Result {
	t.Helper()
	requireSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sandbox.Run(ctx, spec)
	if err != nil {
		t.Fatalf("Run: %v (class %s, detail %q, stderr %q)", err, res.Class, res.Detail, res.Stderr)
	}
	return res
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }
func py(code string) []string   { return []string{"/usr/bin/python3", "-c", code} }
func env(kv ...string) []string { return append([]string{"PATH=/usr/bin:/bin"}, kv...) }
func expectClass(t testing.TB, res sandbox.Result, want sandbox.Class) {
	t.Helper()
	if res.Class != want {
		t.Fatalf("class %s (%s), want %s\nexit %d signal %d violation %q\nstdout: %s\nstderr: %s",
			res.Class, res.Detail, want, res.ExitCode, res.Signal, res.Violation, res.Stdout, res.Stderr)
	}
}

// survivors lists host processes whose command line contains marker.
func survivors(t testing.TB, marker string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte(marker)) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// expectNoSurvivors waits briefly for the kernel to finish reaping, then
// fails if any process with marker in its command line is alive.
func expectNoSurvivors(t testing.TB, marker string) {
	t.Helper()
	var left []string
	for i := 0; i < 50; i++ {
		if left = survivors(t, marker); len(left) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("processes outlived the run: %v", left)
}

// hostLeftovers lists cgroups and root mount points that Run, called by this
// process, left behind (other processes on the host may be running sandboxes
// of their own meanwhile).
func hostLeftovers(t testing.TB) []string {
	t.Helper()
	prefix := fmt.Sprintf("feval-sandbox-%d-*", os.Getpid())
	var left []string
	for _, h := range sandbox.CgroupHomes() {
		m, _ := filepath.Glob(filepath.Join(h, prefix))
		left = append(left, m...)
	}
	m, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix))
	return append(left, m...)
}

// newLeftovers returns what after holds that before did not: other processes on
// the host may be running sandboxes of their own meanwhile.
func newLeftovers(before, after []string) []string {
	var out []string
	for _, a := range after {
		if !slices.Contains(before, a) {
			out = append(out, a)
		}
	}
	return out
}

// goPackages are the Go programs the tests run inside the sandbox.
var goPackages = []string{
	"./fixtures/sandbox/resolve", "./fixtures/sandbox/setuid", "./fixtures/sandbox/namespace",
	"./sandbox/testdata/syscallprobe",
}

// goBuild holds the one build of goPackages per test binary; TestMain
// removes its directory.
var goBuild struct {
	once sync.Once
	dir  string
	err  error
}

// goBinaries builds goPackages (cgo off, outside the sandbox) into a
// directory every user can traverse, on the host's ordinary file system where
// setuid bits work, and returns the directory.
func goBinaries(t testing.TB) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH to build the Go fixtures")
	}
	goBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "feval-sandbox-bin-")
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			goBuild.err = err
			return
		}
		goBuild.dir = dir
		cmd := exec.Command(goTool, append([]string{"build", "-o", dir + "/"}, goPackages...)...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			goBuild.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if goBuild.err != nil {
		t.Fatal(goBuild.err)
	}
	return goBuild.dir
}

// world makes a fresh directory readable by the sandbox's unprivileged user.
func world(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
