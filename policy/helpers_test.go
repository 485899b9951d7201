package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
	"github.com/feval/feval/sandbox"
)

func TestMain(m *testing.M) {
	// The sandbox re-executes this test binary as its init.
	sandbox.InitIfChild()
	os.Exit(m.Run())
}

// models are the reference allowlist.
func models(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "fixtures", "scenarios", "models.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		out = append(out, string(bytes.TrimSpace(l)))
	}
	return out
}

// env is a fixture upstream, a meter on it and one scenario.
type env struct {
	up *upstream.Server
	m  *meter.Meter
	sc *meter.Scenario
}

func newEnv(t testing.TB, opts upstream.Options, mopts meter.Options) *env {
	t.Helper()
	up := upstream.New(opts)
	url, stop, err := upstream.Start(up)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	c := meter.ReferenceConfig(models(t), url)
	c.Retry = meter.RetryPolicy{MaxAttempts: 2, InitialBackoffMillis: 1, MaxBackoffMillis: 5}
	m, err := meter.New(c, mopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	sc, err := m.Scenario("scenario-01")
	if err != nil {
		t.Fatal(err)
	}
	return &env{up: up, m: m, sc: sc}
}

func loadPack(t testing.TB, dir string) *policy.Pack {
	t.Helper()
	p, err := policy.LoadPack(dir, models(t))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// start starts a sidecar on the env's scenario.
func (e *env) start(t testing.TB, pack *policy.Pack, opts policy.Options) *policy.Sidecar {
	t.Helper()
	opts.Scenario = e.sc
	s, err := policy.Start(context.Background(), pack, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// post sends one agent request to the sidecar's handler.
func post(t testing.TB, s *policy.Sidecar, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(b))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	out, _ := io.ReadAll(w.Result().Body)
	return w.Code, out
}

func msgs(pairs ...string) []map[string]any {
	var out []map[string]any
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, map[string]any{"role": pairs[i], "content": pairs[i+1]})
	}
	return out
}

var shellTool = []any{map[string]any{"type": "function", "function": map[string]any{"name": "shell",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}}}

// writePack writes a pack directory with SKILL.md and the given files.
func writePack(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["SKILL.md"] = "# Skill\n\nFix the bug.\n"
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(dir, 0o755)
	return dir
}

// receiptsOf returns the receipts of the given meter sequence numbers.
func receiptsOf(e *env, seqs []int64) []meter.Receipt {
	want := map[int64]bool{}
	for _, s := range seqs {
		want[s] = true
	}
	var out []meter.Receipt
	for _, rc := range e.m.Recorder().Receipts() {
		if want[rc.Seq] {
			out = append(out, rc)
		}
	}
	return out
}

func modelsOf(rs []meter.Receipt) []string {
	var out []string
	for _, rc := range rs {
		out = append(out, rc.Model)
	}
	return out
}

// fixturePack copies a fixture pack without its expect.json into a temporary
// directory the sandbox's user can read, and loads it.
func fixturePack(t testing.TB, dir string) *policy.Pack {
	t.Helper()
	dst := t.TempDir()
	os.Chmod(dst, 0o755)
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." || rel == "expect.json" {
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		return os.WriteFile(filepath.Join(dst, rel), b, fi.Mode().Perm()|0o444)
	})
	if err != nil {
		t.Fatal(err)
	}
	return loadPack(t, dst)
}
