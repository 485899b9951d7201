package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/feval/feval/sandbox"
)

// buildSandboxInit builds the sandbox init program (cmd/feval-sandbox-init)
// as make build does, into a directory of t's, so that the scripts' feval
// starts it through sandbox.InitEnv as an installed feval starts the one
// beside it.
func buildSandboxInit(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("the go tool is needed to build the sandbox init:", err)
	}
	out := filepath.Join(t.TempDir(), sandbox.InitProgram)
	cmd := exec.Command(goTool, "build", "-trimpath", "-tags", "feval_sandbox_init", "-o", out, "./cmd/feval-sandbox-init")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the sandbox init: %v\n%s", err, b)
	}
	return out
}
