package meter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v5"
)

// Failure names recorded in Exchange.Failure.
const (
	FailureConnection = "connection" // dial failed, connection reset or closed
	FailureTimeout    = "timeout"    // an attempt, header or idle timeout fired
	FailureStatus     = "status"     // a non-200 HTTP status (Exchange.Status)
	FailureStreamCut  = "stream_cut" // a stream ended without its [DONE] event
	FailureTooLarge   = "too_large"  // the response passed max_response_bytes
	FailureBadAnswer  = "bad_answer" // a 200 answer without a readable usage
)

// retryableStatus reports the HTTP statuses the retry policy covers.
func retryableStatus(code int) bool {
	return code == http.StatusPaymentRequired || code == http.StatusRequestTimeout ||
		code == http.StatusTooManyRequests || code >= 500
}

// infraStatus reports statuses that are the infrastructure's fault: the
// retryable ones, and 401/403 (the validator's credentials).
func infraStatus(code int) bool {
	return retryableStatus(code) || code == http.StatusUnauthorized || code == http.StatusForbidden
}

func newTransport(t Timeouts) *http.Transport {
	d := &net.Dialer{Timeout: millis(t.ConnectMillis), KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 nil, // the upstream is named by the task; no proxy from the environment
		DialContext:           d.DialContext,
		ResponseHeaderTimeout: millis(t.HeaderMillis),
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
}

// sink receives a streamed answer's events as they arrive.
type sink func(event string)

// attemptErr carries one failed attempt's exchange through the retry loop.
type attemptErr struct{ ex *Exchange }

func (e *attemptErr) Error() string {
	if e.ex.Failure == FailureStatus {
		return fmt.Sprintf("HTTP %d", e.ex.Status)
	}
	return e.ex.Failure
}

// forward sends body to the model's upstream with the retry policy and returns
// the final attempt's exchange. A streamed answer's events go to emit as they
// arrive; once one has, no further attempt is made.
func (m *Meter) forward(ctx context.Context, mi *modelInfo, body []byte, stream bool, emit sink) *Exchange {
	p := m.cfg.Retry
	eb := &backoff.ExponentialBackOff{InitialInterval: millis(p.InitialBackoffMillis), RandomizationFactor: 0.2,
		Multiplier: 2, MaxInterval: millis(p.MaxBackoffMillis)}
	if p.InitialBackoffMillis == 0 {
		eb.InitialInterval, eb.MaxInterval = 0, 0
	}
	attempts := 0
	emitted := false
	op := func() (*Exchange, error) {
		attempts++
		ex := m.attempt(ctx, mi, body, stream, func(ev string) { emitted = true; emit(ev) })
		ex.Attempts = attempts
		switch {
		case ex.Failure == "":
			return ex, nil
		case emitted, ex.Failure == FailureTooLarge,
			ex.Failure == FailureStatus && !retryableStatus(ex.Status):
			return ex, backoff.Permanent(&attemptErr{ex})
		}
		return ex, &attemptErr{ex}
	}
	ex, err := backoff.Retry(ctx, op, backoff.WithBackOff(eb), backoff.WithMaxTries(uint(p.MaxAttempts)), backoff.WithMaxElapsedTime(0))
	if ex == nil { // the context ended before the first attempt
		ex = &Exchange{Attempts: attempts, Failure: FailureTimeout}
	}
	if err != nil && ex.Failure == "" {
		ex.Failure = FailureTimeout
	}
	return ex
}

// attempt makes one upstream request.
func (m *Meter) attempt(ctx context.Context, mi *modelInfo, body []byte, stream bool, emit sink) *Exchange {
	ctx, cancel := context.WithTimeout(ctx, millis(m.cfg.Timeouts.AttemptMillis))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, mi.url, bytes.NewReader(body))
	if err != nil {
		return &Exchange{Failure: FailureConnection}
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	if m.opts.Credentials != nil {
		if tok := m.opts.Credentials(mi.Name); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return &Exchange{Failure: netFailure(ctx, err)}
	}
	defer resp.Body.Close()
	idle := time.AfterFunc(millis(m.cfg.Timeouts.IdleMillis), cancel)
	defer idle.Stop()
	r := &idleReader{r: resp.Body, t: idle, d: millis(m.cfg.Timeouts.IdleMillis)}
	limit := m.cfg.MaxResponseBytes
	ex := &Exchange{Status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK || !stream {
		b, err := io.ReadAll(io.LimitReader(r, limit+1))
		setBody(ex, b)
		switch {
		case int64(len(b)) > limit:
			ex.Body, ex.BodyBase64 = "", ""
			ex.Failure = FailureTooLarge
		case err != nil:
			ex.Failure = netFailure(ctx, err)
		case resp.StatusCode != http.StatusOK:
			ex.Failure = FailureStatus
		}
		return ex
	}
	br := bufio.NewReaderSize(r, 16<<10)
	var total int64
	for {
		ev, err := readEvent(br, limit-total)
		if ev != "" {
			total += int64(len(ev))
			ex.Chunks = append(ex.Chunks, ev)
			emit(ev)
			if isDone(ev) {
				return ex
			}
		}
		switch {
		case errors.Is(err, errEventTooLarge):
			ex.Failure = FailureTooLarge
			return ex
		case err == io.EOF:
			ex.Failure = FailureStreamCut
			return ex
		case err != nil:
			if f := netFailure(ctx, err); f == FailureTimeout {
				ex.Failure = f
			} else {
				ex.Failure = FailureStreamCut
			}
			return ex
		}
	}
}

func setBody(ex *Exchange, b []byte) {
	if utf8.Valid(b) {
		ex.Body = string(b)
	} else {
		ex.BodyBase64 = base64.StdEncoding.EncodeToString(b)
	}
}

// bodyBytes returns an exchange's non-streamed body.
func (ex *Exchange) bodyBytes() []byte {
	if ex.BodyBase64 != "" {
		b, _ := base64.StdEncoding.DecodeString(ex.BodyBase64)
		return b
	}
	return []byte(ex.Body)
}

func netFailure(ctx context.Context, err error) string {
	var ne net.Error
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return FailureTimeout
	}
	return FailureConnection
}

// idleReader resets an idle timer on every read; when the timer fires it
// cancels the attempt, which ends a stalled body read.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if n > 0 {
		i.t.Reset(i.d)
	}
	return n, err
}

