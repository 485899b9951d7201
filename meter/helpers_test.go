package meter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
)

// models are the reference allowlist.
func models(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "fixtures", "scenarios", "models.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		out = append(out, string(bytes.TrimSpace(l)))
	}
	return out
}

// startUpstream starts a fixture upstream on loopback.
func startUpstream(t testing.TB, opts upstream.Options) (*upstream.Server, string) {
	t.Helper()
	s := upstream.New(opts)
	url, stop, err := upstream.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s, url
}

// testConfig is the reference configuration with fast retries.
func testConfig(t testing.TB, upstreamURL string) meter.Config {
	c := meter.ReferenceConfig(models(t), upstreamURL)
	c.Retry = meter.RetryPolicy{MaxAttempts: 3, InitialBackoffMillis: 1, MaxBackoffMillis: 5}
	c.Timeouts.IdleMillis = 300
	c.Timeouts.AttemptMillis = 5_000
	return c
}

// startMeter serves m on a loopback port through the production listener and
// returns the base URL (http://127.0.0.1:PORT/v1).
func startMeter(t testing.TB, m *meter.Meter, h http.Handler) string {
	t.Helper()
	ln, err := meter.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { meter.Serve(ctx, ln, h); close(done) }()
	t.Cleanup(func() { cancel(); <-done; m.Close() })
	return "http://" + ln.Addr().String() + "/v1"
}

func newMeter(t testing.TB, cfg meter.Config, opts meter.Options) (*meter.Meter, string) {
	t.Helper()
	m, err := meter.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, startMeter(t, m, m.Handler())
}

// post sends a chat completion request attributed to scenario.
func post(t testing.TB, base, scenario, contentType string, body []byte) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if scenario != "" {
		req.Header.Set(meter.ScenarioHeader, scenario)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

func chat(model, content string, extra map[string]any) []byte {
	req := map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": content}}}
	for k, v := range extra {
		req[k] = v
	}
	b, _ := json.Marshal(req)
	return b
}

// apiError decodes an OpenAI error body, failing the test if it has another shape.
func apiError(t testing.TB, b []byte) meter.APIErrorBody {
	t.Helper()
	var e meter.APIError
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error.Type == "" || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("not an OpenAI-shaped error (%v): %s", err, b)
	}
	return e.Error
}

// unixClient is an HTTP client that dials the Unix socket at path.
func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
}
