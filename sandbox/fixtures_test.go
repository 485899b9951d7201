//go:build linux

package sandbox_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/feval/feval/sandbox"
)

// fixtureCase is one adversarial program of fixtures/sandbox: how to run it,
// the classification it must get, and what must hold on the host afterwards.
type fixtureCase struct {
	// class is the expected classification.
	class sandbox.Class
	// prepare adjusts the spec and returns a check of the host, run after
	// the sandbox returned.
	prepare func(t *testing.T, spec *sandbox.Spec) func(t *testing.T, res sandbox.Result)
	// stdout, if set, must appear in the program's output.
	stdout string
}

// fixtureCases covers every file and directory of fixtures/sandbox;
// TestFixtures fails on a fixture without a case.
var fixtureCases = map[string]fixtureCase{
	"connect_out.py": {
		class: sandbox.ClassOK,
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			port, accepted := tcpListener(t)
			udp, received := udpListener(t, port)
			spec.Env = append(spec.Env, fmt.Sprintf("HOST_PORT=%d", port))
			return func(t *testing.T, _ sandbox.Result) {
				if n := accepted.Load(); n != 0 {
					t.Errorf("host TCP listener accepted %d connections", n)
				}
				if n := received.Load(); n != 0 || udp == "" {
					t.Errorf("host UDP listener received %d datagrams", n)
				}
			}
		},
	},
	"resolve": {
		class: sandbox.ClassOK,
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			port, queries := dnsServer(t)
			spec.Env = append(spec.Env, "DNS_SERVER=127.0.0.1:"+port)
			return func(t *testing.T, _ sandbox.Result) {
				if n := queries.Load(); n != 0 {
					t.Errorf("host DNS server received %d queries", n)
				}
			}
		},
	},
	"write_outside.sh": {
		class:  sandbox.ClassOK,
		stdout: "blocked",
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			marker := filepath.Join(world(t), "escaped")
			spec.Env = append(spec.Env, "HOST_MARKER="+marker)
			return func(t *testing.T, _ sandbox.Result) {
				for _, p := range []string{marker, "/feval-escape", "/etc/feval-escape", "/usr/feval-escape", "/usr/feval-escape-dir"} {
					if _, err := os.Lstat(p); err == nil {
						t.Errorf("%s exists on the host", p)
						os.Remove(p)
					}
				}
				if _, err := os.Stat(filepath.Join(spec.OutputDir, "allowed")); err != nil {
					t.Errorf("the allowed write to /out was lost: %v", err)
				}
			}
		},
	},
	"read_secrets.sh": {
		class:  sandbox.ClassOK,
		stdout: "blocked",
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			base, err := os.MkdirTemp("/var/tmp", "feval-sandbox-store-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(base) })
			secret, key := filepath.Join(base, "store", "blob"), filepath.Join(base, "cosign.key")
			for _, p := range []string{secret, key} {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("secret"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			spec.Env = append(spec.Env, "SECRET_FILES="+secret+" "+key, "SECRET_DIRS="+base)
			return nil
		},
	},
	"fork_bomb.sh": {
		class: sandbox.ClassPidsExceeded,
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			spec.Limits.Processes = 32
			return nil
		},
	},
	"allocate.py": {
		class: sandbox.ClassOOM,
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			spec.Limits.MemoryBytes = 96 << 20
			return nil
		},
	},
	"spin.sh": {
		class: sandbox.ClassTimeout,
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			spec.Limits.WallMillis = 700
			return nil
		},
	},
	"fill_disk.sh": {
		class:  sandbox.ClassOutputExceeded,
		stdout: "blocked: 2097152 bytes",
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			spec.Limits.OutputBytes = 2 << 20
			return func(t *testing.T, res sandbox.Result) {
				// A run that a limit ended copies nothing out.
				if _, err := os.Stat(filepath.Join(spec.OutputDir, "fill")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("fill copied out of a run that filled /out: %v", err)
				}
			}
		},
	},
	"kill_parent.sh": {
		class:  sandbox.ClassOK,
		stdout: "survived",
	},
	"ptrace_sibling.py": {
		class: sandbox.ClassViolation,
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			return func(t *testing.T, res sandbox.Result) {
				if res.Violation != "ptrace" {
					t.Errorf("violation %q, want ptrace", res.Violation)
				}
			}
		},
	},
	"daemon.sh": {
		class:  sandbox.ClassOK,
		stdout: "started three daemons",
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			marker := fmt.Sprintf("9%d.%d", os.Getpid(), time.Now().UnixNano()%1e6)
			spec.Env = append(spec.Env, "DAEMON_SECONDS="+marker)
			return func(t *testing.T, res sandbox.Result) {
				expectNoSurvivors(t, marker)
				if res.WallMillis > 5000 {
					t.Errorf("the run waited %d ms for its daemons", res.WallMillis)
				}
			}
		},
	},
	"setuid": {
		class:  sandbox.ClassOK,
		stdout: "blocked: uid 65534 euid 65534",
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			p := filepath.Join(spec.Inputs[len(spec.Inputs)-1].Source, "setuid")
			if err := os.Chown(p, 0, 0); err != nil {
				t.Skipf("cannot install a setuid-root binary: %v", err)
			}
			if err := os.Chmod(p, os.ModeSetuid|0o755); err != nil {
				t.Fatal(err)
			}
			return nil
		},
	},
	"namespace": {
		class: sandbox.ClassViolation,
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			return func(t *testing.T, res sandbox.Result) {
				if res.Violation != "clone" {
					t.Errorf("violation %q, want clone", res.Violation)
				}
			}
		},
	},
	"other_socket.py": {
		class:  sandbox.ClassOK,
		stdout: "granted socket answered pong",
		prepare: func(t *testing.T, spec *sandbox.Spec) func(*testing.T, sandbox.Result) {
			dir := world(t)
			granted := filepath.Join(dir, "granted.sock")
			gl, err := net.Listen("unix", granted)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { gl.Close() })
			if err := os.Chmod(granted, 0o666); err != nil {
				t.Fatal(err)
			}
			go serveUnix(gl)
			ungranted := filepath.Join(dir, "ungranted.sock")
			n1 := countingUnix(t, ungranted)
			if err := os.Chmod(ungranted, 0o666); err != nil {
				t.Fatal(err)
			}
			abstract := fmt.Sprintf("feval-sandbox-test-%d-%d", os.Getpid(), time.Now().UnixNano())
			n2 := countingUnix(t, "@"+abstract)
			spec.Socket = granted
			spec.Env = append(spec.Env, "UNGRANTED_SOCKET="+ungranted, "ABSTRACT_NAME="+abstract)
			return func(t *testing.T, _ sandbox.Result) {
				if a, b := n1.Load(), n2.Load(); a+b != 0 {
					t.Errorf("ungranted host sockets accepted %d (path) and %d (abstract) connections", a, b)
				}
			}
		},
	},
}

