// Package scenarios is the protocol driver for metered agent scenarios
// (competition kind A): per scenario of the task, the reference agent harness
// runs in a sandbox on a copy of the scenario's workspace, its model calls go
// to the pack's policy sidecar on the one socket the sandbox has, and the
// sidecar's only route to models is the meter, which records receipts and a
// trace. A fresh verifier sandbox then runs the scenario's hidden tests on the
// final workspace (read-only). The score is the exact sum over scenarios of
// tests passed / tests total; cost per scenario and model comes from the
// receipts and is shown, never scored. Replay runs the same harness, policy
// and verifier with the meter answering from the recorded trace.
// docs/PROTOCOL.md ("Scenarios") specifies the task, the harness contract,
// the verifier result and the verdict.
package scenarios

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sync"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/internal/strictjson"
	"github.com/feval/feval/meter"
	"github.com/opencontainers/go-digest"
)

// TaskFile is the scenarios task's parameter file; TaskFormat its format.
const (
	TaskFile   = "task.json"
	TaskFormat = "feval.scenarios.task.v1"
)

// Paths inside a task directory.
const (
	HarnessFile  = "harness/harness.py"
	VerifierFile = "verifier/verify.py"
	ScenarioDir  = "scenarios"
)

// ErrTask reports a task directory that does not have the scenarios form.
var ErrTask = errors.New("malformed scenarios task")

//go:embed programs/harness.py programs/verify.py
var programs embed.FS

// Harness returns the reference harness that feval ships.
func Harness() []byte { b, _ := programs.ReadFile("programs/harness.py"); return b }

// Verifier returns the reference verifier program that feval ships.
func Verifier() []byte { b, _ := programs.ReadFile("programs/verify.py"); return b }

// Spec is task.json.
type Spec struct {
	Format   string `json:"format"`
	Protocol string `json:"protocol"`
	// Models is the allowlist (the meter configuration's models, in order).
	Models   []string     `json:"models"`
	Harness  HarnessSpec  `json:"harness"`
	Verifier VerifierSpec `json:"verifier"`
	// Hidden is the SHA-256 of the hidden tests' tree (a normalised tar of
	// scenarios/NAME/*.py, FORMAT.md), which is not part of the task: the
	// task owner publishes it as its own artifact once reveals have closed.
	Hidden digest.Digest `json:"hidden"`
	// Scenarios are evaluated in this order.
	Scenarios []ScenarioSpec `json:"scenarios"`
}

// HarnessSpec pins the harness and bounds one scenario's agent run.
type HarnessSpec struct {
	// Digest is the SHA-256 of HarnessFile.
	Digest digest.Digest `json:"digest"`
	// MaxTurns bounds the model calls of one scenario (the counted budget).
	MaxTurns int `json:"max_turns"`
	// MaxTokens is the output bound the harness asks for per call.
	MaxTokens int `json:"max_tokens"`
	// WallMillis is a safety bound on one scenario's sandbox; a run that hits
	// it is infra_error, never a score.
	WallMillis int64 `json:"wall_millis"`
}

// VerifierSpec pins the verifier program and bounds one verifier run.
type VerifierSpec struct {
	Digest     digest.Digest `json:"digest"`
	WallMillis int64         `json:"wall_millis"`
}

// ScenarioSpec is one scenario: its directory is scenarios/NAME with
// instruction.md and workspace/; its hidden tests are scenarios/NAME/ of the
// hidden tree. Tests are the hidden tests' ids
// ("module::test", as the JUnit report names them): the denominator of the
// scenario's score and the only tests that count.
type ScenarioSpec struct {
	Name  string   `json:"name"`
	Tests []string `json:"tests"`
}

// Limits on a task.
const (
	MaxScenarios        = 64
	MaxTestsPerScenario = 256
	MaxTurns            = 256
)

// Compiled on first use: the bounded repetitions make large programs, and
// most commands of the binary never validate a task.
var (
	nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`) })
	testRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Za-z0-9_.\[\]-]{1,200}::[A-Za-z0-9_.\[\]-]{1,200}$`)
	})
)

