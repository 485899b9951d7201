//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/feval/feval/sandbox"
)

// initProgram is the sandbox init program that TestMain builds and every
// test's Run starts, as in production; tests of the fallback (the test binary
// acting as its own init) say so with sandbox.UseInit.
var initProgram string

func TestMain(m *testing.M) {
	sandbox.InitIfChild()
	dir, err := os.MkdirTemp("", "feval-sandbox-init-")
	if err == nil {
		initProgram, err = buildInit(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "building the sandbox init:", err)
		os.Exit(1)
	}
	restore := sandbox.UseInit(initProgram)
	code := m.Run()
	restore()
	os.RemoveAll(dir)
	if goBuild.dir != "" {
		os.RemoveAll(goBuild.dir)
	}
	os.Exit(code)
}

// buildInit builds cmd/feval-sandbox-init into dir as make build does.
func buildInit(dir string) (string, error) {
	out := filepath.Join(dir, sandbox.InitProgram)
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "feval_sandbox_init", "-o", out, "./cmd/feval-sandbox-init")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, b)
	}
	return out, nil
}
