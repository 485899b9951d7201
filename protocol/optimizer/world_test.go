package optimizer_test

import (
	"context"
	"github.com/feval/feval/internal/roundtest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/fixtures/optask"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/sandbox"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestMain(m *testing.M) {
	sandbox.InitIfChild()
	os.Exit(m.Run())
}

// fixtures is the repository's fixtures/optimizer directory.
func fixtures(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "fixtures", "optimizer", name)
}

// needTorch fails early, with the fix, when Debian's python3-torch is missing.
func needTorch(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat("/usr/lib/python3/dist-packages/torch/__init__.py"); err != nil {
		tb.Fatal("Debian's python3-torch is not installed: run 'make debian-deps'")
	}
}

// referenceTask generates the reference task in a temporary directory and
// reads its spec.
func referenceTask(tb testing.TB) (string, optimizer.Spec) {
	tb.Helper()
	needTorch(tb)
	dir := filepath.Join(tb.TempDir(), "task")
	if err := optask.Generate(dir, optask.Config{}); err != nil {
		tb.Fatal(err)
	}
	spec, err := optimizer.LoadTask(os.DirFS(dir))
	if err != nil {
		tb.Fatal(err)
	}
	return dir, spec
}

// editTrainer is a newWorld edit that replaces old by new, once, in the
// task's train.py; the test fails when old is not there (the trainer moved).
func editTrainer(t *testing.T, old, new string) func(dir string) {
	return func(dir string) {
		t.Helper()
		p := filepath.Join(dir, "train.py")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		src := strings.Replace(string(b), old, new, 1)
		if src == string(b) {
			t.Fatalf("train.py no longer holds %q", old)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// spin keeps one goroutine per CPU busy until the returned stop is called:
// CPU load next to what a test measures.
func spin() (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < runtime.NumCPU(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := 0; !done.Load(); x++ {
			}
		}()
	}
	return func() {
		done.Store(true)
		wg.Wait()
	}
}

func newSigner(t testing.TB) *bundle.Signer { return roundtest.NewSigner(t) }

func at(s string) protocol.Observation { return roundtest.At(s) }

// world is one optimizer round: a task, a round, and a validator's store that
// miners' commitments and reveals are copied into.
type world struct {
	t         *testing.T
	ctx       context.Context
	validator *cas.Layout
	key       *bundle.Signer
	task      ocispec.Descriptor
	round     ocispec.Descriptor
}

// newWorld creates the reference task (edited by edit, when not nil) and a round.
func newWorld(t *testing.T, edit func(dir string)) *world {
	t.Helper()
	w := &world{t: t, ctx: context.Background(), key: newSigner(t)}
	var err error
	if w.validator, err = cas.Init(filepath.Join(t.TempDir(), "validator")); err != nil {
		t.Fatal(err)
	}
	dir, _ := referenceTask(t)
	if edit != nil {
		edit(dir)
	}
	if err := evaluate.ValidateTask("optimizer", os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	owner := newSigner(t)
	if w.task, err = protocol.CreateTask(w.ctx, w.validator, owner, "optimizer", dir, ""); err != nil {
		t.Fatal(err)
	}
	cu, _ := protocol.ParseWindow("2026-12-01T00:00:00Z")
	ru, _ := protocol.ParseWindow("2026-12-02T00:00:00Z")
	if w.round, err = protocol.OpenRound(w.ctx, w.validator, owner, w.task, cu, ru, ""); err != nil {
		t.Fatal(err)
	}
	return w
}

// submit commits and reveals the submission in dir from a fresh miner (roundtest.Submit).
func (w *world) submit(dir string) ocispec.Descriptor {
	w.t.Helper()
	return roundtest.Submit(w.t, w.ctx, w.validator, w.round, dir, at("2026-11-30T10:00:00Z"))
}

// evaluate evaluates a reveal with the given options and returns the verdict
// and its artifact.
func (w *world) evaluate(reveal ocispec.Descriptor, opts evaluate.Options) (optimizer.Verdict, ocispec.Descriptor) {
	t := w.t
	t.Helper()
	if opts.Optimizer.Beacon == (rollouts.Beacon{}) {
		opts.Optimizer.Beacon = testBeacon
	}
	out, err := evaluate.Evaluate(w.ctx, w.validator, w.key, evaluate.Request{Reveal: reveal.Digest.String(),
		Task: w.task.Digest.String(), Obs: at("2026-12-01T06:00:00Z"), Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := out.Verdict.(optimizer.Verdict)
	if !ok {
		t.Fatalf("an optimizer round gave a %T", out.Verdict)
	}
	roundtest.MatchesSchema(t, "verdict-optimizer.schema.json", v)
	return v, out.Artifact.OCI()
}

// testBeacon is the round's beacon in these tests: a plain one, recorded as
// unverified; one of the eight the reference baseline was calibrated on
// (optask.ReferenceBaseline).
var testBeacon = rollouts.Beacon{Source: "calibration", Value: "1"}

func loss(r optimizer.Run) int64 {
	if r.HeldOutLossMicroNats == nil {
		return -1
	}
	return *r.HeldOutLossMicroNats
}

func bundleRead(w *world, art *bundle.Loaded) ([]byte, error) {
	return bundle.ReadPayload(w.ctx, w.validator, art.Payloads[0], 1<<20)
}

// trusted is the auditor's trust: the validator's key.
func (w *world) trusted() []*bundle.PublicKey { return []*bundle.PublicKey{w.key.Public()} }
