package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/feval/feval/meter"
	"github.com/feval/feval/sandbox"
)

// Limits bound what a policy may do per request. A zero field takes its
// default (DefaultLimits).
type Limits struct {
	// RequestMillis is the time a policy has to answer one agent request.
	RequestMillis int64 `json:"request_millis"`
	// StartMillis is the time a sandboxed policy has to start and pass its
	// health check (GET /v1/models answering 200).
	StartMillis int64 `json:"start_millis"`
	// CallsPerRequest bounds the model calls one request may make; one call
	// more is a call flood.
	CallsPerRequest int `json:"calls_per_request"`
	// MaxRestarts bounds how often a sandboxed policy that died or hung is
	// restarted; past it every later request fails as unavailable.
	MaxRestarts int `json:"max_restarts"`
	// MaxAnswerBytes bounds a sandboxed policy's answer to one request.
	MaxAnswerBytes int64 `json:"max_answer_bytes"`
}

// DefaultLimits returns the limits used for zero fields.
func DefaultLimits() Limits {
	return Limits{RequestMillis: 120_000, StartMillis: 10_000, CallsPerRequest: 32, MaxRestarts: 3, MaxAnswerBytes: 4 << 20}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.RequestMillis <= 0 {
		l.RequestMillis = d.RequestMillis
	}
	if l.StartMillis <= 0 {
		l.StartMillis = d.StartMillis
	}
	if l.CallsPerRequest <= 0 {
		l.CallsPerRequest = d.CallsPerRequest
	}
	if l.MaxRestarts < 0 {
		l.MaxRestarts = 0
	} else if l.MaxRestarts == 0 {
		l.MaxRestarts = d.MaxRestarts
	}
	if l.MaxAnswerBytes <= 0 {
		l.MaxAnswerBytes = d.MaxAnswerBytes
	}
	return l
}

// Options configure a sidecar.
type Options struct {
	// Scenario is the meter scenario every model call is charged to
	// (required).
	Scenario *meter.Scenario
	// AgentSocket, if set, is a host path at which Start listens (a Unix
	// socket of mode 0666, for an agent sandbox running as sandbox.UID) and
	// serves Handler until Close. Bind it into the agent's sandbox as
	// sandbox.Spec.Socket.
	AgentSocket string
	// WorkDir is a host directory for the sockets of a sandboxed policy; it
	// must be reachable by sandbox.UID. Empty: a fresh temporary directory,
	// removed by Close.
	WorkDir string
	// Limits bound the policy per request.
	Limits Limits
	// Sandbox bounds the policy's sandbox (policy.py and server forms) for
	// the whole session; zero fields take SandboxDefaults.
	Sandbox sandbox.Limits
	// Python is the interpreter of policy.py and of a server command naming
	// python3 (default /usr/bin/python3).
	Python string
	// Unsandboxed runs a sandboxed form without isolation, for development
	// only (sandbox.Spec.Unsandboxed).
	Unsandboxed bool
}

// SandboxDefaults are the sandbox limits of a policy process for fields
// Options.Sandbox leaves zero: one hour of wall time for the session, 64
// tasks, 512 MiB.
func SandboxDefaults() sandbox.Limits {
	return sandbox.Limits{WallMillis: 3_600_000, CPUMillis: 3_600_000, Processes: 64, MemoryBytes: 512 << 20}
}

// Failure kinds: what went wrong with the policy on one request.
const (
	FailRaised      = "raised"           // the policy raised (policy.py) or answered an error itself
	FailTimeout     = "timeout"          // no complete answer within Limits.RequestMillis
	FailFlood       = "call_flood"       // more than Limits.CallsPerRequest model calls
	FailMalformed   = "malformed_output" // the answer is not an OpenAI chat completion
	FailCrashed     = "crashed"          // the policy process died or closed the connection
	FailStart       = "start_failed"     // the policy did not start or pass its health check
	FailUnavailable = "unavailable"      // the policy was restarted MaxRestarts times already
)

// Failure is a recorded policy failure on one request.
type Failure struct {
	// Turn is the request's number in the session, from 1.
	Turn int `json:"turn"`
	// Kind is one of the Fail* constants.
	Kind string `json:"kind"`
	// Message says what happened, for a person.
	Message string `json:"message"`
}

func (f *Failure) Error() string {
	return fmt.Sprintf("policy %s on request %d: %s", f.Kind, f.Turn, f.Message)
}

// Request records how the sidecar answered one agent request.
type Request struct {
	// Turn is the request's number in the session, from 1.
	Turn int `json:"turn"`
	// Route is the route taken: a policy.json route name, or what a
	// sandboxed policy reported (empty if nothing).
	Route string `json:"route,omitempty"`
	// Seqs are the meter sequence numbers of the model calls made for the
	// request, in admission order.
	Seqs []int64 `json:"seqs"`
	// HTTPStatus is the status the agent received.
	HTTPStatus int `json:"http_status"`
	// Failure is the policy failure, if any.
	Failure *Failure `json:"failure,omitempty"`
}

