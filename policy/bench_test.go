package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
)

// benchEnv is a meter whose fixture upstream is served in process (no
// socket), so that what is measured is the meter and the sidecar.
func benchEnv(b *testing.B) *env {
	b.Helper()
	c := meter.ReferenceConfig(models(b), "http://fixture.invalid/v1")
	c.CapMicroUSD = 1_000_000_000_000 // benchmarks make many calls in one scenario
	m, err := meter.New(c, meter.Options{Transport: meter.Transport(upstream.New(upstream.Options{}))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	sc, err := m.Scenario("bench")
	if err != nil {
		b.Fatal(err)
	}
	return &env{m: m, sc: sc}
}

// benchRequest is an agent request of 12 messages with tools.
func benchRequest() []byte {
	ms := []map[string]any{{"role": "system", "content": "You are a coding agent working in a repository."}}
	for i := 0; i < 5; i++ {
		ms = append(ms, map[string]any{"role": "user", "content": "Run the tests and fix what fails in parser.py, then report."},
			map[string]any{"role": "assistant", "content": "I ran the tests; two fail in tests/test_parser.py."})
	}
	ms = append(ms, map[string]any{"role": "user", "content": "Now fix the failing test."})
	b, _ := json.Marshal(map[string]any{"model": "feval-policy", "messages": ms, "tools": shellTool})
	return b
}

// singleModel is the one call every benchmarked policy makes.
const singleModel = "deepseek-v3.1"

func benchPost(b *testing.B, h http.Handler, body []byte) {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 {
		b.Fatalf("%d %s", w.Code, w.Body.Bytes())
	}
}

// BenchmarkMeterDirect is the baseline: the model call of a request made
// straight to the meter (fixture upstream in process).
func BenchmarkMeterDirect(b *testing.B) {
	e := benchEnv(b)
	var f map[string]json.RawMessage
	json.Unmarshal(benchRequest(), &f)
	f["model"], _ = json.Marshal(singleModel)
	body, _ := json.Marshal(f)
	h := e.sc.Handler()
	b.ResetTimer()
	defer policy.CPUTimerForTest(b)()
	for i := 0; i < b.N; i++ {
		benchPost(b, h, body)
	}
}

// BenchmarkSidecarJSON is the same request answered by a policy.json whose
// default route is that model, behind four routes that do not match: the
// difference to BenchmarkMeterDirect is what a policy.json decision adds.
func BenchmarkSidecarJSON(b *testing.B) {
	e := benchEnv(b)
	pol := `{"schema": "feval.policy.v1", "session": {"keep_messages": 64, "keep_task": true}, "routes": [
	  {"name": "errors", "match": {"pattern": "error", "has_tools": true}, "mode": "single", "steps": [{"model": "kimi-k2-instruct"}]},
	  {"name": "late", "match": {"min_messages": 5000}, "mode": "single", "steps": [{"model": "glm-4.5"}]},
	  {"name": "tools", "match": {"last_role": "tool"}, "mode": "single", "steps": [{"model": "glm-4.5"}]},
	  {"name": "plain", "match": {"has_tools": false}, "mode": "single", "steps": [{"model": "glm-4.5"}]},
	  {"name": "default", "mode": "single", "steps": [{"model": "` + singleModel + `", "rewrite": {"system_prefix": "Be brief."}}]}]}`
	s := e.start(b, loadPack(b, writePack(b, map[string]string{"policy.json": pol})), policy.Options{})
	body := benchRequest()
	b.ResetTimer()
	defer policy.CPUTimerForTest(b)()
	for i := 0; i < b.N; i++ {
		benchPost(b, s.Handler(), body)
	}
}

const benchPolicyPy = `
from feval_policy import route_name

def route(request, call):
    route_name("default")
    return call("` + singleModel + `", request["messages"], tools=request.get("tools"))
`

// BenchmarkSidecarPython is the same request answered by a policy.py in the
// sandbox: the difference to BenchmarkSidecarJSON is what the Python form
// adds per request.
func BenchmarkSidecarPython(b *testing.B) {
	e := benchEnv(b)
	s := e.start(b, loadPack(b, writePack(b, map[string]string{"policy.py": benchPolicyPy})), policy.Options{})
	body := benchRequest()
	b.ResetTimer()
	defer policy.CPUTimerForTest(b)()
	for i := 0; i < b.N; i++ {
		benchPost(b, s.Handler(), body)
	}
}

// BenchmarkPythonStart is the start of a policy.py sidecar: the sandbox, the
// interpreter, the SDK and the health check, and its stop.
func BenchmarkPythonStart(b *testing.B) {
	e := benchEnv(b)
	pack := loadPack(b, writePack(b, map[string]string{"policy.py": benchPolicyPy}))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := policy.Start(context.Background(), pack, policy.Options{Scenario: e.sc})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}
