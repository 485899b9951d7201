//go:build linux

package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/feval/feval/sandbox"
)

// The start-up benchmarks time a sandboxed /bin/true from the call to the
// result, and report the median (the mean is at the mercy of a loaded
// machine). Run them together, for example
//
//	go test -run='^$' -bench=StartTrue -benchtime=200x ./sandbox/
//
// BenchmarkStartTruePaired alternates both tools in one loop, so that load
// from elsewhere affects them alike, and reports their ratio.

func BenchmarkStartTrue(b *testing.B) {
	benchStart(b, runSandboxTrue(sandbox.Limits{}))
}

// BenchmarkStartTrueNoCgroups is BenchmarkStartTrue without the limits that
// need cgroups, the closest match for what bwrap does.
func BenchmarkStartTrueNoCgroups(b *testing.B) {
	benchStart(b, runSandboxTrue(sandbox.Limits{MemoryBytes: sandbox.NoLimit, Processes: sandbox.NoLimit, CPUMillis: sandbox.NoLimit}))
}

func BenchmarkStartTrueBwrap(b *testing.B) {
	benchStart(b, runBwrapTrue(b))
}

func BenchmarkStartTruePaired(b *testing.B) {
	ours, peer := runSandboxTrue(sandbox.Limits{}), runBwrapTrue(b)
	var a, p []time.Duration
	for i := 0; i < b.N; i++ {
		a = append(a, timeOne(b, ours))
		p = append(p, timeOne(b, peer))
	}
	ma, mp := median(a), median(p)
	b.ReportMetric(ms(ma), "sandbox-median-ms")
	b.ReportMetric(ms(mp), "bwrap-median-ms")
	b.ReportMetric(float64(ma)/float64(mp), "ratio")
}

func runSandboxTrue(lim sandbox.Limits) func(testing.TB) {
	return func(tb testing.TB) {
		res, err := sandbox.Run(context.Background(), sandbox.Spec{Args: []string{"/bin/true"}, Limits: lim})
		if err != nil || res.Class != sandbox.ClassOK {
			tb.Fatalf("%s %v", res.Class, err)
		}
	}
}

// runBwrapTrue runs /bin/true under bubblewrap with the sandbox's isolation:
// all namespaces, the same read-only system directories, a fresh /proc, /dev
// and /tmp, the unprivileged uid, no capabilities, die-with-parent, and the
// sandbox's own seccomp filter.
func runBwrapTrue(b *testing.B) func(testing.TB) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Skip("bwrap (Debian package bubblewrap) is not installed: no peer to compare with")
	}
	filter, err := sandbox.SeccompFilter()
	if err != nil {
		b.Fatal(err)
	}
	fp := filepath.Join(b.TempDir(), "filter.bpf")
	if err := os.WriteFile(fp, filter, 0o600); err != nil {
		b.Fatal(err)
	}
	args := []string{"--unshare-all", "--die-with-parent", "--new-session",
		"--uid", "65534", "--gid", "65534", "--cap-drop", "ALL", "--hostname", "sandbox"}
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib64"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			t, _ := os.Readlink(d)
			args = append(args, "--symlink", t, d)
		default:
			args = append(args, "--ro-bind", d, d)
		}
	}
	args = append(args, "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/out", "--dir", "/in",
		"--chdir", "/out", "--seccomp", "3", "--", "/bin/true")
	return func(tb testing.TB) {
		f, err := os.Open(fp)
		if err != nil {
			tb.Fatal(err)
		}
		defer f.Close()
		cmd := exec.Command(bwrap, args...)
		cmd.Env = []string{}
		cmd.ExtraFiles = []*os.File{f}
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("bwrap: %v\n%s", err, out)
		}
	}
}

func benchStart(b *testing.B, f func(testing.TB)) {
	var d []time.Duration
	for i := 0; i < b.N; i++ {
		d = append(d, timeOne(b, f))
	}
	b.ReportMetric(ms(median(d)), "median-ms")
}

func timeOne(b *testing.B, f func(testing.TB)) time.Duration {
	t0 := time.Now()
	f(b)
	return time.Since(t0)
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
