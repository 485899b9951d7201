//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

func TestClassifyPrecedence(t *testing.T) {
	cases := []struct {
		name string
		o    outcome
		want Class
	}{
		{"clean exit", outcome{}, ClassOK},
		{"nonzero exit", outcome{exitCode: 1}, ClassExitNonzero},
		{"signal", outcome{exitCode: -1, signal: 9}, ClassExitNonzero},
		{"output full beats exit status", outcome{exitCode: 1, outputFull: true}, ClassOutputExceeded},
		{"tmp full", outcome{tmpFull: true}, ClassOutputExceeded},
		{"timeout beats output", outcome{timedOut: "wall", outputFull: true}, ClassTimeout},
		{"pids beat timeout", outcome{timedOut: "wall", pidsEvents: 1}, ClassPidsExceeded},
		{"oom beats pids", outcome{oomKills: 1, pidsEvents: 3}, ClassOOM},
		{"sigsys is a violation", outcome{sigsysKills: true, oomKills: 1}, ClassViolation},
		{"named violation", outcome{violation: "ptrace", oomKills: 1}, ClassViolation},
		{"infra beats everything", outcome{infra: "x", violation: "ptrace"}, ClassInfraError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := classify(c.o); got != c.want {
				t.Errorf("classify(%+v) = %s, want %s", c.o, got, c.want)
			}
		})
	}
}

func TestWithDefaultsAndValidate(t *testing.T) {
	s := Spec{Args: []string{"/bin/true"}, Limits: Limits{MemoryBytes: NoLimit, WallMillis: 5}}.WithDefaults()
	d := DefaultLimits()
	if s.Limits.MemoryBytes != NoLimit || s.Limits.WallMillis != 5 || s.Limits.CPUMillis != d.CPUMillis || s.Dir != OutputPath {
		t.Errorf("WithDefaults: %+v", s)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if err := (Spec{Args: []string{"/bin/true"}}).Validate(); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("zero limits accepted without defaults: %v", err)
	}
}

func TestLookPath(t *testing.T) {
	have := map[string]bool{"/usr/bin/python3": true, "/opt/x/tool": true}
	exists := func(p string) bool { return have[p] }
	cases := []struct {
		name, prog string
		env        []string
		want       string
		ok         bool
	}{
		{"absolute", "/in/bin/x", nil, "/in/bin/x", true},
		{"default path", "python3", nil, "/usr/bin/python3", true},
		{"spec path", "tool", []string{"PATH=/opt/x"}, "/opt/x/tool", true},
		{"spec path only", "python3", []string{"PATH=/opt/x"}, "", false},
		{"missing", "nope", nil, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := lookPath(c.prog, c.env, exists)
			if (err == nil) != c.ok || got != c.want {
				t.Errorf("lookPath(%q) = %q, %v", c.prog, got, err)
			}
		})
	}
}

func TestCapture(t *testing.T) {
	c := &capture{max: 5}
	if err := c.drain(strings.NewReader("hello, world")); err != nil {
		t.Fatal(err)
	}
	if string(c.buf) != "hello" || c.total != 12 || !c.truncated() {
		t.Errorf("kept %q of %d", c.buf, c.total)
	}
	c = &capture{max: 5}
	_, _ = c.Write([]byte("hey"))
	if c.truncated() || string(c.buf) != "hey" {
		t.Errorf("kept %q, truncated %v", c.buf, c.truncated())
	}
}

// TestCopyTreeAdversarial copies a tree shaped like a hostile program's
// output: links pointing out, special files, a name already taken.
func TestCopyTreeAdversarial(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(secret, []byte("secret"), 0o600))
	must(os.MkdirAll(filepath.Join(src, "d", "e"), 0o700))
	must(os.WriteFile(filepath.Join(src, "d", "e", "f"), []byte("data"), 0o600))
	must(os.WriteFile(filepath.Join(src, "x"), []byte("xx"), 0o700))
	must(os.Symlink(secret, filepath.Join(src, "link")))
	must(os.Symlink(filepath.Dir(secret), filepath.Join(src, "d", "dirlink")))
	must(syscall.Mkfifo(filepath.Join(src, "fifo"), 0o600))

	lim := copyLimits{bytes: 1 << 20, entries: 100}
	st, err := copyTree(context.Background(), src, dst, lim)
	if err != nil {
		t.Fatal(err)
	}
	if st != (copyStats{files: 2, bytes: 6, skipped: 3}) {
		t.Errorf("stats %+v", st)
	}
	var got []string
	must(filepath.Walk(dst, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(dst, p); rel != "." {
			got = append(got, rel+" "+fi.Mode().String())
		}
		return nil
	}))
	want := []string{"d drwxr-xr-x", "d/e drwxr-xr-x", "d/e/f -rw-r--r--", "x -rwxr-xr-x"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("copied tree:\n%v\nwant\n%v", got, want)
	}

	// A second copy into the same directory must not overwrite anything.
	if _, err := copyTree(context.Background(), src, dst, lim); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("second copy: %v, want EEXIST", err)
	}
}

