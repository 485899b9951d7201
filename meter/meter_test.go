package meter_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/opencontainers/go-digest"
)

const kimi = "kimi-k2-instruct"

func TestPlainCallReceipt(t *testing.T) {
	_, up := startUpstream(t, upstream.Options{})
	cfg := testConfig(t, up)
	m, base := newMeter(t, cfg, meter.Options{})
	body := chat(kimi, "Summarise the parser module.", map[string]any{"max_tokens": 200, "temperature": 0.7})
	status, resp, hdr := post(t, base, "s1", "application/json", body)
	if status != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d: %s", status, resp)
	}
	var cc struct {
		ID    string `json:"id"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(resp, &cc); err != nil {
		t.Fatal(err)
	}
	rs := m.Recorder().Receipts()
	if len(rs) != 1 {
		t.Fatalf("%d receipts", len(rs))
	}
	r := rs[0]
	price := meter.ReferencePrices[kimi]
	want := meter.Receipt{Scenario: "s1", Seq: 1, Model: kimi, RequestDigest: meter.RequestDigest(body),
		ResponseDigest: digest.FromBytes(resp), InputTokens: cc.Usage.PromptTokens, OutputTokens: cc.Usage.CompletionTokens,
		ReservedMicroUSD: meter.Cost(int64(len(mustCanon(t, body))), 200, price[0], price[1]),
		CostMicroUSD:     meter.Cost(cc.Usage.PromptTokens, cc.Usage.CompletionTokens, price[0], price[1]),
		UpstreamStatus:   200, ResponseID: cc.ID, Attempts: 1, Outcome: meter.OutcomeOK, HTTPStatus: 200}
	if r != want {
		t.Fatalf("receipt\n got %+v\nwant %+v", r, want)
	}
	if r.CostMicroUSD <= 0 || r.CostMicroUSD > r.ReservedMicroUSD {
		t.Fatalf("cost %d, reserved %d", r.CostMicroUSD, r.ReservedMicroUSD)
	}
	sp, res := mustScenario(t, m, "s1").Spent()
	if sp != r.CostMicroUSD || res != 0 {
		t.Fatalf("ledger spent %d reserved %d, want %d and 0", sp, res, r.CostMicroUSD)
	}
	tr := m.Recorder().Trace()
	if len(tr) != 1 || tr[0].Request != string(body) || tr[0].Upstream == nil || tr[0].Upstream.Body != string(resp) {
		t.Fatalf("trace does not hold the request and response verbatim: %+v", tr)
	}
	if ts := m.Recorder().Timings(); len(ts) != 1 || ts[0].Seq != 1 {
		t.Fatalf("timings %+v", ts)
	}
}

func mustCanon(t testing.TB, b []byte) []byte {
	c, err := meter.CanonicalRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustScenario(t testing.TB, m *meter.Meter, id string) *meter.Scenario {
	s, err := m.Scenario(id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sseEvents splits a server-sent event stream into its data payloads.
func sseEvents(b []byte) []string {
	var out []string
	for _, ev := range strings.Split(string(b), "\n\n") {
		if d, ok := strings.CutPrefix(ev, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestStreamedCall(t *testing.T) {
	_, up := startUpstream(t, upstream.Options{})
	m, base := newMeter(t, testConfig(t, up), meter.Options{})
	for _, include := range []bool{true, false} {
		t.Run(fmt.Sprint("include_usage=", include), func(t *testing.T) {
			scen := fmt.Sprint("stream-", include)
			extra := map[string]any{"stream": true}
			if include {
				extra["stream_options"] = map[string]any{"include_usage": true}
			}
			status, resp, hdr := post(t, base, scen, "application/json", chat("glm-4.5", "Explain the bug.", extra))
			if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d %s: %s", status, hdr.Get("Content-Type"), resp)
			}
			evs := sseEvents(resp)
			if evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("stream does not end in [DONE]: %q", evs[len(evs)-1])
			}
			var content strings.Builder
			var usage *struct {
				PromptTokens     int64 `json:"prompt_tokens"`
				CompletionTokens int64 `json:"completion_tokens"`
			}
			for _, d := range evs[:len(evs)-1] {
				var c struct {
					Choices []struct {
						Delta struct {
							Content string `json:"content"`
						} `json:"delta"`
					} `json:"choices"`
					Usage *struct {
						PromptTokens     int64 `json:"prompt_tokens"`
						CompletionTokens int64 `json:"completion_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal([]byte(d), &c); err != nil {
					t.Fatal(err)
				}
				if c.Usage != nil {
					usage = c.Usage
				}
				for _, ch := range c.Choices {
					content.WriteString(ch.Delta.Content)
				}
			}
			if content.Len() == 0 {
				t.Fatal("no content streamed")
			}
			if (usage != nil) != include {
				t.Fatalf("usage chunk present = %v, asked %v", usage != nil, include)
			}
			var r meter.Receipt
			for _, x := range m.Recorder().Receipts() {
				if x.Scenario == scen {
					r = x
				}
			}
			if r.Outcome != meter.OutcomeOK || !r.Stream || r.OutputTokens == 0 || r.InputTokens == 0 || r.CostMicroUSD == 0 {
				t.Fatalf("receipt %+v", r)
			}
			if usage != nil && (usage.PromptTokens != r.InputTokens || usage.CompletionTokens != r.OutputTokens) {
				t.Fatalf("usage %+v differs from receipt %+v", *usage, r)
			}
			if r.ResponseDigest != digest.FromBytes(resp) {
				t.Fatal("response digest is not the digest of the bytes the client received")
			}
			// The trace keeps the upstream's chunks one by one, usage chunk included.
			for _, te := range m.Recorder().Trace() {
				if te.Scenario != scen {
					continue
				}
				ch := te.Upstream.Chunks
				if len(ch) < 4 || ch[len(ch)-1] != "data: [DONE]\n\n" || !strings.Contains(ch[len(ch)-2], `"usage"`) {
					t.Fatalf("trace chunks %q", ch)
				}
				for _, c := range ch {
					if !strings.HasSuffix(c, "\n\n") || strings.Count(c, "\n\n") != 1 {
						t.Fatalf("chunk boundary lost: %q", c)
					}
				}
				// ... and the answer they add up to.
				if a := te.Upstream.Assembled; a == nil || a.Content != content.String() || a.FinishReason != "stop" {
					t.Fatalf("assembled %+v, streamed content %q", a, content.String())
				}
			}
		})
	}
}