// LoadTask reads and validates a scenarios task: task.json, the pinned harness
// and verifier, and every scenario's instruction and workspace.
func LoadTask(task fs.FS) (Spec, error) {
	bad := func(format string, a ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("%w: %s", ErrTask, fmt.Sprintf(format, a...))
	}
	b, err := fs.ReadFile(task, TaskFile)
	if err != nil {
		return bad("%s: %v", TaskFile, err)
	}
	var s Spec
	if err := strictjson.Decode(b, &s); err != nil {
		return bad("%s: %v", TaskFile, err)
	}
	if s.Format != TaskFormat || s.Protocol != "scenarios" {
		return bad("%s: format %q and protocol %q, want %q and scenarios", TaskFile, s.Format, s.Protocol, TaskFormat)
	}
	cfg, err := meter.LoadTaskConfig(task)
	if err != nil {
		return bad("%v", err)
	}
	if len(s.Models) != len(cfg.Models) {
		return bad("models: %d listed, the meter configuration has %d", len(s.Models), len(cfg.Models))
	}
	for i, m := range s.Models {
		if cfg.Models[i].Name != m {
			return bad("models[%d] %q is not the meter configuration's %q", i, m, cfg.Models[i].Name)
		}
	}
	for _, p := range []struct {
		file string
		want digest.Digest
	}{{HarnessFile, s.Harness.Digest}, {VerifierFile, s.Verifier.Digest}} {
		b, err := fs.ReadFile(task, p.file)
		if err != nil {
			return bad("%s: %v", p.file, err)
		}
		if got := digest.FromBytes(b); got != p.want {
			return bad("%s has digest %s, task.json pins %s", p.file, got, p.want)
		}
	}
	h := s.Harness
	if h.MaxTurns < 1 || h.MaxTurns > MaxTurns || h.MaxTokens < 1 || h.MaxTokens > meter.MaxTokensLimit ||
		h.WallMillis < 1000 || h.WallMillis > 3_600_000 || s.Verifier.WallMillis < 1000 || s.Verifier.WallMillis > 3_600_000 {
		return bad("harness or verifier bounds out of range (turns 1-%d, max_tokens 1-%d, wall 1000-3600000 ms)", MaxTurns, meter.MaxTokensLimit)
	}
	if s.Hidden.Validate() != nil || s.Hidden.Algorithm() != digest.SHA256 {
		return bad("hidden: %q is not a sha256 digest of the hidden tests", s.Hidden)
	}
	if _, err := fs.Stat(task, "hidden"); err == nil {
		return bad("the task holds hidden tests: publish them apart (its hidden digest pins them)")
	}
	if len(s.Scenarios) == 0 || len(s.Scenarios) > MaxScenarios {
		return bad("%d scenarios: want 1 to %d", len(s.Scenarios), MaxScenarios)
	}
	seen := map[string]bool{}
	for _, sc := range s.Scenarios {
		if !nameRE().MatchString(sc.Name) || seen[sc.Name] {
			return bad("scenario name %q: want a unique name of lower-case letters, digits, '.', '_', '-'", sc.Name)
		}
		seen[sc.Name] = true
		if len(sc.Tests) == 0 || len(sc.Tests) > MaxTestsPerScenario {
			return bad("scenario %s: %d tests, want 1 to %d", sc.Name, len(sc.Tests), MaxTestsPerScenario)
		}
		ids := map[string]bool{}
		for _, t := range sc.Tests {
			if !testRE().MatchString(t) || ids[t] {
				return bad("scenario %s: test id %q is malformed or repeated", sc.Name, t)
			}
			ids[t] = true
		}
		dir := path.Join(ScenarioDir, sc.Name)
		for _, p := range []string{"instruction.md", "workspace"} {
			if _, err := fs.Stat(task, path.Join(dir, p)); err != nil {
				return bad("scenario %s has no %s", sc.Name, p)
			}
		}
		if _, err := fs.Stat(task, path.Join(dir, "hidden")); err == nil {
			return bad("scenario %s holds hidden tests in the task: publish them apart (the task's hidden digest pins them)", sc.Name)
		}
	}
	return s, nil
}

// MaxScoreOf is the number of scenarios: the most a pack can score.
func (s Spec) MaxScoreOf() int { return len(s.Scenarios) }

// KindTests is the artifact kind of a hidden tests tree.
const KindTests = "tests"

// TreeDigest is the SHA-256 of the normalised tar of a directory (the digest
// a tree artifact's layer carries as its uncompressed content).
func TreeDigest(dir string) (digest.Digest, error) {
	h := digest.SHA256.Digester()
	if err := bundle.WriteTar(h.Hash(), dir, nil); err != nil {
		return "", err
	}
	return h.Digest(), nil
}
