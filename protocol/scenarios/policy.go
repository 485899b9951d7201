package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/feval/feval/sandbox"
	"io"
	"io/fs"
	"net/http"
	"os"

	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
)

// Policy runs one pack's fusion policy for one evaluation.
type Policy interface {
	// Scenario returns the handler that the harness of one scenario reaches
	// on its socket (the OpenAI chat API subset). ms is the meter's account of
	// that scenario: the policy's only way to models. release is called when
	// the scenario's harness has ended.
	Scenario(ctx context.Context, ms *meter.Scenario) (h http.Handler, release func(), err error)
	// Close stops whatever the policy runs (a sandboxed policy.py or server).
	Close() error
}

// PolicyStarter starts the policy of a pack (its unpacked tree) for an
// evaluation whose allowlist is models.
type PolicyStarter func(ctx context.Context, pack fs.FS, models []string) (Policy, error)

// ErrPolicyForm reports a pack whose form the configured PolicyStarter cannot run.
var ErrPolicyForm = errors.New("the pack's policy form cannot run here")

// SidecarPolicy is the default PolicyStarter: the policy sidecar of package
// policy (docs/POLICY.md), one per scenario, for all three pack forms. The
// pack is written to a directory the sandbox user can read and gated again
// against the task's allowlist.
func SidecarPolicy(ctx context.Context, pack fs.FS, models []string) (Policy, error) {
	dir, err := sandbox.Materialize(pack)
	if err != nil {
		return nil, err
	}
	p, err := policy.LoadPack(dir, models)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%w: %v", ErrPolicyForm, err)
	}
	return &sidecars{pack: p, dir: dir}, nil
}

type sidecars struct {
	pack *policy.Pack
	dir  string
}

func (s *sidecars) Close() error { return os.RemoveAll(s.dir) }

func (s *sidecars) Scenario(ctx context.Context, ms *meter.Scenario) (http.Handler, func(), error) {
	sc, err := policy.Start(ctx, s.pack, policy.Options{Scenario: ms})
	if err != nil {
		return nil, nil, err
	}
	return sc.Handler(), func() { sc.Close() }, nil
}

// SingleModelPolicy is a PolicyStarter for tests and comparisons: it reads a
// policy.json pack and sends every request, unchanged but for its "model", to
// the first step of the route named "default" (or the last route), straight
// to the meter. It runs no miner code. Other pack forms are refused with
// ErrPolicyForm.
func SingleModelPolicy(_ context.Context, pack fs.FS, models []string) (Policy, error) {
	b, err := fs.ReadFile(pack, "policy.json")
	if err != nil {
		return nil, fmt.Errorf("%w: only policy.json packs are routed by the single-model policy", ErrPolicyForm)
	}
	var p struct {
		Routes []struct {
			Name  string `json:"name"`
			Steps []struct {
				Model string `json:"model"`
			} `json:"steps"`
		} `json:"routes"`
	}
	if err := json.Unmarshal(b, &p); err != nil || len(p.Routes) == 0 {
		return nil, fmt.Errorf("%w: policy.json has no routes", ErrPolicyForm)
	}
	r := p.Routes[len(p.Routes)-1]
	for _, x := range p.Routes {
		if x.Name == "default" {
			r = x
		}
	}
	if len(r.Steps) == 0 || r.Steps[0].Model == "" {
		return nil, fmt.Errorf("%w: the default route has no model", ErrPolicyForm)
	}
	return singleModel(r.Steps[0].Model), nil
}

type singleModel string

func (m singleModel) Close() error { return nil }

func (m singleModel) Scenario(_ context.Context, ms *meter.Scenario) (http.Handler, func(), error) {
	route := ms.Handler()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			route.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, "reading the request", http.StatusBadRequest)
			return
		}
		var req map[string]json.RawMessage
		if json.Unmarshal(body, &req) == nil && req != nil {
			req["model"], _ = json.Marshal(string(m))
			body, _ = json.Marshal(req)
		}
		out, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, r.URL.String(), bytes.NewReader(body))
		out.Header.Set("Content-Type", "application/json")
		route.ServeHTTP(w, out)
	})
	return h, func() {}, nil
}
