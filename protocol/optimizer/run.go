package optimizer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/feval/feval/sandbox"
)

// Where the sandboxed programs see their inputs.
const (
	taskMount       = sandbox.InputRoot + "/task"
	submissionMount = sandbox.InputRoot + "/submission"
	checkpointMount = sandbox.InputRoot + "/checkpoint"
	// CheckpointFile is the file the trainer writes in its output directory.
	CheckpointFile = "checkpoint.safetensors"
	resultFile     = "result.json"
)

// DefaultPython is the interpreter the task's programs run on: Debian's, with
// Debian's python3-torch.
const DefaultPython = "/usr/bin/python3"

// Run statuses. Every status but RunCompleted ends the evaluation; RunInfra
// is the validator's failure, every other is the submission's.
const (
	RunCompleted      = "completed"
	RunDiverged       = "diverged"
	RunCrashed        = "crashed"
	RunOutOfMemory    = "out_of_memory"
	RunProcessLimit   = "process_limit"
	RunTimeout        = "timeout"
	RunViolation      = "sandbox_violation"
	RunOutputExceeded = "output_exceeded"
	RunBadCheckpoint  = "bad_checkpoint"
	RunBadResult      = "bad_result"
	RunForbiddenHook  = "forbidden_hook"
	// RunOverBudget: a step was still running, in native code, when the
	// trainer's CPU backstop (1 to 2 s past the budget) ended the process.
	RunOverBudget = "over_budget"
	RunInfra      = "infra_error"
)

// Why a completed run stopped (Run.Stop).
const (
	// StopHorizon: the run completed the task's horizon within the budget.
	StopHorizon = "horizon"
	// StopBudget: the budget ran out; the step that passed it, if any, was
	// interrupted or discarded and is not counted.
	StopBudget = "budget"
	// stopSteps: a re-run of a recorded number of steps.
	stopSteps = "steps"
)

// Budget margins (docs/OPTIMIZER.md §3). The trainer interrupts a step that
// passes the budget within milliseconds while it runs Python code; its
// RLIMIT_CPU backstop kills a step stuck in native code 1 to 2 s past it. The
// sandbox's own CPU limit adds what the interpreter, torch's import and the
// checkpoint need outside the loop.
const (
	BackstopMillis         = 2_000
	StartupAllowanceMillis = 10_000
)

// Machine runs the task's programs in the sandbox. The zero value uses
// DefaultPython.
type Machine struct {
	// Python is the interpreter's absolute path.
	Python string
	// MemoryBytes bounds each sandboxed run (default 1 GiB).
	MemoryBytes int64
}

func (m Machine) python() string {
	if m.Python == "" {
		return DefaultPython
	}
	return m.Python
}

func (m Machine) memory() int64 {
	if m.MemoryBytes == 0 {
		return 1 << 30
	}
	return m.MemoryBytes
}

// env is the complete environment of the task's programs: one thread for
// every math library, a fixed string hash seed, nothing from the host.
var env = []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1",
	"OPENBLAS_NUM_THREADS=1", "LC_ALL=C.UTF-8", "PYTHONHASHSEED=0"}

// Setarch is util-linux's setarch, on every Debian system. The trainer runs
// under "setarch -R", which sets the ADDR_NO_RANDOMIZE personality: the
// interpreter then gets the same addresses in every process, so an object's
// address (in a method's or a generator's text, in the order of a set of
// objects) is a function of the run's inputs too.
const Setarch = "/usr/bin/setarch"

// trainerArgs starts the trainer so that training is a function of the
// submission, the task, the seed and the steps (docs/OPTIMIZER.md §3,
// "Reproducible training"): no address-space randomization, and the
// interpreter without -E, which would ignore PYTHONHASHSEED. Nothing else
// of the host's environment reaches it (env is complete), and -s -P -B keep
// the user's site directory, the script's directory and bytecode files out,
// as -I would. The trainer checks all three settings before it imports the
// submission.
func (m Machine) trainerArgs(script string, args ...string) []string {
	return append([]string{Setarch, "-R", m.python(), "-s", "-P", "-B", script}, args...)
}

