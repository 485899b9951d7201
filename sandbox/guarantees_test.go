//go:build linux

package sandbox_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/feval/feval/sandbox"
)

// tcpListener accepts connections on the host's 127.0.0.1 and counts them.
func tcpListener(t *testing.T) (port int, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

func TestNoNetworkToHost(t *testing.T) {
	port, accepted := tcpListener(t)
	code := fmt.Sprintf(`
import socket
try:
    s = socket.socket()
    s.settimeout(2)
    s.connect(("127.0.0.1", %d))
    print("connected")
except OSError as e:
    print("refused:", e)
# Local IPC works over Unix sockets.
a, b = socket.socketpair()
a.sendall(b"x")
print("unix ok" if b.recv(1) == b"x" else "unix broken")
`, port)
	res := run(t, sandbox.Spec{Args: py(code), Env: env()})
	expectClass(t, res, sandbox.ClassOK)
	out := string(res.Stdout)
	if !strings.Contains(out, "refused:") || strings.Contains(out, "connected") {
		t.Errorf("the sandbox reached the host's 127.0.0.1:%d:\n%s", port, out)
	}
	if !strings.Contains(out, "unix ok") {
		t.Errorf("Unix sockets inside the sandbox do not work:\n%s", out)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("host listener accepted %d connections", n)
	}
}

func TestDNSFails(t *testing.T) {
	bin := goBinaries(t)
	dnsPort, queries := dnsServer(t)
	spec := sandbox.Spec{
		Args:   []string{"/in/bin/resolve"},
		Env:    []string{"DNS_SERVER=127.0.0.1:" + dnsPort, "RESOLVE_NAME=feval-escape.test"},
		Inputs: []sandbox.Mount{{Source: bin, Target: "/in/bin"}},
	}
	// The same program, unsandboxed, does resolve through the host's server:
	// the assertion below can fail.
	ctl := spec
	ctl.Unsandboxed = true
	ctl.Args = []string{filepath.Join(bin, "resolve")}
	cres, err := sandbox.Run(context.Background(), ctl)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cres.Stdout), "ESCAPED") || queries.Load() == 0 {
		t.Fatalf("control run did not resolve through the test server:\n%s", cres.Stdout)
	}
	before := queries.Load()

	res := run(t, spec)
	expectClass(t, res, sandbox.ClassOK)
	if strings.Contains(string(res.Stdout), "ESCAPED") {
		t.Errorf("name resolved inside the sandbox:\n%s", res.Stdout)
	}
	if n := queries.Load() - before; n != 0 {
		t.Errorf("host DNS server received %d queries from the sandbox", n)
	}
}

