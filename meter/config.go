package meter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"time"
)

// ConfigFormat is the value of Config.Format.
const ConfigFormat = "feval.meter.v1"

// Limits on configuration values, chosen so that every priced product fits in
// an int64 (see Cost).
const (
	MaxPriceMicroUSDPerMTok = 1_000_000_000 // $1,000 per million tokens
	MaxCapMicroUSD          = 1_000_000_000_000
	MaxModels               = 64
	MaxTokensLimit          = 1 << 24
	MaxRequestBytesLimit    = 64 << 20
)

// ErrConfig reports a meter configuration that cannot be used.
var ErrConfig = errors.New("invalid meter configuration")

// Config is the meter section of a signed task: everything that decides what a
// call may do and what it costs. All amounts are integers in the unit their name
// carries.
type Config struct {
	Format string  `json:"format"` // ConfigFormat
	Models []Model `json:"models"` // the allowlist, in the task's order
	// CapMicroUSD is the per-scenario spending cap (reference: 300000 = $0.30).
	CapMicroUSD int64 `json:"cap_micro_usd"`
	// DefaultMaxTokens is the output bound reserved (and forwarded as
	// max_tokens) for a request that names none.
	DefaultMaxTokens int64 `json:"default_max_tokens"`
	// MaxRequestBytes bounds a request body; larger ones are refused (413).
	MaxRequestBytes int64 `json:"max_request_bytes"`
	// MaxResponseBytes bounds an upstream response body.
	MaxResponseBytes int64       `json:"max_response_bytes"`
	Timeouts         Timeouts    `json:"timeouts"`
	Retry            RetryPolicy `json:"retry"`
	// Rate bounds how fast one scenario's calls go upstream.
	Rate Rate `json:"rate"`
}

// Rate bounds one scenario's upstream calls: at most MaxConcurrent at once,
// and at most Calls started in any WindowMillis. A call beyond either waits
// for its turn; it is never refused for it. So whatever a policy sends, the
// provider sees each scenario within these bounds, and a provider failure is
// the provider's (METER.md §5).
type Rate struct {
	MaxConcurrent int   `json:"max_concurrent"`
	Calls         int   `json:"calls"`
	WindowMillis  int64 `json:"window_millis"`
}

// Model is one allowlisted model: its name as clients use it, its frozen prices
// and where it is served.
type Model struct {
	Name string `json:"name"`
	// InputMicroUSDPerMTok and OutputMicroUSDPerMTok are the frozen prices in
	// micro-USD per million input and output tokens.
	InputMicroUSDPerMTok  int64 `json:"input_micro_usd_per_mtok"`
	OutputMicroUSDPerMTok int64 `json:"output_micro_usd_per_mtok"`
	// Upstream is the base URL of an OpenAI-compatible API serving the model
	// (the meter appends /chat/completions), e.g. https://api.example/v1.
	Upstream string `json:"upstream"`
	// UpstreamModel is the model name the upstream knows, if it differs.
	UpstreamModel string `json:"upstream_model,omitempty"`
}

// Timeouts bound one upstream attempt, in milliseconds.
type Timeouts struct {
	// ConnectMillis bounds dialing; HeaderMillis the wait for response headers;
	// IdleMillis the gap between two reads of a response body (a stalled body
	// fails, see DESIGN: ResponseHeaderTimeout does not bound body reads);
	// AttemptMillis one whole attempt, streamed body included.
	ConnectMillis int64 `json:"connect_millis"`
	HeaderMillis  int64 `json:"header_millis"`
	IdleMillis    int64 `json:"idle_millis"`
	AttemptMillis int64 `json:"attempt_millis"`
}

// RetryPolicy bounds retries of an upstream call that failed for a transient
// reason (402, 429, 5xx, connection reset, timeout).
type RetryPolicy struct {
	MaxAttempts          int   `json:"max_attempts"` // including the first
	InitialBackoffMillis int64 `json:"initial_backoff_millis"`
	MaxBackoffMillis     int64 `json:"max_backoff_millis"`
}

// DefaultTimeouts are the timeouts of the reference task.
var DefaultTimeouts = Timeouts{ConnectMillis: 5_000, HeaderMillis: 60_000, IdleMillis: 30_000, AttemptMillis: 300_000}

// DefaultRetry is the retry policy of the reference task.
var DefaultRetry = RetryPolicy{MaxAttempts: 4, InitialBackoffMillis: 500, MaxBackoffMillis: 8_000}

// DefaultRate is the rate bound of the reference task: 8 calls of a scenario
// upstream at once, 120 started per minute.
var DefaultRate = Rate{MaxConcurrent: 8, Calls: 120, WindowMillis: 60_000}

// Limits on Rate values.
const (
	MaxConcurrentLimit = 256
	MaxRateCalls       = 100_000
)

// ReferencePrices is the frozen price table of the reference task, in micro-USD
// per million input and output tokens, keyed by model name (the names of
// fixtures/scenarios/models.txt).
var ReferencePrices = map[string][2]int64{
	"qwen3-coder-480b-a35b-instruct":     {400_000, 1_600_000},
	"qwen3-235b-a22b-instruct-2507":      {150_000, 600_000},
	"deepseek-v3.1":                      {270_000, 1_100_000},
	"kimi-k2-instruct":                   {600_000, 2_500_000},
	"glm-4.5":                            {600_000, 2_200_000},
	"gpt-oss-120b":                       {100_000, 500_000},
	"llama-4-maverick-17b-128e-instruct": {170_000, 600_000},
	"mistral-large-2411":                 {2_000_000, 6_000_000},
}