// TestFixtures runs every adversarial program of fixtures/sandbox and checks
// its classification, that it printed no ESCAPED line, that the host is
// unharmed, and that the run left nothing behind.
func TestFixtures(t *testing.T) {
	requireSandbox(t)
	dir, err := filepath.Abs("../fixtures/sandbox")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() == "README.md" {
			continue
		}
		names = append(names, e.Name())
		if _, ok := fixtureCases[e.Name()]; !ok {
			t.Errorf("fixture %s has no test case", e.Name())
		}
	}
	sort.Strings(names)
	if len(names) != len(fixtureCases) {
		t.Errorf("%d fixtures on disk, %d test cases", len(names), len(fixtureCases))
	}
	bin := goBinaries(t)
	before := hostLeftovers(t)

	for _, name := range names {
		fc, ok := fixtureCases[name]
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			spec := sandbox.Spec{
				Env:       env(),
				OutputDir: world(t),
				Inputs:    []sandbox.Mount{{Source: dir, Target: "/in/fixtures"}, {Source: bin, Target: "/in/bin"}},
				Limits:    sandbox.Limits{WallMillis: 20_000},
			}
			switch filepath.Ext(name) {
			case ".sh":
				spec.Args = []string{"/bin/sh", "/in/fixtures/" + name}
			case ".py":
				spec.Args = []string{"/usr/bin/python3", "/in/fixtures/" + name}
			default:
				spec.Args = []string{"/in/bin/" + name}
			}
			var check func(*testing.T, sandbox.Result)
			if fc.prepare != nil {
				check = fc.prepare(t, &spec)
			}
			res := run(t, spec)
			expectClass(t, res, fc.class)
			if strings.Contains(string(res.Stdout), "ESCAPED") {
				t.Errorf("escape succeeded:\n%s", res.Stdout)
			}
			if fc.stdout != "" && !strings.Contains(string(res.Stdout), fc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", fc.stdout, res.Stdout)
			}
			if check != nil {
				check(t, res)
			}
		})
	}
	if left := newLeftovers(before, hostLeftovers(t)); len(left) > 0 {
		t.Errorf("runs left behind %v", left)
	}
}

// udpListener listens on the host's 127.0.0.1:port for datagrams.
func udpListener(t *testing.T, port int) (string, *atomic.Int64) {
	t.Helper()
	pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	n := new(atomic.Int64)
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	return pc.LocalAddr().String(), n
}

// countingUnix listens on a Unix socket (a leading @ makes it abstract) and
// counts connections.
func countingUnix(t *testing.T, addr string) *atomic.Int64 {
	t.Helper()
	ln, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	n := new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return n
}