// Sidecar serves one scenario's agent with a pack's policy. It is safe for
// concurrent use; requests are answered one at a time in arrival order.
type Sidecar struct {
	pack   *Pack
	opts   Options
	limits Limits
	sc     *meter.Scenario
	eng    engine

	serial   sync.Mutex // one agent request at a time
	turn     int
	recorded int // receipts of the scenario attributed to earlier requests

	gmu    sync.Mutex // the outbound gate's state
	active *inflight

	rmu      sync.Mutex
	requests []Request

	workDir    string
	ownWorkDir bool
	cancel     context.CancelFunc
	servers    sync.WaitGroup
	closeOnce  sync.Once
}

// inflight is the request being answered, as the outbound gate sees it.
type inflight struct {
	calls int
	flood bool
	route string
	wg    sync.WaitGroup
}

// ErrOptions is wrapped by errors about bad Options.
var ErrOptions = errors.New("invalid sidecar options")

// Start starts a sidecar for pack on opts.Scenario: for a sandboxed form it
// starts the policy process and waits for its health check. The sidecar
// runs until Close (or ctx ends).
func Start(ctx context.Context, pack *Pack, opts Options) (*Sidecar, error) {
	if pack == nil || opts.Scenario == nil {
		return nil, fmt.Errorf("%w: a pack and a meter scenario are required", ErrOptions)
	}
	if opts.Python == "" {
		opts.Python = "/usr/bin/python3"
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Sidecar{pack: pack, opts: opts, limits: opts.Limits.withDefaults(), sc: opts.Scenario, cancel: cancel}
	_, s.recorded = s.sc.Meter().Recorder().ScenarioReceipts(s.sc.ID(), 0)
	var err error
	if pack.Form != FormJSON {
		if s.workDir = opts.WorkDir; s.workDir == "" {
			if s.workDir, err = os.MkdirTemp("", "feval-policy-"); err == nil {
				s.ownWorkDir = true
				err = os.Chmod(s.workDir, 0o755)
			}
			if err != nil {
				cancel()
				return nil, fmt.Errorf("policy sidecar: work directory: %w", err)
			}
		}
	}
	switch pack.Form {
	case FormJSON:
		s.eng, err = newJSONEngine(s, pack.Policy)
	default:
		s.eng, err = newSandboxEngine(ctx, s)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	if opts.AgentSocket != "" {
		ln, err := meter.ListenUnix(opts.AgentSocket, 0o666)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("policy sidecar: agent socket: %w", err)
		}
		s.serve(ctx, ln, s.Handler())
	}
	return s, nil
}

func (s *Sidecar) serve(ctx context.Context, ln net.Listener, h http.Handler) {
	s.servers.Add(1)
	go func() {
		defer s.servers.Done()
		meter.Serve(ctx, ln, h)
	}()
}

// Pack returns the sidecar's pack.
func (s *Sidecar) Pack() *Pack { return s.pack }

// Requests returns the records of the requests answered so far, in order.
func (s *Sidecar) Requests() []Request {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Failures returns the policy failures recorded so far, in request order.
func (s *Sidecar) Failures() []Failure {
	var out []Failure
	for _, r := range s.Requests() {
		if r.Failure != nil {
			out = append(out, *r.Failure)
		}
	}
	return out
}

// Close stops the policy process, the sockets the sidecar serves and waits
// for them; it removes a work directory it created.
func (s *Sidecar) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		if s.eng != nil {
			s.eng.close()
		}
		s.servers.Wait()
		if s.ownWorkDir {
			os.RemoveAll(s.workDir)
		}
	})
	return nil
}

// Handler serves the agent's side: POST /v1/chat/completions and GET
// /v1/models (docs/POLICY.md §2).
func (s *Sidecar) Handler() http.Handler { return http.HandlerFunc(s.serveAgent) }

// engine answers one request in a policy form.
type engine interface {
	answer(ctx context.Context, x *exchange) error
	close()
}

func (s *Sidecar) socketPath(name string) string { return filepath.Join(s.workDir, name) }

// record appends a request record.
func (s *Sidecar) record(r Request) {
	s.rmu.Lock()
	s.requests = append(s.requests, r)
	s.rmu.Unlock()
}

// modelsList is the agent's GET /v1/models answer.
var modelsList, _ = json.Marshal(map[string]any{"object": "list",
	"data": []any{map[string]any{"id": AgentModel, "object": "model", "created": 0, "owned_by": "feval-policy"}}})

// AgentModel is the model name the sidecar lists to the agent; the agent may
// name any model, the policy decides.
const AgentModel = "feval-policy"

// ErrStart is wrapped by Start's error when a sandboxed policy does not start
// or fails its health check.
var ErrStart = errors.New("the policy did not start")
