package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
	"github.com/feval/feval/sandbox"
)

// agentProgram is an agent in its own sandbox: it lists the models and asks
// the sidecar for a plain and a streamed answer over the socket bound in,
// then tries the network, which must fail.
const agentProgram = `
import http.client, json, socket

class Sidecar(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("sidecar", timeout=60)
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect("/run/feval.sock")

def post(body):
    c = Sidecar()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.read()

c = Sidecar()
c.request("GET", "/v1/models")
print("models", json.loads(c.getresponse().read())["data"][0]["id"])
status, body = post({"model": "any", "messages": [{"role": "user", "content": "hello"}]})
print("plain", status, json.loads(body)["choices"][0]["message"]["role"])
status, body = post({"model": "any", "messages": [{"role": "user", "content": "hello"}], "stream": True})
print("stream", status, body.decode().strip().endswith("data: [DONE]"))
try:
    socket.create_connection(("127.0.0.1", 80), timeout=2)
    print("ESCAPED")
except OSError:
    print("network refused")
`

// TestAgentSocket: an agent in one sandbox reaches a policy.py in another
// only through the sidecar's agent socket; the policy's calls are charged to
// the sidecar's scenario.
func TestAgentSocket(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, upstream.Options{}, meter.Options{})
	dir, err := os.MkdirTemp("", "feval-agent-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	sock := filepath.Join(dir, "agent.sock")
	pack := fixturePack(t, filepath.Join(packsDir, "py-stream", "pack"))
	s := e.start(t, pack, policy.Options{AgentSocket: sock})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sandbox.Run(ctx, sandbox.Spec{Args: []string{"/usr/bin/python3", "-c", agentProgram},
		Env: []string{"PATH=/usr/bin:/bin"}, Socket: sock})
	if err != nil || res.Class != sandbox.ClassOK {
		t.Fatalf("agent: %v %s %s: %s", err, res.Class, res.Detail, res.Stderr)
	}
	out := string(res.Stdout)
	for _, want := range []string{"models feval-policy", "plain 200 assistant", "stream 200 True", "network refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("agent output lacks %q:\n%s", want, out)
		}
	}
	recs := s.Requests()
	if len(recs) != 2 || len(recs[0].Seqs) != 3 || recs[1].Route != "drafts" {
		t.Fatalf("records %+v", recs)
	}
	for _, rc := range e.m.Recorder().Receipts() {
		if rc.Scenario != e.sc.ID() || rc.Outcome != meter.OutcomeOK {
			t.Fatalf("receipt %+v", rc)
		}
	}
	s.Close()
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("the agent socket outlives Close")
	}
}