func TestHostFilesystemReadOnly(t *testing.T) {
	in := world(t)
	if err := os.WriteFile(filepath.Join(in, "data"), []byte("input"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := world(t)
	script := `
for p in / /etc /usr /usr/bin /in /in/data /dev /run /proc /tmp /out; do
	if touch "$p/feval-probe" 2>/dev/null; then echo "writable $p"; else echo "readonly $p"; fi
done
echo changed >/in/data/x 2>/dev/null; echo changed >>/in/data 2>/dev/null
cat /in/data/data 2>/dev/null || cat /in/data
`
	res := run(t, sandbox.Spec{
		Args:      sh(script),
		Env:       env(),
		Inputs:    []sandbox.Mount{{Source: filepath.Join(in, "data"), Target: "/in/data"}},
		OutputDir: out,
	})
	expectClass(t, res, sandbox.ClassOK)
	got := string(res.Stdout)
	for _, p := range []string{"/", "/etc", "/usr", "/usr/bin", "/in", "/in/data", "/dev", "/run", "/proc"} {
		if !strings.Contains(got, "readonly "+p+"\n") {
			t.Errorf("%s is writable inside the sandbox", p)
		}
	}
	for _, p := range []string{"/tmp", "/out"} {
		if !strings.Contains(got, "writable "+p+"\n") {
			t.Errorf("%s is not writable inside the sandbox", p)
		}
	}
	if !strings.HasSuffix(got, "input") {
		t.Errorf("input not readable: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(in, "data")); string(b) != "input" {
		t.Errorf("host input changed to %q", b)
	}
	if _, err := os.Stat(filepath.Join(out, "feval-probe")); err != nil {
		t.Errorf("file written to /out was not copied out: %v", err)
	}
}

func TestHostSecretsInvisible(t *testing.T) {
	// A store and a key outside the usual temporary directory, as a real
	// installation would have them, plus the caller's environment.
	base, err := os.MkdirTemp("/var/tmp", "feval-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	store := filepath.Join(base, "store")
	key := filepath.Join(base, "keys", "cosign.key")
	for _, p := range []string{filepath.Join(store, "blobs", "secret"), key} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("FEVAL_TEST_SECRET", "leaked")
	home, _ := os.UserHomeDir()
	script := fmt.Sprintf(`
for p in %s %s %s %s /work; do
	if ls "$p" >/dev/null 2>&1; then echo "visible $p"; fi
done
cat /proc/self/environ | tr '\0' '\n'
`, store, filepath.Join(store, "blobs", "secret"), key, home)
	res := run(t, sandbox.Spec{Args: sh(script), Env: []string{"PATH=/usr/bin:/bin", "ONLY=this"}})
	expectClass(t, res, sandbox.ClassOK)
	got := string(res.Stdout)
	if strings.Contains(got, "visible") {
		t.Errorf("host paths visible inside the sandbox:\n%s", got)
	}
	if strings.Contains(got, "leaked") || strings.Contains(got, "FEVAL_TEST_SECRET") {
		t.Errorf("the caller's environment leaked:\n%s", got)
	}
	if !strings.Contains(got, "ONLY=this") {
		t.Errorf("the spec's environment is missing:\n%s", got)
	}
}

func TestUnprivileged(t *testing.T) {
	res := run(t, sandbox.Spec{
		Args: sh(`id -u; id -g; grep -E '^(CapInh|CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; ls /proc/self/fd`),
		Env:  env(),
	})
	expectClass(t, res, sandbox.ClassOK)
	got := string(res.Stdout)
	want := []string{"65534\n65534\n", "CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in:\n%s", w, got)
		}
	}
	// ls opens one descriptor of its own (3) to read the directory.
	if !strings.HasSuffix(got, "0\n1\n2\n3\n") {
		t.Errorf("descriptors beyond stdin, stdout and stderr leaked into the program:\n%s", got)
	}
}

func TestSetuidPowerless(t *testing.T) {
	bin := goBinaries(t)
	p := filepath.Join(bin, "setuid")
	if err := os.Chown(p, 0, 0); err != nil {
		t.Skipf("cannot install a setuid-root binary (not root?): %v", err)
	}
	if err := os.Chmod(p, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	// Control: on the host, run by the same unprivileged user, the binary
	// does become root, so the assertion below can fail.
	ctl := exec.Command(p)
	ctl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sandbox.UID, Gid: sandbox.GID}}
	if out, _ := ctl.CombinedOutput(); !strings.Contains(string(out), "ESCAPED") {
		t.Fatalf("control: setuid binary did not gain root on the host: %s", out)
	}
	spec := sandbox.Spec{Args: []string{"/in/bin/setuid"}, Env: env(), Inputs: []sandbox.Mount{{Source: bin, Target: "/in/bin"}}}
	res := run(t, spec)
	expectClass(t, res, sandbox.ClassOK)
	if !strings.Contains(string(res.Stdout), "blocked: uid 65534 euid 65534") {
		t.Errorf("setuid binary gained privileges:\n%s", res.Stdout)
	}
}

// TestSyscallsDenied runs each forbidden system call as the program's main
// process and, for one, from a grandchild: each ends the run as a violation
// naming the call.
func TestSyscallsDenied(t *testing.T) {
	bin := goBinaries(t)
	mount := []sandbox.Mount{{Source: bin, Target: "/in/bin"}}
	violations := []struct{ call, want string }{
		{"ptrace", "ptrace"},
		{"mount", "mount"},
		{"umount2", "umount2"},
		{"pivot_root", "pivot_root"},
		{"chroot", "chroot"},
		{"unshare", "unshare"},
		{"setns", "setns"},
		{"clone-newuser", "clone"},
		{"kexec_load", "kexec_load"},
		{"bpf", "bpf"},
		{"init_module", "init_module"},
		{"finit_module", "finit_module"},
		{"delete_module", "delete_module"},
		{"reboot", "reboot"},
		{"swapon", "swapon"},
		{"child:ptrace", "ptrace"},
	}
	for _, v := range violations {
		t.Run(v.call, func(t *testing.T) {
			res := run(t, sandbox.Spec{Args: []string{"/in/bin/syscallprobe", v.call}, Inputs: mount})
			expectClass(t, res, sandbox.ClassViolation)
			if res.Violation != v.want {
				t.Errorf("violation %q, want %q", res.Violation, v.want)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		res := run(t, sandbox.Spec{
			Args:   []string{"/in/bin/syscallprobe", "keyctl", "perf_event_open", "io_uring_setup", "clone3", "socket-vsock", "socket-inet"},
			Inputs: mount,
		})
		expectClass(t, res, sandbox.ClassOK)
		want := "keyctl: operation not permitted\nperf_event_open: operation not permitted\n" +
			"io_uring_setup: operation not permitted\nclone3: function not implemented\n" +
			"socket-vsock: address family not supported by protocol\nsocket-inet: address family not supported by protocol\n"
		if string(res.Stdout) != want {
			t.Errorf("got:\n%s\nwant:\n%s", res.Stdout, want)
		}
	})
}

func TestTreeKilledOnTimeout(t *testing.T) {
	marker := fmt.Sprintf("7%d.%d", os.Getpid(), time.Now().UnixNano()%1e6)
	res := run(t, sandbox.Spec{
		Args:   sh(fmt.Sprintf("sleep %s & (setsid sleep %s &); sleep %s", marker, marker, marker)),
		Env:    env(),
		Limits: sandbox.Limits{WallMillis: 500},
	})
	expectClass(t, res, sandbox.ClassTimeout)
	if res.WallMillis < 500 || res.WallMillis > 5000 {
		t.Errorf("wall time %d ms for a 500 ms limit", res.WallMillis)
	}
	expectNoSurvivors(t, marker)
}

func TestTreeKilledOnCancel(t *testing.T) {
	requireSandbox(t)
	marker := fmt.Sprintf("8%d.%d", os.Getpid(), time.Now().UnixNano()%1e6)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := sandbox.Run(ctx, sandbox.Spec{
			Args: sh(fmt.Sprintf("(setsid sleep %s &); sleep %s", marker, marker)),
			Env:  env(),
		})
		done <- outcome{res, err}
	}()
	// Cancel once both sleepers are visible from the host.
	deadline := time.Now().Add(30 * time.Second)
	for len(survivors(t, marker)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the program's processes never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	start := time.Now()
	o := <-done
	if !errors.Is(o.err, context.Canceled) {
		t.Fatalf("error %v, want one wrapping context.Canceled", o.err)
	}
	if o.res.Class != sandbox.ClassInfraError {
		t.Errorf("class %s, want %s: a cancelled run is not the program's fault", o.res.Class, sandbox.ClassInfraError)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run returned %v after the context ended", d)
	}
	expectNoSurvivors(t, marker)
}

func TestMissingProgram(t *testing.T) {
	requireSandbox(t)
	res, err := sandbox.Run(context.Background(), sandbox.Spec{Args: []string{"no-such-program"}, Env: env()})
	var se *sandbox.SetupError
	if !errors.As(err, &se) || res.Class != sandbox.ClassInfraError || !strings.Contains(err.Error(), "no-such-program") {
		t.Errorf("Run = %s, %v; want an infra_error SetupError naming the program", res.Class, err)
	}
}

func TestMemoryLimit(t *testing.T) {
	res := run(t, sandbox.Spec{
		Args:   py(`chunks = []` + "\n" + `while True: chunks.append(b"\1" * (4 << 20))`),
		Env:    env(),
		Limits: sandbox.Limits{MemoryBytes: 64 << 20},
	})
	expectClass(t, res, sandbox.ClassOOM)
	if res.PeakMemoryBytes < 48<<20 || res.PeakMemoryBytes > 64<<20 {
		t.Errorf("peak memory %d, want just under the 64 MiB limit", res.PeakMemoryBytes)
	}
}

func TestProcessLimit(t *testing.T) {
	t.Run("within", func(t *testing.T) {
		res := run(t, sandbox.Spec{
			Args:   sh(`for i in 1 2 3 4 5 6; do sleep 0.3 & done; wait`),
			Env:    env(),
			Limits: sandbox.Limits{Processes: 8},
		})
		expectClass(t, res, sandbox.ClassOK)
	})
	t.Run("beyond", func(t *testing.T) {
		res := run(t, sandbox.Spec{
			Args:   sh(`for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 5 & done; wait`),
			Env:    env(),
			Limits: sandbox.Limits{Processes: 8},
		})
		expectClass(t, res, sandbox.ClassPidsExceeded)
	})
}

func TestCPULimit(t *testing.T) {
	res := run(t, sandbox.Spec{
		Args:   sh(`while :; do :; done`),
		Env:    env(),
		Limits: sandbox.Limits{CPUMillis: 300, WallMillis: 20_000},
	})
	expectClass(t, res, sandbox.ClassTimeout)
	if !strings.Contains(res.Detail, "CPU") {
		t.Errorf("detail %q does not name the CPU limit", res.Detail)
	}
	if res.WallMillis > 10_000 {
		t.Errorf("CPU limit took %d ms of wall time to act", res.WallMillis)
	}
}

func TestOutputCopiedSafely(t *testing.T) {
	out := world(t)
	script := `
mkdir -p /out/d/e && printf a >/out/a && printf bb >/out/d/e/b && chmod +x /out/a
ln -s /etc/passwd /out/link && mkfifo /out/fifo
python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/out/sock")'
`
	res := run(t, sandbox.Spec{Args: sh(script), Env: env(), OutputDir: out})
	expectClass(t, res, sandbox.ClassOK)
	if res.OutputFiles != 2 || res.OutputBytes != 3 || res.OutputSkipped != 3 {
		t.Errorf("copied %d files, %d bytes, skipped %d; want 2, 3, 3", res.OutputFiles, res.OutputBytes, res.OutputSkipped)
	}
	if b, err := os.ReadFile(filepath.Join(out, "d", "e", "b")); err != nil || string(b) != "bb" {
		t.Errorf("d/e/b: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(out, "a")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("a: %v %v", fi, err)
	}
	for _, n := range []string{"link", "fifo", "sock"} {
		if _, err := os.Lstat(filepath.Join(out, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was copied out: %v", n, err)
		}
	}
}

func TestOutputLimit(t *testing.T) {
	out := world(t)
	res := run(t, sandbox.Spec{
		Args:      sh(`cat /dev/zero >/out/fill 2>/dev/null; echo done`),
		Env:       env(),
		OutputDir: out,
		Limits:    sandbox.Limits{OutputBytes: 1 << 20},
	})
	expectClass(t, res, sandbox.ClassOutputExceeded)
	if !res.OutputFull {
		t.Error("OutputFull not set")
	}
	// A run that a limit ended copies nothing out.
	if _, err := os.Stat(filepath.Join(out, "fill")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("fill was copied out of a run that filled /out: %v", err)
	}
	t.Run("files", func(t *testing.T) {
		res := run(t, sandbox.Spec{
			Args:   sh(`i=0; while [ $i -lt 100 ]; do true 2>/dev/null >/out/f$i || break; i=$((i+1)); done; echo $i`),
			Env:    env(),
			Limits: sandbox.Limits{OutputFiles: 10},
		})
		expectClass(t, res, sandbox.ClassOutputExceeded)
		if strings.TrimSpace(string(res.Stdout)) != "10" {
			t.Errorf("created %s files under a limit of 10", res.Stdout)
		}
	})
	t.Run("tmp", func(t *testing.T) {
		res := run(t, sandbox.Spec{
			Args:   sh(`cat /dev/zero >/tmp/fill 2>/dev/null; wc -c </tmp/fill`),
			Env:    env(),
			Limits: sandbox.Limits{TmpBytes: 1 << 20},
		})
		expectClass(t, res, sandbox.ClassOutputExceeded)
		if !res.TmpFull || strings.TrimSpace(string(res.Stdout)) != "1048576" {
			t.Errorf("TmpFull %v, /tmp held %s bytes", res.TmpFull, res.Stdout)
		}
	})
}

func TestStdoutBounded(t *testing.T) {
	res := run(t, sandbox.Spec{
		Args:   sh(`head -c 3000000 /dev/zero; echo err >&2`),
		Env:    env(),
		Limits: sandbox.Limits{StdoutBytes: 1000},
	})
	expectClass(t, res, sandbox.ClassOK)
	if len(res.Stdout) != 1000 || res.StdoutBytes != 3_000_000 || !res.StdoutTruncated {
		t.Errorf("kept %d of %d bytes, truncated %v", len(res.Stdout), res.StdoutBytes, res.StdoutTruncated)
	}
	if string(res.Stderr) != "err\n" || res.StderrTruncated {
		t.Errorf("stderr %q truncated %v", res.Stderr, res.StderrTruncated)
	}
}

func TestExitStatus(t *testing.T) {
	cases := []struct {
		name   string
		script string
		class  sandbox.Class
		exit   int
		signal int
	}{
		{"ok", "exit 0", sandbox.ClassOK, 0, 0},
		{"nonzero", "exit 7", sandbox.ClassExitNonzero, 7, 0},
		{"signal", "kill -s TERM $$", sandbox.ClassExitNonzero, -1, 15},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, sandbox.Spec{Args: sh(c.script), Env: env()})
			expectClass(t, res, c.class)
			if res.ExitCode != c.exit || res.Signal != c.signal {
				t.Errorf("exit %d signal %d, want %d %d", res.ExitCode, res.Signal, c.exit, c.signal)
			}
		})
	}
}

func TestGrantedSocket(t *testing.T) {
	dir := world(t)
	path := filepath.Join(dir, "meter.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	go serveUnix(ln)
	res := run(t, sandbox.Spec{
		Args:   py(`import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/feval.sock"); s.sendall(b"ping\n"); print(s.recv(16).decode().strip())`),
		Env:    env(),
		Socket: path,
	})
	expectClass(t, res, sandbox.ClassOK)
	if got := strings.TrimSpace(string(res.Stdout)); got != "pong" {
		t.Errorf("granted socket answered %q, want pong", got)
	}
}

// serveUnix answers every line with "pong".
func serveUnix(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
				_, _ = c.Write([]byte("pong\n"))
			}
		}()
	}
}