// missing reports, as the validator's failure, a machine without the
// interpreter or setarch, before any sandbox starts.
func (m Machine) missing() string {
	if _, err := os.Stat(m.python()); err != nil {
		return "the validator's python interpreter is missing"
	}
	if _, err := os.Stat(Setarch); err != nil {
		return "the validator has no setarch (util-linux)"
	}
	return ""
}

// Training is what one sandboxed training run produced.
type Training struct {
	// Status is RunCompleted or why the run failed; Detail explains it.
	Status string
	Detail string
	// Steps is the number of optimizer steps completed (within the budget).
	Steps int
	// CPUMillis is the CPU time of the training loop, from the optimizer's
	// construction to the end of the last step (a discarded one included),
	// as the trainer measured it; for a run the backstop ended, the whole
	// process's CPU time, as the sandbox measured it.
	CPUMillis int64
	// Checkpoint holds the trainer's checkpoint bytes, not yet validated.
	Checkpoint []byte
	// LoopMicros and CPUMicros are the trainer's own wall and CPU time of the
	// training loop (for benchmarks; never part of a verdict).
	LoopMicros, CPUMicros int64
	// Sandbox is the sandbox's report.
	Sandbox sandbox.Result
}

type trainerResult struct {
	Status     string `json:"status"`
	Steps      int    `json:"steps"`
	Stop       string `json:"stop"`
	DivergedAt int    `json:"diverged_at"`
	Error      string `json:"error"`
	CPUMicros  int64  `json:"cpu_micros"`
	LoopMicros int64  `json:"loop_micros"`
}

