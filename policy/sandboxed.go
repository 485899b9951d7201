package policy

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/feval/feval/gate"
	"github.com/feval/feval/sandbox"
)

//go:embed sdk/*.py
var sdkFiles embed.FS

// Where a sandboxed policy finds things.
const (
	packMount = sandbox.InputRoot + "/pack"
	sdkMount  = sandbox.InputRoot + "/sdk"
	runner    = sdkMount + "/feval_policy_run.py"
)

// crashGrace is how long a policy process whose connection broke may take
// to exit by itself before it is killed.
const crashGrace = 2 * time.Second

// TurnHeader carries the session turn on each request the sidecar sends a
// sandboxed policy.
const TurnHeader = "Feval-Turn"

// sandboxEngine runs a policy.py or server-form pack in the sandbox and
// forwards each agent request to it.
type sandboxEngine struct {
	s        *Sidecar
	ctx      context.Context
	gatePath string
	sdkDir   string

	mu       sync.Mutex
	proc     *proc
	restarts int
	started  int
}

// proc is one run of the policy process.
type proc struct {
	cancel context.CancelFunc
	done   chan struct{}
	res    sandbox.Result
	err    error
	client *http.Client
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// why describes how the process ended.
func (p *proc) why() string {
	if !p.exited() {
		return "the policy process is running"
	}
	if p.err != nil && p.res.Class == "" {
		return "sandbox: " + p.err.Error()
	}
	msg := fmt.Sprintf("the policy process ended (%s", p.res.Class)
	if p.res.Detail != "" {
		msg += ": " + p.res.Detail
	}
	msg += ")"
	if tail := lastLine(p.res.Stderr); tail != "" {
		msg += "; stderr: " + tail
	}
	return msg
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(strings.ToValidUTF8(string(b), "?")), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 300 {
		l = l[:300] + "..."
	}
	return l
}

func newSandboxEngine(ctx context.Context, s *Sidecar) (engine, error) {
	e := &sandboxEngine{s: s, ctx: ctx, gatePath: s.socketPath("gate.sock"), sdkDir: filepath.Join(s.workDir, "sdk")}
	if err := writeSDK(e.sdkDir); err != nil {
		return nil, fmt.Errorf("policy sidecar: %w", err)
	}
	ln, err := listenUnix(e.gatePath)
	if err != nil {
		return nil, fmt.Errorf("policy sidecar: outbound socket: %w", err)
	}
	s.serve(ctx, ln, s.outbound())
	if err := e.start(); err != nil {
		return nil, err
	}
	return e, nil
}

// WriteSDK writes the Python SDK (feval_policy.py and its runner) into dir,
// which is created; miners can use it to run a policy.py by hand.
func WriteSDK(dir string) error { return writeSDK(dir) }

func writeSDK(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	return fs.WalkDir(sdkFiles, "sdk", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := sdkFiles.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, path.Base(p)), b, 0o644)
	})
}

// spec is the sandbox run of the policy process listening at listen.
func (e *sandboxEngine) spec(listen string) sandbox.Spec {
	s := e.s
	var args []string
	switch s.pack.Form {
	case FormPython:
		args = []string{s.opts.Python, "-B", runner, packMount + "/" + gate.PolicyCodeFile}
	default:
		cmd := s.pack.Server.Command
		if cmd[0] == "python3" {
			args = append([]string{s.opts.Python, "-B", packMount + "/" + cmd[1]}, cmd[2:]...)
		} else {
			args = append([]string{packMount + "/" + cmd[0]}, cmd[1:]...)
		}
	}
	l := s.opts.Sandbox
	d := SandboxDefaults()
	fill := func(v *int64, def int64) {
		if *v == 0 {
			*v = def
		}
	}
	fill(&l.WallMillis, d.WallMillis)
	fill(&l.CPUMillis, d.CPUMillis)
	fill(&l.Processes, d.Processes)
	fill(&l.MemoryBytes, d.MemoryBytes)
	return sandbox.Spec{
		Args: args,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "PYTHONHASHSEED=0", "PYTHONDONTWRITEBYTECODE=1",
			"PYTHONPATH=" + sdkMount, "FEVAL_LISTEN_FD=" + strconv.Itoa(sandbox.ListenFD), "FEVAL_METER_SOCKET=" + sandbox.SocketPath},
		Dir:         packMount,
		Inputs:      []sandbox.Mount{{Source: s.pack.Dir, Target: packMount}, {Source: e.sdkDir, Target: sdkMount}},
		Socket:      e.gatePath,
		Listen:      listen,
		Limits:      l,
		Unsandboxed: s.opts.Unsandboxed,
	}
}