func TestUnsandboxedIsMarked(t *testing.T) {
	requireSandbox(t)
	res, err := sandbox.Run(context.Background(), sandbox.Spec{
		Args:        []string{"/bin/sh", "-c", "cat /proc/self/status | grep NoNewPrivs"},
		Env:         env(),
		Unsandboxed: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Unsandboxed || len(res.Mechanisms) != 0 {
		t.Errorf("unsandboxed run reported as Unsandboxed=%v with mechanisms %v", res.Unsandboxed, res.Mechanisms)
	}
	if !strings.Contains(string(res.Stdout), "NoNewPrivs:\t0") {
		t.Errorf("development mode is not what it claims:\n%s", res.Stdout)
	}
	sres := run(t, sandbox.Spec{Args: []string{"/bin/true"}})
	if sres.Unsandboxed {
		t.Error("sandboxed run reported as unsandboxed")
	}
}

func TestInvalidSpec(t *testing.T) {
	cases := []struct {
		name string
		spec sandbox.Spec
	}{
		{"no program", sandbox.Spec{}},
		{"env without =", sandbox.Spec{Args: []string{"/bin/true"}, Env: []string{"PATH"}}},
		{"relative dir", sandbox.Spec{Args: []string{"/bin/true"}, Dir: "out"}},
		{"input outside /in", sandbox.Spec{Args: []string{"/bin/true"}, Inputs: []sandbox.Mount{{Source: "/usr", Target: "/usr2"}}}},
		{"input on /in", sandbox.Spec{Args: []string{"/bin/true"}, Inputs: []sandbox.Mount{{Source: "/usr", Target: "/in"}}}},
		{"nested inputs", sandbox.Spec{Args: []string{"/bin/true"}, Inputs: []sandbox.Mount{{Source: "/usr", Target: "/in/a"}, {Source: "/usr", Target: "/in/a/b"}}}},
		{"unclean target", sandbox.Spec{Args: []string{"/bin/true"}, Inputs: []sandbox.Mount{{Source: "/usr", Target: "/in/a/../b"}}}},
		{"relative source", sandbox.Spec{Args: []string{"/bin/true"}, Inputs: []sandbox.Mount{{Source: "usr", Target: "/in/a"}}}},
		{"negative memory", sandbox.Spec{Args: []string{"/bin/true"}, Limits: sandbox.Limits{MemoryBytes: -2}}},
		{"negative wall", sandbox.Spec{Args: []string{"/bin/true"}, Limits: sandbox.Limits{WallMillis: -1}}},
		{"few files", sandbox.Spec{Args: []string{"/bin/true"}, Limits: sandbox.Limits{OpenFiles: 3}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := sandbox.Run(context.Background(), c.spec)
			if !errors.Is(err, sandbox.ErrInvalidSpec) {
				t.Fatalf("error %v, want ErrInvalidSpec", err)
			}
			if res.Class != sandbox.ClassInfraError {
				t.Errorf("class %s", res.Class)
			}
		})
	}
}

func TestNothingLeftOnHost(t *testing.T) {
	before := hostLeftovers(t)
	run(t, sandbox.Spec{Args: sh("echo > /out/x; echo > /tmp/y")})
	if after := newLeftovers(before, hostLeftovers(t)); len(after) > 0 {
		t.Errorf("left behind: %v (before: %v)", after, before)
	}
}

// TestListenSocket: with Spec.Listen the program serves the host on a Unix
// socket it receives as ListenFD, and the socket is gone after the run.
func TestListenSocket(t *testing.T) {
	for _, unsandboxed := range []bool{false, true} {
		t.Run(fmt.Sprintf("unsandboxed=%v", unsandboxed), func(t *testing.T) {
			path := filepath.Join(world(t), "policy.sock")
			code := fmt.Sprintf(`import socket
s = socket.socket(fileno=%d)
c, _ = s.accept()
c.sendall(c.recv(16).upper())`, sandbox.ListenFD)
			got := make(chan string, 1)
			go func() {
				deadline := time.Now().Add(20 * time.Second)
				for time.Now().Before(deadline) {
					c, err := net.Dial("unix", path)
					if err != nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					defer c.Close()
					_, _ = c.Write([]byte("ping"))
					b := make([]byte, 16)
					n, _ := c.Read(b)
					got <- string(b[:n])
					return
				}
				got <- "never connected"
			}()
			res := run(t, sandbox.Spec{Args: py(code), Env: env(), Listen: path, Unsandboxed: unsandboxed,
				Limits: sandbox.Limits{WallMillis: 20_000}})
			expectClass(t, res, sandbox.ClassOK)
			if g := <-got; g != "PING" {
				t.Errorf("the host got %q through the socket, want PING", g)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket left behind: %v", err)
			}
		})
	}
	t.Run("taken", func(t *testing.T) {
		requireSandbox(t)
		path := filepath.Join(world(t), "taken")
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := sandbox.Run(context.Background(), sandbox.Spec{Args: []string{"/bin/true"}, Listen: path})
		var se *sandbox.SetupError
		if !errors.As(err, &se) || res.Class != sandbox.ClassInfraError {
			t.Errorf("Run = %s, %v; want an infra_error SetupError", res.Class, err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("the existing file was removed: %v", err)
		}
	})
}
