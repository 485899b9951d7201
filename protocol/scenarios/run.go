package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/feval/feval/meter"
	"github.com/feval/feval/sandbox"
)

// Where things appear inside the scenario and verifier sandboxes.
const (
	scenarioMount  = sandbox.InputRoot + "/scenario"
	harnessMount   = sandbox.InputRoot + "/harness"
	workspaceMount = sandbox.InputRoot + "/workspace"
	testsMount     = sandbox.InputRoot + "/tests"
	verifierMount  = sandbox.InputRoot + "/verifier"
)

// Python is Debian's interpreter, the only one the task's programs run on.
const Python = "/usr/bin/python3"

// Stop reasons of a harness run besides the harness's own (finish, answer,
// max_turns, time, model_error, endpoint_error, bad_answer).
const (
	StopCrashed   = "harness_crashed"
	StopViolation = "harness_violation"
	StopLimit     = "harness_limit"
)

// AgentRun is what the harness of one scenario did.
type AgentRun struct {
	Turns  int    `json:"turns"`
	Stop   string `json:"stop"`
	Detail string `json:"detail,omitempty"`
	// Infra is set when the run failed for a reason that is not the pack's:
	// the sandbox could not run, or the harness outlived its time bound.
	Infra string `json:"-"`
}

var env = []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"}

// runAgent runs the harness of scenario sc in a fresh sandbox whose only route
// out is a Unix socket: its model requests go to h, its tool calls to a
// toolRunner, each in a sandbox of its own on the workspace kept in
// out/workspace, which holds the final workspace when the harness ends.
func runAgent(ctx context.Context, spec Spec, taskDir string, sc ScenarioSpec, h http.Handler, out string) (AgentRun, error) {
	dir := filepath.Join(taskDir, ScenarioDir, sc.Name)
	ws, hout := filepath.Join(out, "workspace"), filepath.Join(out, "harness")
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(dir, "workspace"))); err != nil {
		return AgentRun{}, fmt.Errorf("scenario %s: copying the workspace: %w", sc.Name, err)
	}
	if err := readable(ws); err != nil {
		return AgentRun{}, err
	}
	if err := os.Mkdir(hout, 0o755); err != nil {
		return AgentRun{}, err
	}
	harness := filepath.Join(taskDir, filepath.FromSlash(HarnessFile))
	tools := &toolRunner{ctx: ctx, harness: harness, ws: ws}
	sock, stop, err := serveSocket(toolMux(h, tools))
	if err != nil {
		return AgentRun{}, err
	}
	defer stop()

	cfg, _ := json.Marshal(map[string]any{"max_turns": spec.Harness.MaxTurns, "max_tokens": spec.Harness.MaxTokens,
		"wall_millis": spec.Harness.WallMillis, "model": "policy"})
	res, err := sandbox.Run(ctx, sandbox.Spec{
		Args: []string{Python, "-I", "-B", path.Join(harnessMount, path.Base(HarnessFile))},
		Env:  append(append([]string{}, env...), "FEVAL_HARNESS="+string(cfg)),
		Inputs: []sandbox.Mount{
			{Source: harness, Target: harnessMount + "/" + path.Base(HarnessFile)},
			{Source: filepath.Join(dir, "instruction.md"), Target: scenarioMount + "/instruction.md"},
		},
		OutputDir: hout,
		Socket:    sock,
		Limits: sandbox.Limits{WallMillis: spec.Harness.WallMillis + harnessGraceMillis, CPUMillis: spec.Harness.WallMillis + harnessGraceMillis,
			MemoryBytes: 512 << 20, Processes: 64, OutputBytes: 1 << 20, OutputFiles: 16, TmpBytes: 16 << 20},
	})
	stop() // no tool call runs after the harness ended
	if ctx.Err() != nil {
		return AgentRun{}, ctx.Err()
	}
	var a AgentRun
	switch {
	case err != nil:
		a.Infra = "the scenario sandbox could not run: " + sandboxDetail(err)
		return a, nil
	case res.Unsandboxed:
		a.Infra = "the scenario ran without the sandbox"
		return a, nil
	case res.Class == sandbox.ClassInfraError:
		a.Infra = "sandbox infrastructure failure"
		return a, nil
	case res.Class == sandbox.ClassTimeout:
		a.Infra = "the harness outlived its time bound"
		return a, nil
	}
	if f := tools.failed(); f != "" {
		a.Infra = f
		return a, nil
	}
	b, rerr := readBounded(filepath.Join(hout, "harness.json"), 4096)
	if rerr != nil || json.Unmarshal(b, &a) != nil || a.Stop == "" {
		a = AgentRun{Stop: StopCrashed, Detail: fmt.Sprintf("exit %d", res.ExitCode)}
		if bytes.Contains(res.Stderr, []byte("No module named")) || res.ExitCode == 127 {
			a.Infra = "the harness could not start"
		}
	}
	switch res.Class {
	case sandbox.ClassViolation:
		a.Stop, a.Detail = StopViolation, "denied system call "+res.Violation
	case sandbox.ClassOOM, sandbox.ClassPidsExceeded, sandbox.ClassOutputExceeded:
		a.Stop, a.Detail = StopLimit, string(res.Class)
	}
	if a.Turns < 0 || a.Turns > spec.Harness.MaxTurns {
		a.Turns = 0
	}
	return a, nil
}