// Train runs the task's training program in a fresh sandbox on the task
// directory taskDir and the submission directory subDir (host paths, both
// mounted read-only) with the given seed. steps = 0 trains until the horizon
// or the budget; steps > 0 trains exactly that many steps (a re-run of a
// recorded run). The returned error is reserved for the caller's mistakes;
// validator-side failures are a Training with Status RunInfra.
func (m Machine) Train(ctx context.Context, spec Spec, taskDir, subDir string, seed int64, steps int) (Training, error) {
	if why := m.missing(); why != "" {
		return Training{Status: RunInfra, Detail: why}, nil
	}
	out, err := os.MkdirTemp("", "feval-train-")
	if err != nil {
		return Training{}, err
	}
	defer os.RemoveAll(out)
	if err := os.Mkdir(filepath.Join(out, "out"), 0o700); err != nil {
		return Training{}, err
	}
	args := m.trainerArgs(path.Join(taskMount, spec.Entry.Train), taskMount,
		path.Join(submissionMount, "optimizer.py"), sandbox.OutputPath, strconv.FormatInt(seed, 10))
	budget := spec.Training.BudgetCPUMillis
	if steps > 0 {
		args = append(args, strconv.Itoa(steps))
		budget *= 4 // a re-run is not held to the budget, only bounded
	}
	cpuLimit := budget + BackstopMillis + StartupAllowanceMillis
	res, err := sandbox.Run(ctx, sandbox.Spec{
		Args: args,
		Env:  env,
		Inputs: []sandbox.Mount{
			{Source: taskDir, Target: taskMount},
			{Source: subDir, Target: submissionMount},
		},
		OutputDir: filepath.Join(out, "out"),
		Limits: sandbox.Limits{
			WallMillis:  4*cpuLimit + 60_000,
			CPUMillis:   cpuLimit,
			MemoryBytes: m.memory(),
			Processes:   64,
			OutputBytes: spec.CheckpointBytes() + 1<<20,
			OutputFiles: 16,
			TmpBytes:    16 << 20,
		},
	})
	t := Training{Sandbox: res}
	if err != nil {
		t.Status, t.Detail = RunInfra, infraDetail(err)
		return t, nil
	}
	if res.Unsandboxed {
		t.Status, t.Detail = RunInfra, "the run was not sandboxed"
		return t, nil
	}
	switch res.Class {
	case sandbox.ClassInfraError:
		t.Status, t.Detail = RunInfra, "sandbox infrastructure failure"
		return t, nil
	case sandbox.ClassViolation:
		t.Status, t.Detail = RunViolation, "denied system call "+res.Violation
		return t, nil
	case sandbox.ClassOOM:
		t.Status, t.Detail = RunOutOfMemory, fmt.Sprintf("the run exceeded its %d byte memory limit", m.memory())
		return t, nil
	case sandbox.ClassPidsExceeded:
		t.Status, t.Detail = RunProcessLimit, "the run exceeded its process limit"
		return t, nil
	case sandbox.ClassTimeout:
		t.Status, t.Detail = RunTimeout, "the run exceeded its time limit"
		return t, nil
	case sandbox.ClassOutputExceeded:
		t.Status, t.Detail = RunOutputExceeded, "the run wrote more than its output limit"
		return t, nil
	}
	b, rerr := readBounded(filepath.Join(out, "out", resultFile), 4096)
	if rerr != nil {
		// The trainer writes result.json last; without it, the process died
		// before the end. Before the submission is imported it cannot be the
		// submission's doing: torch missing, a broken interpreter.
		if bytes.Contains(res.Stderr, []byte("No module named")) || res.ExitCode == 127 {
			t.Status, t.Detail = RunInfra, "the trainer could not start: "+lastLine(res.Stderr)
			return t, nil
		}
		if steps == 0 && res.Signal == int(syscall.SIGXCPU) {
			t.Status, t.Detail, t.CPUMillis = RunOverBudget, fmt.Sprintf("a step was still running when the CPU backstop (1 to 2 s past the %d ms budget) ended the run", budget), res.CPUMillis
			return t, nil
		}
		t.Status, t.Detail = RunCrashed, fmt.Sprintf("the trainer died (exit %d, signal %d)", res.ExitCode, res.Signal)
		return t, nil
	}
	var r trainerResult
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Status, t.Detail = RunBadResult, "result.json is malformed"
		return t, nil
	}
	t.Steps, t.LoopMicros, t.CPUMicros, t.CPUMillis = r.Steps, r.LoopMicros, r.CPUMicros, r.CPUMicros/1000
	limit := spec.Training.HorizonSteps
	if steps > 0 {
		limit = steps
	}
	if r.Steps < 0 || r.Steps > limit {
		t.Status, t.Detail = RunBadResult, fmt.Sprintf("%d steps reported, the limit is %d", r.Steps, limit)
		return t, nil
	}
	switch r.Status {
	case "ok":
	case "diverged":
		t.Status, t.Detail = RunDiverged, fmt.Sprintf("loss or parameters not finite at step %d", r.DivergedAt)
		return t, nil
	case "crashed":
		t.Status, t.Detail = RunCrashed, "the optimizer raised "+identifier(r.Error)
		return t, nil
	case "unfixed":
		// Reported before the submission is imported: the validator's
		// machine does not give the trainer a reproducible process.
		t.Status, t.Detail = RunInfra, "the trainer's process is not reproducible here ("+identifier(r.Error)+")"
		return t, nil
	case "hooks":
		t.Status, t.Detail = RunForbiddenHook, "the optimizer registered a hook; it sees gradients through step() only"
		if r.Error == "graph" {
			t.Detail = "the optimizer put its tensors into an autograd graph or hooked them; it sees gradients through step() only"
		}
		return t, nil
	default:
		t.Status, t.Detail = RunBadResult, "unknown trainer status"
		return t, nil
	}
	if res.Class != sandbox.ClassOK {
		t.Status, t.Detail = RunCrashed, fmt.Sprintf("the trainer exited with status %d", res.ExitCode)
		return t, nil
	}
	if !trainerStopped(r.Stop, r.Steps, steps, limit) {
		t.Status, t.Detail = RunBadResult, fmt.Sprintf("stop %q after %d steps is not a way this run ends", identifier(r.Stop), r.Steps)
		return t, nil
	}
	ck, err := readBounded(filepath.Join(out, "out", CheckpointFile), spec.CheckpointBytes())
	if err != nil {
		t.Status, t.Detail = RunBadCheckpoint, oneLine(err.Error())
		return t, nil
	}
	t.Status, t.Checkpoint = RunCompleted, ck
	return t, nil
}

// trainerStopped reports whether a trainer's stop and step count are a way
// its run ends: a re-run (fixed > 0) after exactly its steps; a run to the
// horizon after limit steps; a run the budget stopped after any number.
func trainerStopped(stop string, got, fixed, limit int) bool {
	switch {
	case fixed > 0:
		return stop == stopSteps && got == limit
	case stop == StopHorizon:
		return got == limit
	}
	return stop == StopBudget
}

