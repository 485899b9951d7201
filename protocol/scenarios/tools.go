package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sync"

	"github.com/feval/feval/sandbox"
)

// Bounds of one tool call of the harness (PROTOCOL.md §6c, "Harness
// contract"): the command's own wall bound is what the harness asks (at most
// toolMaxSeconds); its CPU time is bounded too, and its sandbox gets
// toolGraceMillis more wall time for the workspace's copies.
const (
	toolMaxSeconds  = 30
	toolCPUMillis   = 30_000
	toolGraceMillis = 5_000
	maxToolRequest  = 1 << 20
	maxToolResult   = 1 << 20
)

// Where a tool call's sandbox finds its request (the workspace is at
// workspaceMount).
const toolRequestMount = sandbox.InputRoot + "/tool"

// toolPath is the path on the harness's socket at which it asks for a tool
// call; every other path goes to the pack's policy.
const toolPath = "/feval/tool"

// toolRunner runs the harness's tool calls of one scenario, one at a time,
// each in a fresh sandbox of its own: the harness program in its --tool mode,
// on a read-only view of the workspace the runner keeps in ws. A call that
// ends within its bounds leaves its copy of the workspace in /out/workspace,
// which becomes the workspace; a call stopped at a bound changes nothing.
// Nothing a command does reaches the harness: another sandbox, another pid
// namespace, another cgroup, no socket.
type toolRunner struct {
	ctx     context.Context
	harness string // the host path of the harness program
	ws      string // the host path of the workspace

	mu sync.Mutex
	// infra is set when a call's sandbox failed for a reason that is not
	// the pack's (the validator's machine): the scenario is infra_error.
	infra string
}

// toolRequest is what the harness sends for one tool call; the runner
// passes it on with the seconds it allows.
type toolRequest struct {
	Name      any     `json:"name"`
	Arguments any     `json:"arguments"`
	Seconds   float64 `json:"seconds"`
}

func (t *toolRunner) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxToolRequest+1))
	var req toolRequest
	if err != nil || len(body) > maxToolRequest || json.Unmarshal(body, &req) != nil {
		http.Error(rw, "not a tool call", http.StatusBadRequest)
		return
	}
	t.mu.Lock()
	result := t.call(req)
	t.mu.Unlock()
	writeJSON(rw, map[string]string{"result": result})
}

// failed reports the infrastructure failure that ended the tool calls, if any.
func (t *toolRunner) failed() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.infra
}

// call runs one tool call (t.mu held) and returns the text the model sees.
func (t *toolRunner) call(req toolRequest) string {
	const noRun = "error: the tool could not run"
	if t.infra != "" {
		return noRun
	}
	fail := func(what string) string {
		t.infra = what
		return noRun
	}
	if math.IsNaN(req.Seconds) || req.Seconds < 1 {
		req.Seconds = 1
	}
	req.Seconds = min(req.Seconds, toolMaxSeconds)
	body, err := json.Marshal(req)
	if err != nil {
		return "error: arguments must be a JSON object"
	}
	dir, err := os.MkdirTemp("", "feval-tool-")
	if err != nil {
		return fail("a tool call could not be prepared")
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if os.Chmod(dir, 0o755) != nil || os.Mkdir(in, 0o755) != nil || os.Mkdir(out, 0o755) != nil ||
		os.WriteFile(filepath.Join(in, "request.json"), body, 0o644) != nil {
		return fail("a tool call could not be prepared")
	}
	res, err := sandbox.Run(t.ctx, sandbox.Spec{
		Args: []string{Python, "-I", "-B", path.Join(harnessMount, path.Base(HarnessFile)), "--tool"},
		Env:  env,
		Inputs: []sandbox.Mount{
			{Source: t.harness, Target: harnessMount + "/" + path.Base(HarnessFile)},
			{Source: t.ws, Target: workspaceMount},
			{Source: in, Target: toolRequestMount},
		},
		OutputDir: out,
		Limits: sandbox.Limits{WallMillis: int64(req.Seconds*1000) + toolGraceMillis, CPUMillis: toolCPUMillis,
			MemoryBytes: 512 << 20, Processes: 64, OutputBytes: 16 << 20, OutputFiles: 1024, TmpBytes: 16 << 20,
			StdoutBytes: maxToolResult, StderrBytes: 64 << 10},
	})
	if t.ctx.Err() != nil {
		return "error: the scenario ended"
	}
	if f := callInfra("a tool call", res, err); f != "" {
		return fail(f)
	}
	switch {
	case res.Class == sandbox.ClassTimeout:
		return "error: the command timed out"
	case res.Class == sandbox.ClassViolation:
		return "error: the command was stopped: denied system call " + res.Violation
	case res.Class == sandbox.ClassOOM, res.Class == sandbox.ClassPidsExceeded, res.Class == sandbox.ClassOutputExceeded:
		return fmt.Sprintf("error: the command exceeded a bound (%s)", res.Class)
	}
	// The call's workspace, if it made one, is the workspace from now on.
	if fi, err := os.Stat(filepath.Join(out, "workspace")); err == nil && fi.IsDir() {
		next := t.ws + ".next"
		if os.RemoveAll(next) != nil || os.Rename(filepath.Join(out, "workspace"), next) != nil || readable(next) != nil ||
			os.RemoveAll(t.ws) != nil || os.Rename(next, t.ws) != nil {
			return fail("a tool call's workspace could not be kept")
		}
	}
	var reply struct {
		Result *string `json:"result"`
	}
	if res.Class != sandbox.ClassOK || res.StdoutTruncated || json.Unmarshal(res.Stdout, &reply) != nil || reply.Result == nil {
		return "error: the tool call ended without a result"
	}
	return *reply.Result
}

// toolMux sends the harness's tool calls to tools and everything else to the
// pack's policy.
func toolMux(policy, tools http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == toolPath {
			tools.ServeHTTP(rw, r)
			return
		}
		policy.ServeHTTP(rw, r)
	})
}
