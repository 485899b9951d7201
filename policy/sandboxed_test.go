package policy_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
)

func needSandbox(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox needs Linux")
	}
}

// TestPythonGateFixture: the gate's policy.py fixture runs in the sandbox:
// draft then refine, both calls metered on the scenario.
func TestPythonGateFixture(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, upstream.Options{}, meter.Options{})
	s := e.start(t, fixturePack(t, "../fixtures/scenarios/ok-policy-py"), policy.Options{})
	code, body := post(t, s, map[string]any{"messages": msgs("user", "fix the parser")})
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	json.Unmarshal(body, &resp)
	rec := s.Requests()[0]
	rs := receiptsOf(e, rec.Seqs)
	if got := modelsOf(rs); !reflect.DeepEqual(got, []string{"qwen3-235b-a22b-instruct-2507", "qwen3-coder-480b-a35b-instruct"}) {
		t.Fatalf("models %v (record %+v, failures %+v)", got, rec, s.Failures())
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" {
		t.Fatalf("answer %s", body)
	}
}

// serverPack writes a server-form pack whose server/main.py is src, served on
// descriptor 3 with the given handler body.
func serverPack(t *testing.T, handler string) *policy.Pack {
	t.Helper()
	src := `import http.server, json, os, socket, socketserver, sys, time

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def send(self, status, data, ctype="application/json", length=True):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if length:
            self.send_header("Content-Length", str(len(data)))
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
    def do_GET(self):
        self.send(200, b"{}")
` + handler + `

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    address_family = socket.AF_UNIX
    daemon_threads = True

s = Server("t", Handler, bind_and_activate=False)
s.socket.close()
s.socket = socket.socket(fileno=3)
s.serve_forever()
`
	return loadPack(t, writePack(t, map[string]string{"server.json": `{"command": ["python3", "server/main.py"]}`, "server/main.py": src}))
}

// TestServerMidStream: a stream that turns malformed after a valid chunk
// reaches the agent as that chunk and then one error event, with no [DONE],
// and is recorded as malformed output.
func TestServerMidStream(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, upstream.Options{}, meter.Options{})
	s := e.start(t, serverPack(t, `    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        chunk = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "partial"}}]}
        self.send(200, b"data: " + json.dumps(chunk).encode() + b"\n\nevent: nonsense\n\n", "text/event-stream", False)
`), policy.Options{})
	code, body := post(t, s, map[string]any{"messages": msgs("user", "x"), "stream": true})
	text := string(body)
	f := s.Failures()
	if code != 200 || !strings.Contains(text, `"partial"`) || !strings.Contains(text, `"policy_malformed_output"`) ||
		strings.Contains(text, "[DONE]") || len(f) != 1 || f[0].Kind != policy.FailMalformed {
		t.Fatalf("%d %s %+v", code, text, f)
	}
}

// TestServerStartDeadline: a server that never answers its health check
// makes Start fail within the start-up deadline.
func TestServerStartDeadline(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, upstream.Options{}, meter.Options{})
	pack := loadPack(t, writePack(t, map[string]string{"server.json": `{"command": ["python3", "server/main.py"]}`,
		"server/main.py": "import time\ntime.sleep(3600)\n"}))
	_, err := policy.Start(t.Context(), pack, policy.Options{Scenario: e.sc, Limits: policy.Limits{StartMillis: 500}})
	if !errors.Is(err, policy.ErrStart) || !strings.Contains(err.Error(), "within 500 ms") {
		t.Fatalf("%v", err)
	}
	pack = loadPack(t, writePack(t, map[string]string{"server.json": `{"command": ["python3", "server/main.py"]}`,
		"server/main.py": "raise SystemExit('no model today')\n"}))
	_, err = policy.Start(t.Context(), pack, policy.Options{Scenario: e.sc})
	if !errors.Is(err, policy.ErrStart) || !strings.Contains(err.Error(), "no model today") {
		t.Fatalf("%v", err)
	}
}

// TestServerCrashRestart: a server that dies on a request fails that
// request as crashed; the next request is served by a restarted process.
func TestServerCrashRestart(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, upstream.Options{}, meter.Options{})
	s := e.start(t, serverPack(t, `    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["messages"][-1]["content"] == "die":
            os._exit(9)
        self.send(200, json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "pid %d" % os.getpid()}}]}).encode())
`), policy.Options{})
	for i, want := range []int{200, 502, 200} {
		content := "hi"
		if i == 1 {
			content = "die"
		}
		if code, body := post(t, s, map[string]any{"messages": msgs("user", content)}); code != want {
			t.Fatalf("request %d: %d %s", i+1, code, body)
		}
	}
	f := s.Failures()
	if len(f) != 1 || f[0].Kind != policy.FailCrashed || f[0].Turn != 2 || !strings.Contains(f[0].Message, "exit") {
		t.Fatalf("failures %+v", f)
	}
}