// ReferenceConfig returns the reference task's meter configuration for the
// given allowlist, every model served by upstream (a base URL).
func ReferenceConfig(models []string, upstream string) Config {
	c := Config{Format: ConfigFormat, CapMicroUSD: 300_000, DefaultMaxTokens: 4096,
		MaxRequestBytes: 1 << 20, MaxResponseBytes: 4 << 20, Timeouts: DefaultTimeouts, Retry: DefaultRetry, Rate: DefaultRate}
	for _, m := range models {
		p, ok := ReferencePrices[m]
		if !ok {
			p = [2]int64{1_000_000, 3_000_000}
		}
		c.Models = append(c.Models, Model{Name: m, InputMicroUSDPerMTok: p[0], OutputMicroUSDPerMTok: p[1], Upstream: upstream})
	}
	return c
}

// ParseConfig reads a Config strictly (unknown fields and trailing data are
// errors) and validates it.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if dec.More() {
		return Config{}, fmt.Errorf("%w: trailing data after the configuration", ErrConfig)
	}
	return c, c.Validate()
}

// Validate checks every field's range; the error names the first bad field.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	if c.Format != ConfigFormat {
		return bad("format %q: want %q", c.Format, ConfigFormat)
	}
	if len(c.Models) == 0 || len(c.Models) > MaxModels {
		return bad("%d models: want 1 to %d", len(c.Models), MaxModels)
	}
	seen := map[string]bool{}
	for i, m := range c.Models {
		switch {
		case m.Name == "" || len(m.Name) > 128:
			return bad("models[%d]: a name of 1 to 128 bytes is required", i)
		case seen[m.Name]:
			return bad("models[%d]: %q is listed twice", i, m.Name)
		case m.InputMicroUSDPerMTok < 0 || m.InputMicroUSDPerMTok > MaxPriceMicroUSDPerMTok,
			m.OutputMicroUSDPerMTok < 0 || m.OutputMicroUSDPerMTok > MaxPriceMicroUSDPerMTok:
			return bad("models[%d] %s: prices must be 0 to %d micro-USD per million tokens", i, m.Name, MaxPriceMicroUSDPerMTok)
		}
		if m.Upstream != "" {
			u, err := url.Parse(m.Upstream)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return bad("models[%d] %s: upstream %q is not an http(s) base URL", i, m.Name, m.Upstream)
			}
		}
		seen[m.Name] = true
	}
	switch {
	case c.CapMicroUSD <= 0 || c.CapMicroUSD > MaxCapMicroUSD:
		return bad("cap_micro_usd %d: want 1 to %d", c.CapMicroUSD, int64(MaxCapMicroUSD))
	case c.DefaultMaxTokens <= 0 || c.DefaultMaxTokens > MaxTokensLimit:
		return bad("default_max_tokens %d: want 1 to %d", c.DefaultMaxTokens, MaxTokensLimit)
	case c.MaxRequestBytes <= 0 || c.MaxRequestBytes > MaxRequestBytesLimit:
		return bad("max_request_bytes %d: want 1 to %d", c.MaxRequestBytes, MaxRequestBytesLimit)
	case c.MaxResponseBytes <= 0 || c.MaxResponseBytes > MaxRequestBytesLimit:
		return bad("max_response_bytes %d: want 1 to %d", c.MaxResponseBytes, MaxRequestBytesLimit)
	case c.Retry.MaxAttempts < 1 || c.Retry.MaxAttempts > 10:
		return bad("retry.max_attempts %d: want 1 to 10", c.Retry.MaxAttempts)
	case c.Retry.InitialBackoffMillis < 0 || c.Retry.MaxBackoffMillis < c.Retry.InitialBackoffMillis || c.Retry.MaxBackoffMillis > 600_000:
		return bad("retry backoff %d..%d ms: want 0 <= initial <= max <= 600000", c.Retry.InitialBackoffMillis, c.Retry.MaxBackoffMillis)
	}
	switch r := c.Rate; {
	case r.MaxConcurrent < 1 || r.MaxConcurrent > MaxConcurrentLimit:
		return bad("rate.max_concurrent %d: want 1 to %d", r.MaxConcurrent, MaxConcurrentLimit)
	case r.Calls < 1 || r.Calls > MaxRateCalls:
		return bad("rate.calls %d: want 1 to %d", r.Calls, MaxRateCalls)
	case r.WindowMillis < 1 || r.WindowMillis > 3_600_000:
		return bad("rate.window_millis %d: want 1 to 3600000", r.WindowMillis)
	}
	t := c.Timeouts
	for _, f := range []struct {
		name string
		v    int64
	}{{"connect_millis", t.ConnectMillis}, {"header_millis", t.HeaderMillis}, {"idle_millis", t.IdleMillis}, {"attempt_millis", t.AttemptMillis}} {
		if f.v <= 0 || f.v > 3_600_000 {
			return bad("timeouts.%s %d: want 1 to 3600000", f.name, f.v)
		}
	}
	return nil
}

func millis(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// TaskConfigFile is the file of a task directory that holds its meter
// configuration.
const TaskConfigFile = "meter.json"

// maxConfigBytes bounds a configuration file.
const maxConfigBytes = 1 << 20

// LoadTaskConfig reads and validates the meter configuration of a task tree.
func LoadTaskConfig(fsys fs.FS) (Config, error) {
	f, err := fsys.Open(TaskConfigFile)
	if err != nil {
		return Config{}, fmt.Errorf("%w: the task has no %s: %v", ErrConfig, TaskConfigFile, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return Config{}, err
	}
	if len(b) > maxConfigBytes {
		return Config{}, fmt.Errorf("%w: %s exceeds %d bytes", ErrConfig, TaskConfigFile, maxConfigBytes)
	}
	return ParseConfig(b)
}