func TestToolCallsPassThrough(t *testing.T) {
	up := upstream.New(upstream.Options{})
	up.AddScript("fix-parser", upstream.Script{Steps: []upstream.Step{
		{Tool: "write_file", Arguments: `{"content":"def parse(s):\n    return s.split(',')\n","path":"parser.py"}`, Difficulty: 100},
		{Content: "Fixed the parser.", Difficulty: 100},
	}})
	url, stop, err := upstream.Start(up)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	m, base := newMeter(t, testConfig(t, url), meter.Options{})
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "write_file",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}}}}
	body := chat(kimi, "[fixture-task:fix-parser] Fix the parser.", map[string]any{"tools": tools, "max_tokens": 500})
	status, viaMeter, _ := post(t, base, "tools", "application/json", body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, viaMeter)
	}
	// The meter forwards the body unchanged and returns the upstream's bytes.
	direct, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Body.Close()
	var db bytes.Buffer
	db.ReadFrom(direct.Body)
	if !bytes.Equal(db.Bytes(), viaMeter) {
		t.Fatalf("meter changed the answer:\n%s\n%s", viaMeter, db.Bytes())
	}
	var cc struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	json.Unmarshal(viaMeter, &cc)
	if len(cc.Choices) != 1 || len(cc.Choices[0].Message.ToolCalls) != 1 || cc.Choices[0].Message.ToolCalls[0].Function.Name != "write_file" ||
		!strings.Contains(cc.Choices[0].Message.ToolCalls[0].Function.Arguments, "split(',')") {
		t.Fatalf("tool call not passed through: %s", viaMeter)
	}
	if r := m.Recorder().Receipts()[0]; r.Outcome != meter.OutcomeOK {
		t.Fatalf("receipt %+v", r)
	}
}