func TestSeccompProgramAssembles(t *testing.T) {
	for _, a := range []seccomp.Action{seccomp.ActionKillProcess, seccomp.ActionUserNotify} {
		prog, err := seccompProgram(a, false)
		if err != nil {
			t.Fatalf("%v: %v", a, err)
		}
		if len(prog) < 3 || len(prog) > 4096 {
			t.Errorf("%v: %d instructions", a, len(prog))
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	cases := map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/tab\011x\134`: "/tab\tx\\", `/bad\9`: `/bad\9`}
	for in, want := range cases {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReadKeyed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readKeyed(dir, "memory.oom_control", "oom_kill"); got != 3 {
		t.Errorf("oom_kill = %d", got)
	}
	if got := readKeyed(dir, "memory.oom_control", "missing"); got != 0 {
		t.Errorf("missing = %d", got)
	}
}

func TestNewRunCgroupRefusesMissingController(t *testing.T) {
	empty := cgroupLayout{homes: map[string]cgroupHome{}, problems: map[string]string{ctlMemory: "not mounted", ctlPids: "not mounted", ctlCPU: "not mounted", ctlCPUQuota: "not mounted"}}
	lim := DefaultLimits()
	_, err := newRunCgroup(empty, lim)
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.Guarantee != GuaranteeMemoryLimit || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("error %v, want an UnavailableError for %s", err, GuaranteeMemoryLimit)
	}
	lim.MemoryBytes, lim.Processes, lim.CPUMillis = NoLimit, NoLimit, NoLimit
	cg, err := newRunCgroup(empty, lim)
	if err != nil || len(cg.dirs) != 0 {
		t.Errorf("with every cgroup limit off: %v, %v", cg, err)
	}
}

func TestGuaranteesFollowCapabilities(t *testing.T) {
	full := Capabilities{
		UserNamespace: true, MountNamespace: true, PIDNamespace: true, NetworkNamespace: true,
		IPCNamespace: true, UTSNamespace: true, CgroupNamespace: true, ProcMount: true, Loopback: true,
		Seccomp: true, SeccompUserNotify: true, MemoryCgroup: "v1", PidsCgroup: "v2", CPUCgroup: "v1", CPUQuotaCgroup: "v1",
	}
	for _, g := range full.Guarantees() {
		if !g.Holds {
			t.Errorf("%s does not hold with every mechanism present: %v", g.Name, g.Missing)
		}
	}
	noNet := full
	noNet.NetworkNamespace = false
	noMem := full
	noMem.MemoryCgroup = ""
	noQuota := full
	noQuota.CPUQuotaCgroup = ""
	for _, c := range []struct {
		caps   Capabilities
		broken string
	}{{noNet, GuaranteeNoNetwork}, {noMem, GuaranteeMemoryLimit}, {noQuota, GuaranteeCPULimit}} {
		for _, g := range c.caps.Guarantees() {
			if (g.Name == c.broken) == g.Holds {
				t.Errorf("%s holds=%v (missing %v)", g.Name, g.Holds, g.Missing)
			}
		}
	}
}

// FuzzSpecJSON checks that any Spec that decodes re-encodes to a fixed
// point and that validation never panics.
func FuzzSpecJSON(f *testing.F) {
	seeds, err := filepath.Glob("testdata/spec/*.json")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in testdata/spec: %v", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Spec
		if err := json.Unmarshal(b, &s); err != nil {
			return
		}
		_ = s.WithDefaults().Validate()
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var s2 Spec
		if err := json.Unmarshal(enc, &s2); err != nil {
			t.Fatal(err)
		}
		enc2, _ := json.Marshal(s2)
		if !bytes.Equal(enc, enc2) {
			t.Errorf("not a fixed point:\n%s\n%s", enc, enc2)
		}
	})
}

func TestSpecVectors(t *testing.T) {
	cases := map[string]error{"valid.json": nil, "socket.json": nil, "nested.json": ErrInvalidSpec, "relative.json": ErrInvalidSpec}
	for name, want := range cases {
		b, err := os.ReadFile(filepath.Join("testdata/spec", name))
		if err != nil {
			t.Fatal(err)
		}
		var s Spec
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := s.WithDefaults().Validate(); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
}

// TestCopyTreeDeadline: copy-out stops at its deadline and leaves nothing
// behind in the destination.
func TestCopyTreeDeadline(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	for _, n := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(src, n), bytes.Repeat([]byte{1}, 3<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := copyTree(ctx, src, dst, copyLimits{bytes: 1 << 30, entries: 100})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("copy past its deadline: %v, want DeadlineExceeded", err)
	}
	if ents, _ := os.ReadDir(dst); len(ents) != 0 {
		t.Errorf("left %d entries behind", len(ents))
	}
}

func TestCPUQuotaLeavesTheSupervisorACore(t *testing.T) {
	for cores, want := range map[int]int64{1: 50_000, 2: 100_000, 8: 700_000} {
		if got := cpuQuotaMicros(cores); got != want {
			t.Errorf("%d cores: quota %d µs per %d µs, want %d", cores, got, cpuPeriodMicros, want)
		}
	}
}

// TestEnableV2 enables the controllers a cgroup v2 directory offers (on a
// stand-in directory: the kernel's refusal while the cgroup holds processes
// can only be met on a v2 host).
func TestEnableV2(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpuset cpu io memory hugetlb pids rdma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	procs, err := enableV2(dir)
	if err != nil || procs != dir {
		t.Fatalf("enableV2 = %q, %v", procs, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); string(b) != "+memory +pids +cpu" {
		t.Errorf("wrote %q to cgroup.subtree_control", b)
	}
	if home, procs := v2Home(dir); home != dir || procs != dir {
		t.Errorf("v2Home(%s) = %s, %s", dir, home, procs)
	}
	leaf := filepath.Join(dir, v2SupervisorLeaf)
	if home, procs := v2Home(leaf); home != dir || procs != leaf {
		t.Errorf("v2Home(%s) = %s, %s; want the home and the leaf", leaf, home, procs)
	}
}

func TestInitPathLookup(t *testing.T) {
	// TestMain chose the init for every test: look it up as Run would.
	defer func(o *string) { initOverride = o }(initOverride)
	initOverride = nil
	t.Setenv(InitEnv, "")
	// A test binary has no init program beside it: it is its own init.
	if p, err := initPath(); err != nil || p != selfExe {
		t.Fatalf("initPath() = %q, %v; want %s", p, err, selfExe)
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, InitProgram)
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(InitEnv, prog)
	if p, err := initPath(); err != nil || p != prog {
		t.Fatalf("initPath() = %q, %v; want %s", p, err, prog)
	}
	// Named but missing or not executable: an error naming the variable,
	// never a silent fallback.
	for _, bad := range []string{filepath.Join(dir, "missing"), dir} {
		t.Setenv(InitEnv, bad)
		if p, err := initPath(); err == nil || !strings.Contains(err.Error(), InitEnv) {
			t.Fatalf("initPath() with %s=%s = %q, %v; want an error naming %s", InitEnv, bad, p, err, InitEnv)
		}
	}
}

func TestFilterEncoding(t *testing.T) {
	b, err := programFilter(true, false)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := decodeFilter(b)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := seccompProgram(seccomp.ActionUserNotify, false)
	if !reflect.DeepEqual(prog, want) {
		t.Fatal("the decoded filter differs from the assembled one")
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], make([]byte, 8*(unix.BPF_MAXINSNS+1))} {
		if _, err := decodeFilter(bad); err == nil {
			t.Errorf("decodeFilter accepted %d bytes", len(bad))
		}
	}
	if got := violationName(syscallViolation(unix.SYS_PTRACE)); got != "ptrace" {
		t.Errorf("violationName = %q, want ptrace", got)
	}
	if got := violationName(unidentifiedViolation); got != unidentifiedViolation {
		t.Errorf("violationName(unidentified) = %q", got)
	}
}

func TestCgroupLayoutCached(t *testing.T) {
	defer forgetLayout()
	forgetLayout()
	l, fresh := runLayout()
	if !fresh {
		t.Fatal("an empty cache gave a layout")
	}
	if len(l.homes) == 0 {
		t.Skip("no cgroup hierarchy to create runs' cgroups in")
	}
	if _, fresh := runLayout(); fresh {
		t.Fatal("the layout was discovered again with the caller's cgroups unchanged")
	}
	// A cached layout whose homes are gone (hierarchies remounted, say):
	// Run discovers the layout again instead of failing.
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	stale := cgroupLayout{homes: map[string]cgroupHome{}, problems: map[string]string{}}
	for ctl, h := range l.homes {
		h.dir = filepath.Join(t.TempDir(), "gone")
		h.procs = h.dir
		stale.homes[ctl] = h
	}
	layoutCache.Lock()
	layoutCache.own, layoutCache.layout = string(own), stale
	layoutCache.Unlock()
	res, err := Run(context.Background(), Spec{Args: []string{"/bin/true"}})
	if err != nil || res.Class != ClassOK {
		t.Fatalf("Run with a stale cached layout: %s %v", res.Class, err)
	}
	if got, fresh := runLayout(); fresh || !reflect.DeepEqual(got, l) {
		t.Fatal("Run did not cache the layout it discovered again")
	}
}
