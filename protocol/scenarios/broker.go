package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/feval/feval/sandbox"
)

// Bounds of one workspace call of the verifier (PROTOCOL.md §6c, "Hidden
// tests and the ws fixture"): verify.py asks for at most brokerMaxSeconds of
// wall and CPU time; the call's sandbox gets brokerGraceMillis more wall time
// for its own start.
const (
	brokerMaxSeconds  = 10
	brokerGraceMillis = 5_000
	maxBrokerRequest  = 16 << 20  // a call's arguments and the test's temporary files (8 MiB), in base64
	maxBrokerStream   = 1<<20 + 1 // verify.py's MAX_ANSWER + 1
)

// brokerPath is the path on the verifier's socket at which it asks for a
// workspace call.
const brokerPath = "/feval/ws"

// Where a workspace call's sandbox finds its request's standard input.
const brokerCallMount = sandbox.InputRoot + "/call"

// workspaceBroker runs the verifier's workspace calls of one verification,
// one at a time, each in a fresh sandbox of its own: the requested program
// with the final workspace, read-only, as its working directory, and nothing
// else of the verification in view (no tests, no report, no process of the
// verifier). The answer goes back on the verifier's socket, which no
// workspace process holds.
type workspaceBroker struct {
	ctx context.Context
	ws  string // the host path of the final workspace

	mu sync.Mutex
	// infra is set when a call's sandbox failed for a reason that is not
	// the pack's: the verification is then void (infra_error).
	infra string
}

// brokerRequest is one workspace call: the program and its arguments (args[0]
// is /usr/bin/python3), its standard input, its environment (the test
// process's), the test's temporary files (a tar of verify.py's BASETEMP), and
// its bound.
type brokerRequest struct {
	Args    []string          `json:"args"`
	Stdin   []byte            `json:"stdin"` // base64 in JSON
	Env     map[string]string `json:"env"`
	Files   []byte            `json:"files"` // base64 in JSON
	Seconds float64           `json:"seconds"`
}

// brokerStart is the program a workspace call's sandbox starts (feval's,
// before any workspace code): it restores the test's temporary files at their
// own paths under /tmp/feval-pytest (regular files and directories only,
// names that stay below it), takes the call's standard input, changes to the
// workspace and replaces itself with the requested program, in the test
// process's environment.
const brokerStart = `import io, json, os, sys, tarfile
call = "` + brokerCallMount + `"
base = "/tmp/feval-pytest"
with open(call + "/env.json") as f:
    env = json.load(f)
with open(call + "/files.tar", "rb") as f:
    data = f.read()
if data:
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        for m in t.getmembers():
            name = os.path.normpath(m.name)
            if name.startswith(("/", "..")) or not (m.isfile() or m.isdir()):
                continue
            p = os.path.join(base, name)
            if m.isdir():
                os.makedirs(p, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with t.extractfile(m) as src, open(p, "wb") as dst:
                dst.write(src.read())
fd = os.open(call + "/stdin", os.O_RDONLY)
os.dup2(fd, 0)
os.close(fd)
os.chdir("` + workspaceMount + `")
os.execve(sys.argv[1], sys.argv[1:], env)
`

// brokerAnswer is what the verifier gets back.
type brokerAnswer struct {
	ExitCode int    `json:"exit_code"`
	Stdout   []byte `json:"stdout"`
	Stderr   []byte `json:"stderr"`
	TimedOut bool   `json:"timed_out,omitempty"`
	Stopped  string `json:"stopped,omitempty"`
}

