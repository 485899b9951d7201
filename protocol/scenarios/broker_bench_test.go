package scenarios

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkWorkspaceCall measures one workspace call of the verifier: a
// Python child that imports a workspace module and prints a result. broker is
// the production path, a sandbox of its own per call (the read-only
// workspace, the call's files copied in); process is its peer, the same child
// started as a plain process, as a call was run inside the verifier's sandbox
// before the broker. The difference is what the separation adds per call.
func BenchmarkWorkspaceCall(b *testing.B) {
	ws := b.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "convert.py"), []byte("def c_to_f(c):\n    return c * 9 / 5 + 32\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := readable(ws); err != nil {
		b.Fatal(err)
	}
	child := []string{"-I", "-B", "-c", "import sys; sys.path.insert(0, '.'); import convert; print(convert.c_to_f(100))"}
	b.Run("broker", func(b *testing.B) {
		br := &workspaceBroker{ctx: context.Background(), ws: ws}
		req := brokerRequest{Args: append([]string{Python}, child...), Env: map[string]string{"PATH": "/usr/bin:/bin"}, Seconds: 10}
		for b.Loop() {
			ans, ok := br.call(req)
			if !ok || ans.ExitCode != 0 || string(ans.Stdout) != "212.0\n" {
				b.Fatalf("broker call: %v exit %d, %q %q (%s)", ok, ans.ExitCode, ans.Stdout, ans.Stderr, br.failed())
			}
		}
	})
	b.Run("process", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(Python, child...)
			cmd.Dir = ws
			out, err := cmd.Output()
			if err != nil || string(out) != "212.0\n" {
				b.Fatalf("process: %v %q", err, out)
			}
		}
	})
}