// harnessGraceMillis is the wall time the harness's sandbox gets beyond the
// task's harness wall_millis: the harness stops itself at wall_millis, but
// its last tool call may take up to toolMaxSeconds and the 20 s the harness
// waits beyond a call's seconds for its answer (TOOL_GRACE in harness.py),
// and it then writes its record.
const harnessGraceMillis = toolMaxSeconds*1000 + 20_000 + 15_000

// verifierGraceMillis is the wall time the verifier's sandbox gets beyond
// the task's verifier wall_millis. verify.py stops workspace code at three
// quarters of wall_millis; the grace is for pytest's own start and report,
// which a loaded machine can slow by seconds, so that load alone never turns
// a scenario into infra_error (PROTOCOL.md §6c, Verifier sandbox). A
// variable only so that a test of verifier failures need not wait for it.
var verifierGraceMillis int64 = 30_000

// verify runs the task's verifier on the final workspace ws of scenario sc
// and returns its report of the declared tests. Two sandboxes take part: the
// verifier (pytest with the tests, no workspace) and, for each of its
// workspace calls, a sandbox of the workspace broker (the workspace, no
// tests); the verifier reaches the broker only over its socket.
//
// A verifier that crashes, times out or writes no readable report is run once
// more, as a control run, with every workspace call failing at once: if that
// run reports, the failure came with the workspace's answers, so it is the
// pack's and every test counts as failed (control says so); if not, or if a
// sandbox cannot run, the scenario is infra_error (infra says why).
func verify(ctx context.Context, spec Spec, taskDir string, sc ScenarioSpec, ws string) (r *Report, infra, control string) {
	r, err := runVerifier(ctx, spec, taskDir, sc, &workspaceBroker{ctx: ctx, ws: ws})
	var vf *verifierFailure
	if !errors.As(err, &vf) {
		if err != nil {
			return nil, err.Error(), ""
		}
		return r, "", ""
	}
	if _, err := runVerifier(ctx, spec, taskDir, sc, controlBroker{}); err != nil {
		return nil, vf.Detail + ", and so did the control run without workspace code", ""
	}
	failed := allFailed(sc.Tests)
	return &failed, "", vf.Detail + " with the workspace's answers and reported without them (control run): every test counts as failed"
}

// verifierBroker answers a verifier's workspace calls.
type verifierBroker interface {
	http.Handler
	// failed says why the validator's machine failed a call ("" if it did not).
	failed() string
}

// verifierFailure is a verifier run that crashed, timed out or wrote no
// readable report: whose doing it was, the control run decides.
type verifierFailure struct{ Detail string }

func (e *verifierFailure) Error() string { return e.Detail }