func TestBadRequestsGetErrorsAndReceipts(t *testing.T) {
	_, up := startUpstream(t, upstream.Options{})
	cfg := testConfig(t, up)
	cfg.MaxRequestBytes = 4096
	m, base := newMeter(t, cfg, meter.Options{})
	huge := chat(kimi, strings.Repeat("x", 5000), nil)
	cases := []struct {
		name, ctype string
		body        []byte
		status      int
		code        string
		outcome     string
	}{
		{"unknown model", "application/json", chat("gpt-9", "hi", nil), 404, "model_not_found", meter.OutcomeRefusedModel},
		{"over the cap", "application/json", chat(kimi, "hi", map[string]any{"max_tokens": 1_000_000}), 402, "cap_exceeded", meter.OutcomeRefusedCap},
		{"malformed JSON", "application/json", []byte(`{"model": "kimi-k2-instruct", "messages": [`), 400, "invalid_json", meter.OutcomeBadRequest},
		{"duplicate key", "application/json", []byte(`{"model":"a","model":"b","messages":[]}`), 400, "invalid_json", meter.OutcomeBadRequest},
		{"not an object", "application/json", []byte(`[1,2]`), 400, "invalid_request", meter.OutcomeBadRequest},
		{"no messages", "application/json", []byte(`{"model":"kimi-k2-instruct"}`), 400, "invalid_messages", meter.OutcomeBadRequest},
		{"max_tokens float", "application/json", chat(kimi, "hi", map[string]any{"max_tokens": 1.5}), 400, "invalid_max_tokens", meter.OutcomeBadRequest},
		{"oversized body", "application/json", huge, 413, "request_too_large", meter.OutcomeBadRequest},
		{"wrong content type", "text/plain", chat(kimi, "hi", nil), 415, "unsupported_media_type", meter.OutcomeBadRequest},
		{"no content type", "", chat(kimi, "hi", nil), 415, "unsupported_media_type", meter.OutcomeBadRequest},
		{"not UTF-8", "application/json", []byte("{\"model\":\"\xff\"}"), 400, "invalid_json", meter.OutcomeBadRequest},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, resp, _ := post(t, base, "bad", c.ctype, c.body)
			if status != c.status {
				t.Fatalf("status %d, want %d: %s", status, c.status, resp)
			}
			if e := apiError(t, resp); e.Code != c.code {
				t.Fatalf("code %q, want %q (%s)", e.Code, c.code, e.Message)
			}
			rs := m.Recorder().Receipts()
			r := rs[len(rs)-1]
			if r.Seq != int64(i+1) || r.Outcome != c.outcome || r.Error != c.code || r.HTTPStatus != c.status ||
				r.CostMicroUSD != 0 || r.ResponseDigest != digest.FromBytes(resp) {
				t.Fatalf("receipt %+v", r)
			}
		})
	}
	// Wrong method and unknown route get receipts too.
	req, _ := http.NewRequest(http.MethodGet, base+"/chat/completions", nil)
	req.Header.Set(meter.ScenarioHeader, "bad")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Fatalf("GET chat: %d", resp.StatusCode)
	}
	if rs := m.Recorder().Receipts(); rs[len(rs)-1].Error != "method_not_allowed" || rs[len(rs)-1].Seq != int64(len(cases)+1) {
		t.Fatalf("receipt %+v", rs[len(rs)-1])
	}
	if sp, res := mustScenario(t, m, "bad").Spent(); sp != 0 || res != 0 {
		t.Fatalf("refused calls spent %d, reserved %d", sp, res)
	}
	// A bad scenario header is refused before any scenario is charged.
	st, b, _ := func() (int, []byte, http.Header) {
		return post(t, base, "../etc", "application/json", chat(kimi, "hi", nil))
	}()
	if st != 400 || apiError(t, b).Code != "invalid_scenario" {
		t.Fatalf("bad scenario: %d %s", st, b)
	}
}

func TestModelsListsAllowlist(t *testing.T) {
	_, up := startUpstream(t, upstream.Options{})
	_, base := newMeter(t, testConfig(t, up), meter.Options{})
	resp, err := http.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range l.Data {
		got = append(got, d.ID)
	}
	if l.Object != "list" || strings.Join(got, ",") != strings.Join(models(t), ",") {
		t.Fatalf("models %v, want %v", got, models(t))
	}
}

func TestScenarioHandlerIgnoresHeader(t *testing.T) {
	_, up := startUpstream(t, upstream.Options{})
	m, err := meter.New(testConfig(t, up), meter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := mustScenario(t, m, "bound")
	base := startMeter(t, m, s.Handler())
	if st, b, _ := post(t, base, "other", "application/json", chat(kimi, "hi", nil)); st != 200 {
		t.Fatalf("%d %s", st, b)
	}
	if r := m.Recorder().Receipts()[0]; r.Scenario != "bound" {
		t.Fatalf("a scenario's own socket charged %q", r.Scenario)
	}
}

func TestUnixSocket(t *testing.T) {
	_, up := startUpstream(t, upstream.Options{})
	m, err := meter.New(testConfig(t, up), meter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sock := t.TempDir() + "/meter.sock"
	ln, err := meter.Listen("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	go meter.Serve(t.Context(), ln, m.Handler())
	c := unixClient(sock)
	resp, err := c.Post("http://meter/v1/chat/completions", "application/json", bytes.NewReader(chat(kimi, "hi", nil)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(m.Recorder().Receipts()) != 1 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, err := meter.Listen("0.0.0.0:0"); err == nil {
		t.Fatal("listening on all interfaces was allowed")
	}
}
