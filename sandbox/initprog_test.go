//go:build linux

package sandbox_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/sandbox"
)

// Every other test starts the init program that TestMain built; this one
// runs the fallback, the calling binary acting as its own init.
func TestInitFallbackToSelf(t *testing.T) {
	requireSandbox(t)
	defer sandbox.UseInit("/proc/self/exe")()
	out := world(t)
	res := run(t, sandbox.Spec{Args: sh("echo fallback; echo kept > /out/f; exit 3"), Env: env(), OutputDir: out})
	expectClass(t, res, sandbox.ClassExitNonzero)
	if res.ExitCode != 3 || string(res.Stdout) != "fallback\n" {
		t.Fatalf("exit %d stdout %q", res.ExitCode, res.Stdout)
	}
	if b, err := os.ReadFile(filepath.Join(out, "f")); err != nil || string(b) != "kept\n" {
		t.Fatalf("output file: %q %v", b, err)
	}
	// A violation is named by the parent from the number the init reports.
	res = run(t, sandbox.Spec{Args: py("import ctypes; ctypes.CDLL(None).syscall(101, 0, 0, 0, 0)"), Env: env()})
	expectClass(t, res, sandbox.ClassViolation)
	if res.Violation != "ptrace" {
		t.Fatalf("violation %q, want ptrace", res.Violation)
	}
}

// An init program built from other source than the caller refuses the run
// before the program starts, and the error says what to do.
func TestStaleInitRefused(t *testing.T) {
	requireSandbox(t)
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH to build a stale init")
	}
	dir := t.TempDir()
	// The same package with one more file: built from other source.
	extra := filepath.Join(dir, "extra.go")
	if err := os.WriteFile(extra, []byte("package sandbox\n\n// A change made after the caller was built.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "overlay.json")
	spec := `{"Replace":{"` + filepath.Join(repo, "sandbox", "zz_stale_extra.go") + `":"` + extra + `"}}`
	if err := os.WriteFile(overlay, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, sandbox.InitProgram)
	cmd := exec.Command(goTool, "build", "-trimpath", "-tags", "feval_sandbox_init", "-overlay", overlay, "-o", stale, "./cmd/feval-sandbox-init")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	defer sandbox.UseInit(stale)()
	out := world(t)
	res, err := sandbox.Run(context.Background(), sandbox.Spec{Args: sh("echo ran > /out/ran"), Env: env(), OutputDir: out})
	var se *sandbox.SetupError
	if !errors.As(err, &se) || !errors.Is(err, sandbox.ErrStaleInit) {
		t.Fatalf("error %v (%T), want a *SetupError wrapping ErrStaleInit", err, err)
	}
	if res.Class != sandbox.ClassInfraError || !strings.Contains(err.Error(), stale) || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("class %s, error %q: want infra-error naming %s and the fix", res.Class, err, stale)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("the program ran: %v", ents)
	}
}

// A program that does not speak the init's protocol at all fails the run
// with an error naming it, at once, and runs nothing.
func TestForeignInitRefused(t *testing.T) {
	requireSandbox(t)
	for _, foreign := range []string{"/bin/true", "/bin/false"} {
		t.Run(filepath.Base(foreign), func(t *testing.T) {
			defer sandbox.UseInit(foreign)()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := sandbox.Run(ctx, sandbox.Spec{Args: []string{"/bin/true"}})
			var se *sandbox.SetupError
			if !errors.As(err, &se) || res.Class != sandbox.ClassInfraError || !strings.Contains(err.Error(), foreign) {
				t.Fatalf("class %s, error %v (%T): want an infra error naming %s", res.Class, err, err, foreign)
			}
		})
	}
}

// The init program links the sandbox package and little else: no
// go-seccomp-bpf (whose tables cost every start), no crypto, nothing of feval
// beyond the sandbox.
func TestInitProgramDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH")
	}
	cmd := exec.Command(goTool, "list", "-tags", "feval_sandbox_init", "-deps", "./cmd/feval-sandbox-init")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		feval := strings.HasPrefix(p, "github.com/feval/feval/") && p != "github.com/feval/feval/sandbox" && p != "github.com/feval/feval/cmd/feval-sandbox-init"
		if feval || strings.Contains(p, "go-seccomp-bpf") || strings.HasPrefix(p, "crypto/") {
			t.Errorf("the init program links %s", p)
		}
	}
}

// The program cannot end the init with a signal: as root the init is out of
// the program's reach (another uid, no capabilities); otherwise the init
// relays the signals whose runtime handlers would end it to a channel.
func TestSignalsToInitIgnored(t *testing.T) {
	res := run(t, sandbox.Spec{Args: sh(`for s in HUP INT QUIT ILL TRAP ABRT BUS FPE SEGV TERM STKFLT SYS USR1 PIPE ALRM; do kill -s $s 1 2>/dev/null; done; sleep 0.1; echo alive`), Env: env()})
	expectClass(t, res, sandbox.ClassOK)
	if string(res.Stdout) != "alive\n" {
		t.Fatalf("stdout %q", res.Stdout)
	}
}