// start runs a new policy process and waits for its health check.
func (e *sandboxEngine) start() error {
	e.started++
	listen := e.s.socketPath(fmt.Sprintf("policy-%d.sock", e.started))
	ctx, cancel := context.WithCancel(e.ctx)
	p := &proc{cancel: cancel, done: make(chan struct{})}
	p.client = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", listen)
		},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 1,
	}}
	spec := e.spec(listen)
	go func() {
		defer close(p.done)
		p.res, p.err = sandbox.Run(ctx, spec)
	}()
	deadline := time.Now().Add(time.Duration(e.s.limits.StartMillis) * time.Millisecond)
	for {
		if p.exited() {
			cancel()
			if p.err != nil && p.res.Class == sandbox.ClassInfraError {
				// The sandbox could not run it: not the pack's fault.
				return fmt.Errorf("policy sidecar: starting the policy process: %w", p.err)
			}
			return fmt.Errorf("%w: %s", ErrStart, p.why())
		}
		hctx, hcancel := context.WithTimeout(ctx, time.Until(deadline))
		req, _ := http.NewRequestWithContext(hctx, http.MethodGet, "http://policy/v1/models", nil)
		resp, err := p.client.Do(req)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		}
		hcancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			e.proc = p
			return nil
		}
		if time.Now().After(deadline) {
			e.kill(p)
			return fmt.Errorf("%w: no healthy answer to GET /v1/models within %d ms (%s)", ErrStart, e.s.limits.StartMillis, p.why())
		}
		select {
		case <-p.done:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (e *sandboxEngine) kill(p *proc) {
	p.cancel()
	<-p.done
	p.client.CloseIdleConnections()
}

func (e *sandboxEngine) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc != nil {
		e.kill(e.proc)
		e.proc = nil
	}
}

// ready returns a running process, restarting a dead one within the
// restart budget.
func (e *sandboxEngine) ready() (*proc, *Failure) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc != nil && !e.proc.exited() {
		return e.proc, nil
	}
	if e.proc != nil {
		e.kill(e.proc)
		e.proc = nil
	}
	if e.restarts >= e.s.limits.MaxRestarts {
		return nil, &Failure{Kind: FailUnavailable, Message: fmt.Sprintf("the policy process was restarted %d times already", e.restarts)}
	}
	e.restarts++
	if err := e.start(); err != nil {
		return nil, &Failure{Kind: FailStart, Message: err.Error()}
	}
	return e.proc, nil
}

// retire kills the current process after a timeout or crash, giving one
// that is exiting by itself grace to do so (and to report why); the next
// request restarts it.
func (e *sandboxEngine) retire(p *proc, grace time.Duration) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc == p {
		e.proc = nil
	}
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	e.kill(p)
	return p.why()
}

func (e *sandboxEngine) answer(ctx context.Context, x *exchange) error {
	p, f := e.ready()
	if f != nil {
		return f
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://policy/v1/chat/completions", bytes.NewReader(x.req.raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(TurnHeader, strconv.Itoa(x.turn))
	resp, err := p.client.Do(req)
	if err != nil {
		return e.transportFailure(ctx, p, err)
	}
	defer resp.Body.Close()
	if name := resp.Header.Get(RouteHeader); name != "" && len(name) <= 64 {
		x.route = name
	}
	body := io.LimitReader(resp.Body, e.s.limits.MaxAnswerBytes+1)
	if resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(body)
		if err != nil {
			return e.transportFailure(ctx, p, err)
		}
		var ae struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		json.Unmarshal(b, &ae)
		kind := FailRaised
		if ae.Error.Code == "policy_malformed_output" {
			kind = FailMalformed
		}
		msg := ae.Error.Message
		if msg == "" {
			msg = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, clip(b, 200))
		}
		return &Failure{Kind: kind, Message: msg}
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
		if !x.req.stream {
			return &Failure{Kind: FailMalformed, Message: "the policy streamed an answer to a request that did not ask for a stream"}
		}
		return e.relayStream(ctx, p, x, body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return e.transportFailure(ctx, p, err)
	}
	if int64(len(b)) > e.s.limits.MaxAnswerBytes {
		return &Failure{Kind: FailMalformed, Message: fmt.Sprintf("the answer exceeds %d bytes", e.s.limits.MaxAnswerBytes)}
	}
	a, err := completionMessage(b)
	if err != nil {
		return &Failure{Kind: FailMalformed, Message: err.Error()}
	}
	x.final = a
	return nil
}

