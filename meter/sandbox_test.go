package meter_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/sandbox"
)

func TestMain(m *testing.M) {
	// The sandbox re-executes this test binary as its init.
	sandbox.InitIfChild()
	os.Exit(m.Run())
}

// agentScript calls the meter through the socket bound into the sandbox, then
// tries the upstream directly, which the sandbox's empty network must refuse.
const agentScript = `
import http.client, json, os, socket, sys

class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("meter")
        self.path = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)

c = UnixConnection("/run/feval.sock")
body = json.dumps({"model": "kimi-k2-instruct", "messages": [{"role": "user", "content": "from the sandbox"}]})
c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
r = c.getresponse()
answer = json.loads(r.read())
print("status", r.status, "id", answer["id"])
try:
    host, port = os.environ["UPSTREAM"].split("//")[1].split("/")[0].split(":")
    socket.create_connection((host, int(port)), timeout=2)
    print("ESCAPED: reached the upstream directly")
except OSError:
    print("upstream unreachable")
`

// TestSandboxReachesMeterOnlyThroughSocket: a program in the sandbox (no
// network) reaches the meter through the granted Unix socket, its call is
// metered and attributed to the socket's scenario, and the upstream itself is
// out of its reach.
func TestSandboxReachesMeterOnlyThroughSocket(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox needs Linux")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("needs /usr/bin/python3 (make debian-deps)")
	}
	_, up := startUpstream(t, upstream.Options{})
	m, err := meter.New(testConfig(t, up), meter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "meter.sock")
	ln, err := meter.ListenUnix(sock, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	go meter.Serve(t.Context(), ln, mustScenario(t, m, "scenario-07").Handler())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := sandbox.Run(ctx, sandbox.Spec{
		Args:   []string{"/usr/bin/python3", "-c", agentScript},
		Env:    []string{"PATH=/usr/bin:/bin", "UPSTREAM=" + up},
		Socket: sock,
	})
	if err != nil {
		t.Fatalf("sandbox: %v (class %s, %s, stderr %s)", err, res.Class, res.Detail, res.Stderr)
	}
	out := string(res.Stdout)
	if res.Class != sandbox.ClassOK || strings.Contains(out, "ESCAPED") || !strings.Contains(out, "upstream unreachable") {
		t.Fatalf("class %s, stdout %q, stderr %q", res.Class, out, res.Stderr)
	}
	rs := m.Recorder().Receipts()
	if len(rs) != 1 || rs[0].Scenario != "scenario-07" || rs[0].Outcome != meter.OutcomeOK ||
		!strings.Contains(out, "status 200 id "+rs[0].ResponseID) {
		t.Fatalf("receipts %+v, stdout %q", rs, out)
	}
}