func (b *workspaceBroker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path != brokerPath {
		http.NotFound(rw, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBrokerRequest+1))
	var req brokerRequest
	if err != nil || len(body) > maxBrokerRequest || json.Unmarshal(body, &req) != nil || len(req.Args) == 0 || req.Args[0] != Python {
		http.Error(rw, "not a workspace call", http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	ans, ok := b.call(req)
	b.mu.Unlock()
	if !ok {
		http.Error(rw, "the workspace call could not run", http.StatusServiceUnavailable)
		return
	}
	writeJSON(rw, ans)
}

// failed reports the infrastructure failure that voided the verification, if any.
func (b *workspaceBroker) failed() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.infra
}

// call runs one workspace call (b.mu held); ok is false when the validator's
// machine failed it.
func (b *workspaceBroker) call(req brokerRequest) (brokerAnswer, bool) {
	if b.infra != "" {
		return brokerAnswer{}, false
	}
	fail := func(what string) (brokerAnswer, bool) {
		b.infra = what
		return brokerAnswer{}, false
	}
	if math.IsNaN(req.Seconds) || req.Seconds < 0.1 {
		req.Seconds = 0.1
	}
	req.Seconds = min(req.Seconds, brokerMaxSeconds)
	dir, err := os.MkdirTemp("", "feval-ws-")
	if err != nil {
		return fail("a workspace call could not be prepared")
	}
	defer os.RemoveAll(dir)
	envJSON, err := json.Marshal(req.Env)
	if err != nil {
		return fail("a workspace call could not be prepared")
	}
	if os.Chmod(dir, 0o755) != nil || os.WriteFile(filepath.Join(dir, "stdin"), req.Stdin, 0o644) != nil ||
		os.WriteFile(filepath.Join(dir, "files.tar"), req.Files, 0o644) != nil || os.WriteFile(filepath.Join(dir, "env.json"), envJSON, 0o644) != nil {
		return fail("a workspace call could not be prepared")
	}
	millis := int64(math.Ceil(req.Seconds * 1000))
	args := append([]string{Python, "-I", "-B", "-c", brokerStart}, req.Args...)
	res, err := sandbox.Run(b.ctx, sandbox.Spec{
		Args:   args,
		Env:    env,
		Inputs: []sandbox.Mount{{Source: b.ws, Target: workspaceMount}, {Source: dir, Target: brokerCallMount}},
		Limits: sandbox.Limits{WallMillis: millis + brokerGraceMillis, CPUMillis: millis,
			MemoryBytes: 512 << 20, Processes: 64, OutputBytes: 8 << 20, OutputFiles: 16, TmpBytes: 8 << 20,
			StdoutBytes: maxBrokerStream, StderrBytes: maxBrokerStream},
	})
	if b.ctx.Err() != nil {
		return brokerAnswer{}, false
	}
	if f := callInfra("a workspace call", res, err); f != "" {
		return fail(f)
	}
	ans := brokerAnswer{ExitCode: res.ExitCode, Stdout: append([]byte{}, res.Stdout...), Stderr: append([]byte{}, res.Stderr...)}
	switch res.Class {
	case sandbox.ClassTimeout:
		ans.TimedOut = true
	case sandbox.ClassViolation:
		ans.Stopped = "denied system call " + res.Violation
	case sandbox.ClassOOM, sandbox.ClassPidsExceeded, sandbox.ClassOutputExceeded:
		ans.Stopped = fmt.Sprintf("a bound (%s)", res.Class)
	}
	return ans, true
}

// controlBroker answers every workspace call of a control run at once, as a
// call stopped before it started: no workspace code runs, so what the
// verifier does in a control run is its own doing.
type controlBroker struct{}

func (controlBroker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path != brokerPath {
		http.NotFound(rw, r)
		return
	}
	io.Copy(io.Discard, io.LimitReader(r.Body, maxBrokerRequest+1))
	writeJSON(rw, brokerAnswer{ExitCode: 1, Stopped: "the control run runs no workspace code"})
}

// writeJSON answers a call on a sandbox's socket with v as JSON.
func writeJSON(rw http.ResponseWriter, v any) {
	out, _ := json.Marshal(v)
	rw.Header().Set("Content-Type", "application/json")
	rw.Write(out)
}

func (controlBroker) failed() string { return "" }