// transportFailure classifies an error talking to the policy process.
func (e *sandboxEngine) transportFailure(ctx context.Context, p *proc, err error) error {
	if ctx.Err() != nil {
		e.retire(p, 0)
		return &Failure{Kind: FailTimeout, Message: fmt.Sprintf("no complete answer within %d ms; the policy process was stopped and restarts for the next request", e.s.limits.RequestMillis)}
	}
	return &Failure{Kind: FailCrashed, Message: fmt.Sprintf("%v; %s", err, e.retire(p, crashGrace))}
}

// relayStream checks a streamed answer event by event, relays each chunk to
// the agent, and ends the stream with [DONE] only when the reassembled
// message is a valid assistant message.
func (e *sandboxEngine) relayStream(ctx context.Context, p *proc, x *exchange, r io.Reader) error {
	var asm assembler
	br := bufio.NewReaderSize(r, 64<<10)
	var ev []byte
	done := false
	for !done {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return &Failure{Kind: FailMalformed, Message: "the stream ended without data: [DONE]"}
			}
			return e.transportFailure(ctx, p, err)
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		if len(trimmed) > 0 {
			ev = append(ev, line...)
			data, ok := bytes.CutPrefix(trimmed, []byte("data: "))
			if !ok {
				if bytes.HasPrefix(trimmed, []byte(":")) { // a comment line
					continue
				}
				return &Failure{Kind: FailMalformed, Message: fmt.Sprintf("stream line %q is not a data line", clip(trimmed, 80))}
			}
			if string(data) == "[DONE]" {
				done = true
				continue
			}
			if f := streamError(data); f != nil {
				return f
			}
			if err := asm.add(data); err != nil {
				return &Failure{Kind: FailMalformed, Message: err.Error()}
			}
			continue
		}
		if len(ev) > 0 {
			x.relay(ev)
			ev = nil
		}
	}
	a, err := checkMessage(asm.message())
	if err != nil {
		return &Failure{Kind: FailMalformed, Message: "the streamed answer: " + err.Error()}
	}
	_ = a
	x.relay([]byte("data: [DONE]\n\n"))
	return nil
}

// streamError reads an error event of a stream (an object with an "error"
// member, as the SDK writes when a streaming route raises) as a failure.
func streamError(data []byte) *Failure {
	f := objectFields(data)
	if f == nil || f["error"] == nil || !json.Valid(data) {
		return nil
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	json.Unmarshal(f["error"], &e)
	kind := FailRaised
	if e.Code == "policy_malformed_output" {
		kind = FailMalformed
	}
	if e.Message == "" {
		e.Message = "the policy ended its stream with an error: " + clip(f["error"], 200)
	}
	return &Failure{Kind: kind, Message: e.Message}
}

// assembler rebuilds a message from stream chunks.
type assembler struct {
	role    string
	content *strings.Builder
	calls   []*callParts
}

type callParts struct {
	id, typ, name string
	args          strings.Builder
}

func (a *assembler) add(data []byte) error {
	var c struct {
		Choices *[]struct {
			Delta *struct {
				Role      *string `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					Index    *int   `json:"index"`
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("a stream chunk is not a JSON chunk object: %v", err)
	}
	if c.Choices == nil {
		return errors.New("a stream chunk has no choices array")
	}
	for _, ch := range *c.Choices {
		if ch.Delta == nil {
			return errors.New("a stream chunk's choice has no delta")
		}
		d := ch.Delta
		if d.Role != nil {
			a.role = *d.Role
		}
		if d.Content != nil {
			if a.content == nil {
				a.content = &strings.Builder{}
			}
			a.content.WriteString(*d.Content)
		}
		for _, tc := range d.ToolCalls {
			if tc.Index == nil || *tc.Index < 0 || *tc.Index > 128 {
				return errors.New("a streamed tool call needs an index 0 to 128")
			}
			for len(a.calls) <= *tc.Index {
				a.calls = append(a.calls, &callParts{})
			}
			p := a.calls[*tc.Index]
			if tc.ID != "" {
				p.id = tc.ID
			}
			if tc.Type != "" {
				p.typ = tc.Type
			}
			p.name += tc.Function.Name
			p.args.WriteString(tc.Function.Arguments)
		}
	}
	return nil
}

func (a *assembler) message() []byte {
	m := map[string]any{"role": a.role}
	if a.content != nil {
		m["content"] = a.content.String()
	}
	if len(a.calls) > 0 {
		var calls []any
		for _, c := range a.calls {
			calls = append(calls, map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.args.String()}})
		}
		m["tool_calls"] = calls
	}
	b, _ := json.Marshal(m)
	return b
}

// listenUnix listens on a Unix socket that the sandbox's user can connect to.
func listenUnix(p string) (net.Listener, error) {
	ln, err := net.Listen("unix", p)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(p, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