var errEventTooLarge = errors.New("event too large")

// readEvent reads one server-sent event: lines up to and including the blank
// line that ends it. Blank lines before an event are skipped.
func readEvent(br *bufio.Reader, limit int64) (string, error) {
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		if int64(b.Len()+len(line)) > limit {
			return "", errEventTooLarge
		}
		if err != nil {
			return "", err // a partial event is not an event
		}
		if line == "\n" || line == "\r\n" {
			if b.Len() == 0 {
				continue
			}
			b.WriteString(line)
			return b.String(), nil
		}
		b.WriteString(line)
	}
}

// eventData returns the data of an event's data lines, joined by newlines.
func eventData(ev string) string {
	var parts []string
	for _, line := range strings.Split(strings.TrimRight(ev, "\r\n"), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			parts = append(parts, strings.TrimPrefix(d, " "))
		}
	}
	return strings.Join(parts, "\n")
}

func isDone(ev string) bool { return eventData(ev) == "[DONE]" }

// answer is what the meter reads of an upstream answer.
type answer struct {
	ID    string
	Usage *usage
}

type usage struct {
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
}

type answerJSON struct {
	ID      string          `json:"id"`
	Usage   *usage          `json:"usage"`
	Choices json.RawMessage `json:"choices"`
}

// readAnswer extracts the response id and usage from a non-streamed body.
func readAnswer(b []byte) answer {
	var a answerJSON
	if json.Unmarshal(b, &a) != nil {
		return answer{}
	}
	return answer{ID: a.ID, Usage: a.Usage}
}

// readStreamAnswer extracts the id (of the first chunk that has one) and the
// last usage of a streamed answer.
func readStreamAnswer(chunks []string) answer {
	var out answer
	for _, ev := range chunks {
		d := eventData(ev)
		if d == "" || d == "[DONE]" {
			continue
		}
		var a answerJSON
		if json.Unmarshal([]byte(d), &a) != nil {
			continue
		}
		if out.ID == "" {
			out.ID = a.ID
		}
		if a.Usage != nil {
			out.Usage = a.Usage
		}
	}
	return out
}

// usageOnly reports a chunk that carries only usage (no choices): the one the
// meter asked for on the client's behalf and drops if the client did not.
func usageOnly(ev string) bool {
	d := eventData(ev)
	if d == "" || d == "[DONE]" || !strings.Contains(d, `"usage"`) {
		return false
	}
	var a answerJSON
	if json.Unmarshal([]byte(d), &a) != nil || a.Usage == nil {
		return false
	}
	c := bytes.TrimSpace(a.Choices)
	return len(c) == 0 || string(c) == "[]" || string(c) == "null"
}

func (u *usage) valid() bool {
	return u != nil && u.PromptTokens != nil && u.CompletionTokens != nil &&
		*u.PromptTokens >= 0 && *u.CompletionTokens >= 0
}

// assemble joins a streamed answer's deltas (choice 0) into one message.
func assemble(chunks []string) *Assembled {
	a := &Assembled{}
	var b strings.Builder
	for _, ev := range chunks {
		d := eventData(ev)
		if d == "" || d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(d), &c) != nil {
			continue
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				continue
			}
			if ch.Delta.Content != nil {
				b.WriteString(*ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				i := len(a.ToolCalls) - 1
				if i < 0 || a.ToolCalls[i].Index != tc.Index {
					a.ToolCalls = append(a.ToolCalls, AssembledCall{Index: tc.Index})
					i++
				}
				t := &a.ToolCalls[i]
				t.ID += tc.ID
				t.Type += tc.Type
				t.Name += tc.Function.Name
				t.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				a.FinishReason = *ch.FinishReason
			}
		}
	}
	a.Content = b.String()
	return a
}
