package scenarios_test

import (
	"context"
	"fmt"
	"github.com/feval/feval/internal/roundtest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/feval/feval/sandbox"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestMain(m *testing.M) {
	sandbox.InitIfChild()
	os.Exit(run(m))
}

// run runs the tests with the sandbox init program built as make build
// builds it, as an installed feval finds it beside itself: every sandbox of
// these tests (a scenario has dozens) then starts a small static program
// instead of this (race-instrumented) test binary.
func run(m *testing.M) int {
	if os.Getenv(sandbox.InitEnv) == "" {
		dir, err := os.MkdirTemp("", "feval-init-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, sandbox.InitProgram)
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "feval_sandbox_init", "-o", out, "./cmd/feval-sandbox-init")
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the sandbox init: %v\n%s", err, b)
			return 1
		}
		os.Setenv(sandbox.InitEnv, out)
	}
	return m.Run()
}

func needPytest(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/usr/lib/python3/dist-packages/pytest/__init__.py"); err != nil {
		t.Fatal("Debian's python3-pytest is not installed: run 'make debian-deps'")
	}
}

func newSigner(t testing.TB) *bundle.Signer { return roundtest.NewSigner(t) }

func at(s string) protocol.Observation { return roundtest.At(s) }

// world is one scenarios round: the fixture upstream with the reference
// scripts, a task of the given scenarios, a round, and a validator's store.
type world struct {
	t         testing.TB
	ctx       context.Context
	up        *upstream.Server
	url       string
	validator *cas.Layout
	key       *bundle.Signer
	task      ocispec.Descriptor
	round     ocispec.Descriptor
	hidden    ocispec.Descriptor
}

func newWorld(t testing.TB, cfg scenariotask.Config) *world {
	t.Helper()
	needPytest(t)
	w := &world{t: t, ctx: context.Background(), key: newSigner(t)}
	scripts, err := scenariotask.Scripts()
	if err != nil {
		t.Fatal(err)
	}
	w.up = upstream.New(upstream.Options{Scripts: scripts})
	url, stop, err := upstream.Start(w.up)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	w.url = url
	if w.validator, err = cas.Init(filepath.Join(t.TempDir(), "validator")); err != nil {
		t.Fatal(err)
	}
	dir, hidden := filepath.Join(t.TempDir(), "task"), filepath.Join(t.TempDir(), "hidden")
	if err := scenariotask.Generate(dir, hidden, cfg); err != nil {
		t.Fatal(err)
	}
	if err := evaluate.ValidateTask("scenarios", os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	owner := newSigner(t)
	if w.task, err = protocol.CreateTask(w.ctx, w.validator, owner, "scenarios", dir, ""); err != nil {
		t.Fatal(err)
	}
	cu, _ := protocol.ParseWindow("2026-12-01T00:00:00Z")
	ru, _ := protocol.ParseWindow("2026-12-02T00:00:00Z")
	if w.round, err = protocol.OpenRound(w.ctx, w.validator, owner, w.task, cu, ru, ""); err != nil {
		t.Fatal(err)
	}
	// The task owner publishes the hidden tests once reveals have closed.
	packed, err := bundle.PackPath(w.ctx, w.validator, owner, hidden, bundle.PackOptions{Kind: scenarios.KindTests})
	if err != nil {
		t.Fatal(err)
	}
	w.hidden = packed.Artifact.OCI()
	return w
}

// pack writes a policy.json pack whose default route is one model.
func pack(t testing.TB, model string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pack-"+model)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf(`{"schema": "feval.policy.v1", "stream": false, "session": {"sticky_route": false, "keep_messages": 64},
 "routes": [{"name": "default", "mode": "single", "steps": [{"model": %q}]}]}`, model)
	os.WriteFile(filepath.Join(dir, "policy.json"), []byte(policy), 0o644)
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("# Repair skill\n\nRead the code, make the smallest fix.\n"), 0o644)
	return dir
}

// submit commits and reveals the pack in dir from a fresh miner.
func (w *world) submit(dir string) ocispec.Descriptor {
	w.t.Helper()
	return roundtest.Submit(w.t, w.ctx, w.validator, w.round, dir, at("2026-11-30T10:00:00Z"))
}

func (w *world) options() evaluate.Options {
	return evaluate.Options{Scenarios: scenarios.Params{Upstream: w.url, Parallel: 2, Hidden: w.hidden.Digest}}
}

func (w *world) evaluate(reveal ocispec.Descriptor) (scenarios.Verdict, evaluate.Outcome) {
	t := w.t
	t.Helper()
	out, err := evaluate.Evaluate(w.ctx, w.validator, w.key, evaluate.Request{Reveal: reveal.Digest.String(),
		Task: w.task.Digest.String(), Obs: at("2026-12-01T06:00:00Z"), Options: w.options()})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := out.Verdict.(scenarios.Verdict)
	if !ok {
		t.Fatalf("a scenarios round gave a %T", out.Verdict)
	}
	return v, out
}

// trusted are the keys an auditor of this world trusts: the validator's.
func (w *world) trusted() []*bundle.PublicKey { return []*bundle.PublicKey{w.key.Public()} }
