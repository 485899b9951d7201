package meter_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/meter"
)

func TestCanonicalRequestVectors(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"b":1,"a":[true,false,null]}`, `{"a":[true,false,null],"b":1}`},
		{`{ "t" : 0.70 }`, `{"t":0.7}`},
		{`{"t":7e-1}`, `{"t":0.7}`},
		{`{"t":70E-2}`, `{"t":0.7}`},
		{`{"t":-0}`, `{"t":0}`},
		{`{"t":-0.0e5}`, `{"t":0}`},
		{`{"t":100}`, `{"t":100}`},
		{`{"t":1e2}`, `{"t":100}`},
		{`{"t":1.5e1}`, `{"t":15}`},
		{`{"t":0.000001}`, `{"t":0.000001}`},
		{`{"t":1e-30}`, `{"t":1e-30}`},
		{`{"t":1.25e40}`, `{"t":1.25e40}`},
		{`{"t":123456789012345678901234567890}`, `{"t":1.2345678901234567890123456789e29}`},
		{`{"s":"\u00e9\n\"\u0001<&>"}`, "{\"s\":\"é\\n\\\"\\u0001<&>\"}"},
	}
	for _, c := range cases {
		got, err := meter.CanonicalRequest([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %s (%v), want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`{"a":1,"a":2}`, `{"a":1} x`, `{"a":1e999999}`, "{\"a\":\"\xff\"}", strings.Repeat("[", 70) + strings.Repeat("]", 70), `{"a":01}`, ``} {
		if _, err := meter.CanonicalRequest([]byte(bad)); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

func TestCostVectors(t *testing.T) {
	cases := []struct{ in, out, pin, pout, want int64 }{
		{0, 0, 400_000, 1_600_000, 0},
		{1, 0, 400_000, 1_600_000, 1},         // 0.4 rounds up
		{1000, 500, 400_000, 1_600_000, 1200}, // 400 + 800
		{1234, 567, 150_000, 600_000, 526},    // 185.1 + 340.2 = 525.3 -> 526
		{1_000_000, 1_000_000, 2_000_000, 6_000_000, 8_000_000},
		{1 << 62, 1 << 62, 1_000_000_000, 1_000_000_000, 1<<63 - 1}, // saturates
		{-5, 10, 1_000_000, 1_000_000, 10},
	}
	for _, c := range cases {
		if got := meter.Cost(c.in, c.out, c.pin, c.pout); got != c.want {
			t.Errorf("Cost(%d, %d, %d, %d) = %d, want %d", c.in, c.out, c.pin, c.pout, got, c.want)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	good := meter.ReferenceConfig([]string{"a", "b"}, "http://127.0.0.1:1/v1")
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(good)
	if _, err := meter.ParseConfig(b); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(c *meter.Config){
		"format":        func(c *meter.Config) { c.Format = "v0" },
		"no models":     func(c *meter.Config) { c.Models = nil },
		"duplicate":     func(c *meter.Config) { c.Models[1].Name = "a" },
		"price":         func(c *meter.Config) { c.Models[0].InputMicroUSDPerMTok = -1 },
		"upstream":      func(c *meter.Config) { c.Models[0].Upstream = "ftp://x" },
		"cap":           func(c *meter.Config) { c.CapMicroUSD = 0 },
		"retry":         func(c *meter.Config) { c.Retry.MaxAttempts = 0 },
		"backoff order": func(c *meter.Config) { c.Retry.MaxBackoffMillis = 1 },
		"timeout":       func(c *meter.Config) { c.Timeouts.IdleMillis = 0 },
		"default max":   func(c *meter.Config) { c.DefaultMaxTokens = 0 },
	} {
		c := meter.ReferenceConfig([]string{"a", "b"}, "http://127.0.0.1:1/v1")
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, meter.ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := meter.ParseConfig(append(b[:len(b)-1:len(b)-1], []byte(`,"Cap":1}`)...)); !errors.Is(err, meter.ErrConfig) {
		t.Errorf("unknown field accepted: %v", err)
	}
}

// fuzzMeter is a meter whose upstream is unreachable: the fuzzer exercises the
// request path up to forwarding, and forwarding fails fast.
func fuzzMeter(t testing.TB) http.Handler {
	cfg := meter.ReferenceConfig(models(t), "http://127.0.0.1:1/v1")
	cfg.Retry = meter.RetryPolicy{MaxAttempts: 1}
	cfg.Timeouts.ConnectMillis = 50
	cfg.MaxRequestBytes = 64 << 10
	m, err := meter.New(cfg, meter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m.Handler()
}

func addSeeds(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "requests", "*.json"))
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no fuzz seeds in testdata/requests (%v)", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzCanonicalRequest: canonicalisation never panics, is idempotent, and keeps
// the JSON value.
func FuzzCanonicalRequest(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := meter.CanonicalRequest(b)
		if err != nil {
			return
		}
		c2, err := meter.CanonicalRequest(c)
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("not idempotent: %s -> %s (%v)", c, c2, err)
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form is not JSON: %s", c)
		}
	})
}

// FuzzChatRequest: any body gets an answer with an OpenAI-shaped error or a
// forward attempt, never a panic, and exactly one receipt.
func FuzzChatRequest(f *testing.F) {
	addSeeds(f)
	h := fuzzMeter(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code == http.StatusOK {
			return
		}
		var e meter.APIError
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" {
			t.Fatalf("status %d with a body that is not an OpenAI error: %s", w.Code, w.Body.Bytes())
		}
	})
}