// TestIdleCalls: a sandboxed policy's calls outside an agent request are
// refused by the outbound gate, and nothing is charged.
func TestIdleCalls(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, upstream.Options{}, meter.Options{})
	pack := loadPack(t, writePack(t, map[string]string{"policy.py": `
import threading, time, feval_policy

def spend():
    time.sleep(0.05)
    try:
        feval_policy.call("gpt-oss-120b", [{"role": "user", "content": "background"}])
        feval_policy.idle_result = "spent"
    except feval_policy.CallError as e:
        feval_policy.idle_result = e.code

threading.Thread(target=spend).start()

def route(request, call):
    time.sleep(0.3)
    return getattr(feval_policy, "idle_result", "none")
`}))
	s := e.start(t, pack, policy.Options{})
	time.Sleep(200 * time.Millisecond)
	_, body := post(t, s, map[string]any{"messages": msgs("user", "x")})
	if !strings.Contains(string(body), "policy_idle") || len(e.m.Recorder().Receipts()) != 0 {
		t.Fatalf("%s, receipts %+v", body, e.m.Recorder().Receipts())
	}
}

// TestAttribution: a sandboxed policy that names another scenario in its
// call's headers is still charged to its own.
func TestAttribution(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, upstream.Options{}, meter.Options{})
	pack := loadPack(t, writePack(t, map[string]string{"policy.py": `
import http.client, json, socket

class Meter(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect("/run/feval.sock")

def route(request, call):
    c = Meter("meter")
    body = {"model": "gpt-oss-120b", "messages": request["messages"]}
    c.request("POST", "/v1/chat/completions", json.dumps(body),
              {"Content-Type": "application/json", "Feval-Scenario": "someone-else"})
    r = c.getresponse()
    return json.loads(r.read())["choices"][0]["message"]
`}))
	s := e.start(t, pack, policy.Options{})
	if code, body := post(t, s, map[string]any{"messages": msgs("user", "x")}); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	rs := e.m.Recorder().Receipts()
	if len(rs) != 1 || rs[0].Scenario != e.sc.ID() {
		t.Fatalf("receipts %+v", rs)
	}
}

// TestPythonReturnForms: a generator route streams its pieces (or joins them
// for a plain request), a message dict keeps its tool calls, and the route
// name reported by route_name lands in the request record.
func TestPythonReturnForms(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, upstream.Options{}, meter.Options{})
	pack := loadPack(t, writePack(t, map[string]string{"policy.py": `
from feval_policy import route_name

def pieces():
    yield "hello "
    yield "world"

def broken():
    yield "half "
    raise RuntimeError("lost the thread")

def route(request, call):
    if "break" in request["messages"][-1]["content"]:
        return broken()
    if request.has_tools:
        route_name("tools")
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\": \"ls\"}"}}]}
    route_name("words")
    return pieces()
`}))
	s := e.start(t, pack, policy.Options{})
	_, plain := post(t, s, map[string]any{"messages": msgs("user", "x")})
	_, streamed := post(t, s, map[string]any{"messages": msgs("user", "x"), "stream": true})
	_, tools := post(t, s, map[string]any{"messages": msgs("user", "x"), "tools": shellTool, "stream": true})
	if answerText(plain) != "hello world" || answerText(streamed) != "hello world" ||
		!strings.Contains(string(streamed), `"content":"hello "`) {
		t.Fatalf("plain %s\nstreamed %s", plain, streamed)
	}
	if !strings.Contains(string(tools), `"tool_calls"`) || !strings.Contains(string(tools), `"finish_reason":"tool_calls"`) {
		t.Fatalf("tools %s", tools)
	}
	recs := s.Requests()
	if recs[0].Route != "words" || recs[2].Route != "tools" || len(s.Failures()) != 0 {
		t.Fatalf("records %+v", recs)
	}
	// A streaming route that raises midway: the piece already sent, then the
	// error event; recorded as raised.
	code, broken := post(t, s, map[string]any{"messages": msgs("user", "break"), "stream": true})
	f := s.Failures()
	if code != 200 || !strings.Contains(string(broken), `"half "`) || !strings.Contains(string(broken), "policy_raised") ||
		len(f) != 1 || f[0].Kind != policy.FailRaised || !strings.Contains(f[0].Message, "RuntimeError: lost the thread") {
		t.Fatalf("%d %s %+v", code, broken, f)
	}
}