// HeldOut is what one held-out evaluation produced.
type HeldOut struct {
	// Status is RunCompleted, RunDiverged (the loss is not finite) or RunInfra.
	Status, Detail string
	LossMicroNats  int64
	Sandbox        sandbox.Result
}

// Evaluate computes the held-out loss of a checkpoint that ValidateCheckpoint
// accepted over the round's windows of the held-out pool (windows: 4-byte
// little-endian starts, Derived.WindowsBytes), in a fresh sandbox holding
// only the task directory, the checkpoint and the windows. Its failures are
// the validator's (RunInfra), except a loss that is not finite.
func (m Machine) Evaluate(ctx context.Context, spec Spec, taskDir string, checkpoint, windows []byte) (HeldOut, error) {
	dir, err := os.MkdirTemp("", "feval-heldout-")
	if err != nil {
		return HeldOut{}, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return HeldOut{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, CheckpointFile), checkpoint, 0o644); err != nil {
		return HeldOut{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, windowsFile), windows, 0o644); err != nil {
		return HeldOut{}, err
	}
	res, err := sandbox.Run(ctx, sandbox.Spec{
		Args: []string{m.python(), "-I", "-B", path.Join(taskMount, spec.Entry.HeldOut), taskMount,
			path.Join(checkpointMount, CheckpointFile), path.Join(checkpointMount, windowsFile)},
		Env: env,
		Inputs: []sandbox.Mount{
			{Source: taskDir, Target: taskMount},
			{Source: dir, Target: checkpointMount},
		},
		Limits: sandbox.Limits{WallMillis: 300_000, CPUMillis: 120_000, MemoryBytes: m.memory(), Processes: 64,
			OutputBytes: 1 << 20, TmpBytes: 16 << 20, StdoutBytes: 4096},
	})
	h := HeldOut{Sandbox: res}
	switch {
	case err != nil:
		h.Status, h.Detail = RunInfra, infraDetail(err)
		return h, nil
	case res.Unsandboxed:
		h.Status, h.Detail = RunInfra, "the evaluation was not sandboxed"
		return h, nil
	case res.Class != sandbox.ClassOK:
		h.Status, h.Detail = RunInfra, fmt.Sprintf("held-out evaluation failed (%s): %s", res.Class, lastLine(res.Stderr))
		return h, nil
	}
	var r struct {
		Status        string `json:"status"`
		LossMicroNats int64  `json:"held_out_loss_micro_nats"`
		Windows       int64  `json:"windows"`
	}
	dec := json.NewDecoder(bytes.NewReader(res.Stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		h.Status, h.Detail = RunInfra, "held-out evaluation printed no result"
		return h, nil
	}
	switch {
	case r.Status == "non_finite":
		h.Status, h.Detail = RunDiverged, "the held-out loss is not finite"
	case r.Status == "ok" && r.LossMicroNats >= 0:
		h.Status, h.LossMicroNats = RunCompleted, r.LossMicroNats
	default:
		h.Status, h.Detail = RunInfra, "held-out evaluation printed a malformed result"
	}
	return h, nil
}

// infraDetail names a sandbox failure without host paths or other details of
// the validator's machine, which must not reach a verdict.
func infraDetail(err error) string {
	var ue *sandbox.UnavailableError
	var se *sandbox.SetupError
	switch {
	case errors.As(err, &ue):
		return fmt.Sprintf("sandbox unavailable: %s needs %s", ue.Guarantee, ue.Mechanism)
	case errors.As(err, &se):
		return "sandbox setup failed: " + se.Stage
	}
	return "sandbox unavailable"
}

func readBounded(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s was not written", filepath.Base(p))
		}
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s exceeds %d bytes", filepath.Base(p), limit)
	}
	return b, nil
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return oneLine(s)
}

// identifier keeps a miner-chosen exception name printable and short.
func identifier(s string) string {
	var b strings.Builder
	for _, c := range s {
		if b.Len() >= 64 {
			break
		}
		if c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 {
		return "an exception"
	}
	return b.String()
}
