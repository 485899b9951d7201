package model

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sync"
)

// ProcessGenerator is a Generator run by another process: an external
// runtime (torch on a GPU for a large model) speaking JSON lines on its
// standard input and output (docs/PROTOCOL.md, "External runtimes"). feval
// writes one ProcessRequest per line and reads one ProcessResponse per line,
// in order; requests are sent one at a time. Whatever it answers is checked
// as any row is: the audit's check decides whether the completions are the
// seeded choices of the committed model.
type ProcessGenerator struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
}

// ProcessRequest is one line feed-terminated request to an external runtime.
type ProcessRequest struct {
	Prompt   []int    `json:"prompt"`
	Round    string   `json:"round"`
	TaskID   string   `json:"task_id"`
	Miner    string   `json:"miner"`
	Sampling Sampling `json:"sampling"`
}

// ProcessResponse is its answer: the completion, or why there is none.
type ProcessResponse struct {
	Completion []int  `json:"completion"`
	Error      string `json:"error,omitempty"`
}

// maxResponseBytes bounds one answer line.
const maxResponseBytes = 8 << 20

// maxTokenID bounds a token id an external runtime may answer.
const maxTokenID = 1<<31 - 1

// ErrRuntime reports an external runtime that failed or broke the protocol.
var ErrRuntime = errors.New("external runtime failed")

// StartProcess starts the external runtime argv[0] with arguments argv[1:];
// its standard error is stderr.
func StartProcess(argv []string, stderr io.Writer) (*ProcessGenerator, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("%w: no command", ErrRuntime)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRuntime, err)
	}
	return &ProcessGenerator{cmd: cmd, stdin: in, stdout: bufio.NewReaderSize(out, 64<<10)}, nil
}

// Generate sends one request and reads its answer. The completion must hold
// 1 to s.MaxNewTokens ids; whether they are the seeded choices is for the
// check to say.
func (p *ProcessGenerator) Generate(prompt []int, in SeedInput, s Sampling) ([]int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	req, err := json.Marshal(ProcessRequest{Prompt: prompt, Round: in.Round, TaskID: in.TaskID, Miner: in.Miner, Sampling: s})
	if err != nil {
		return nil, err
	}
	if _, err := p.stdin.Write(append(req, '\n')); err != nil {
		return nil, fmt.Errorf("%w: writing a request: %w", ErrRuntime, err)
	}
	var line []byte
	for {
		chunk, isPrefix, err := p.stdout.ReadLine()
		if err != nil {
			return nil, fmt.Errorf("%w: reading an answer: %w", ErrRuntime, err)
		}
		line = append(line, chunk...)
		if len(line) > maxResponseBytes {
			return nil, fmt.Errorf("%w: an answer longer than %d bytes", ErrRuntime, maxResponseBytes)
		}
		if !isPrefix {
			break
		}
	}
	var r ProcessResponse
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("%w: an answer that is not JSON: %v", ErrRuntime, err)
	}
	if r.Error != "" {
		return nil, fmt.Errorf("%w: %s", ErrRuntime, r.Error)
	}
	if len(r.Completion) == 0 || len(r.Completion) > s.MaxNewTokens {
		return nil, fmt.Errorf("%w: a completion of %d tokens (1 to %d)", ErrRuntime, len(r.Completion), s.MaxNewTokens)
	}
	for i, id := range r.Completion {
		if id < 0 || id > maxTokenID {
			return nil, fmt.Errorf("%w: completion token %d is %d, not a token id", ErrRuntime, i, id)
		}
	}
	return r.Completion, nil
}

// Args is the runtime's command line.
func (p *ProcessGenerator) Args() []string { return slices.Clone(p.cmd.Args) }

// Close ends the runtime: its standard input is closed and the process
// waited for.
func (p *ProcessGenerator) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stdin.Close()
	return p.cmd.Wait()
}