// runVerifier runs the verifier once, its workspace calls answered by broker.
// The error is an *InfraError when a sandbox could not run, a
// *verifierFailure when the verifier failed, or the context's.
func runVerifier(ctx context.Context, spec Spec, taskDir string, sc ScenarioSpec, broker verifierBroker) (*Report, error) {
	out, err := os.MkdirTemp("", "feval-verify-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(out)
	sock, stop, err := serveSocket(broker)
	if err != nil {
		return nil, err
	}
	defer stop()
	res, err := sandbox.Run(ctx, sandbox.Spec{
		Args: []string{Python, "-I", "-B", path.Join(verifierMount, path.Base(VerifierFile))},
		Env:  append(slices.Clip(env), fmt.Sprintf("FEVAL_VERIFIER_WALL_MILLIS=%d", spec.Verifier.WallMillis)),
		Inputs: []sandbox.Mount{
			{Source: filepath.Join(taskDir, filepath.FromSlash(VerifierFile)), Target: verifierMount + "/" + path.Base(VerifierFile)},
			{Source: filepath.Join(taskDir, ScenarioDir, sc.Name, "hidden"), Target: testsMount},
		},
		OutputDir: out,
		Socket:    sock,
		Limits: sandbox.Limits{WallMillis: spec.Verifier.WallMillis + verifierGraceMillis, CPUMillis: spec.Verifier.WallMillis,
			MemoryBytes: 512 << 20, Processes: 64, OutputBytes: 4 << 20, OutputFiles: 16, TmpBytes: 16 << 20},
	})
	stop() // no workspace call runs after the verifier ended
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	switch {
	case err != nil:
		return nil, &InfraError{"the verifier sandbox could not run: " + sandboxDetail(err)}
	case res.Unsandboxed:
		return nil, &InfraError{"the verifier ran without the sandbox"}
	case broker.failed() != "":
		return nil, &InfraError{broker.failed()}
	case res.Class == sandbox.ClassTimeout:
		return nil, &verifierFailure{"the verifier timed out"}
	case res.Class != sandbox.ClassOK:
		return nil, &verifierFailure{fmt.Sprintf("the verifier crashed (%s, exit %d)", res.Class, res.ExitCode)}
	}
	b, err := readBounded(filepath.Join(out, "junit.xml"), maxReportBytes)
	if err != nil {
		return nil, &verifierFailure{"the verifier wrote no report"}
	}
	r, err := ParseJUnit(b, sc.Tests)
	if err != nil {
		return nil, &verifierFailure{"the verifier's report is unreadable"}
	}
	return &r, nil
}

// serveSocket serves h on a Unix socket in a fresh directory, for a
// sandbox's Spec.Socket; stop closes the server and removes the directory
// (calling it again does nothing).
func serveSocket(h http.Handler) (sock string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "feval-sock-")
	if err != nil {
		return "", nil, err
	}
	sock = filepath.Join(dir, "feval.sock")
	var ln net.Listener
	if err = os.Chmod(dir, 0o755); err == nil {
		ln, err = meter.ListenUnix(sock, 0o666)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(ln)
	var once sync.Once
	return sock, func() { once.Do(func() { srv.Close(); os.RemoveAll(dir) }) }, nil
}

// callInfra says why a tool or workspace call's sandbox (what names the call)
// failed for a reason that is the validator's machine's, or "" when it ran.
func callInfra(what string, res sandbox.Result, err error) string {
	switch {
	case err != nil:
		return what + "'s sandbox could not run: " + sandboxDetail(err)
	case res.Unsandboxed:
		return what + " ran without the sandbox"
	case res.Class == sandbox.ClassInfraError:
		return what + "'s sandbox failed"
	}
	return ""
}

// InfraError is a failure of the validator's machinery, not of the pack: the
// scenario is infra_error, never a score.
type InfraError struct{ Detail string }

func (e *InfraError) Error() string { return e.Detail }

func sandboxDetail(err error) string {
	var ue *sandbox.UnavailableError
	var se *sandbox.SetupError
	switch {
	case errors.As(err, &ue):
		return "sandbox unavailable"
	case errors.As(err, &se):
		return "sandbox setup failed"
	case errors.Is(err, sandbox.ErrInvalidSpec):
		return "invalid sandbox spec"
	}
	return "sandbox error"
}

func readBounded(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > limit {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", filepath.Base(p), limit)
	}
	b := make([]byte, fi.Size())
	_, err = f.ReadAt(b, 0)
	return b, err
}

// readable makes a tree the sandbox user can read: directories 0755, files 0644.
func readable(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		if d.Type().IsRegular() {
			return os.Chmod(p, 0o644)
		}
		return os.Remove(p)
	})
}
