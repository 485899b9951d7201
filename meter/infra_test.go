package meter_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
)

func TestUpstreamFailuresAreInfraError(t *testing.T) {
	cases := []struct {
		name     string
		faults   upstream.Faults
		stream   bool
		attempts int
		status   int // what the client sees
	}{
		{"402 exhausted account", upstream.Faults{Fail402: true}, false, 3, 502},
		{"503 overloaded", upstream.Faults{Status5xxEvery: 1}, false, 3, 502},
		{"connection reset", upstream.Faults{ResetEvery: 1}, false, 3, 502},
		{"stalled body", upstream.Faults{SlowBodyMillis: 2000}, false, 3, 502},
		{"402 on a stream", upstream.Faults{Fail402: true}, true, 3, 502},
		// Chunks already reached the client: no retry, the stream ends with an error event.
		{"stream cut mid-answer", upstream.Faults{CutStreamAfter: 3}, true, 1, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up, url := startUpstream(t, upstream.Options{Faults: c.faults})
			m, base := newMeter(t, testConfig(t, url), meter.Options{})
			status, b, _ := post(t, base, "s", "application/json", chat(kimi, "hi", map[string]any{"stream": c.stream}))
			if status != c.status {
				t.Fatalf("status %d, want %d: %s", status, c.status, b)
			}
			if c.status == 502 {
				if e := apiError(t, b); e.Code != "upstream_unavailable" || e.Type != "upstream_error" {
					t.Fatalf("error %+v", e)
				}
			} else if evs := sseEvents(b); !strings.Contains(evs[len(evs)-1], `"upstream_unavailable"`) {
				t.Fatalf("cut stream does not end in an error event: %q", evs)
			}
			r := m.Recorder().Receipts()[0]
			if r.Outcome != meter.OutcomeUpstreamError || r.Attempts != c.attempts || int64(c.attempts) != up.Calls() {
				t.Fatalf("receipt %+v; upstream saw %d calls", r, up.Calls())
			}
			if s := meter.Summarize(m.Recorder().Receipts()); len(s) != 1 || s[0].Status != meter.StatusInfraError {
				t.Fatalf("summary %+v", s)
			}
			if sp, res := mustScenario(t, m, "s").Spent(); res != 0 || sp != r.CostMicroUSD {
				t.Fatalf("ledger %d/%d after failure", sp, res)
			}
		})
	}
}

func TestTransientFailureIsRetried(t *testing.T) {
	up, url := startUpstream(t, upstream.Options{Faults: upstream.Faults{Status5xxEvery: 2}})
	m, base := newMeter(t, testConfig(t, url), meter.Options{})
	for i := range 2 {
		if st, b, _ := post(t, base, "s", "application/json", chat(kimi, fmt.Sprint("q", i), nil)); st != 200 {
			t.Fatalf("call %d: %d %s", i, st, b)
		}
	}
	rs := m.Recorder().Receipts()
	if rs[0].Attempts != 1 || rs[1].Attempts != 2 || rs[1].Outcome != meter.OutcomeOK || up.Calls() != 3 {
		t.Fatalf("receipts %+v, upstream calls %d", rs, up.Calls())
	}
	if s := meter.Summarize(rs); s[0].Status != meter.StatusOK {
		t.Fatalf("summary %+v", s)
	}
}

func TestUpstreamRejectionIsNotInfra(t *testing.T) {
	_, url := startUpstream(t, upstream.Options{})
	cfg := testConfig(t, url)
	cfg.Models[0].UpstreamModel = "retired-model" // the fixture answers 404
	m, base := newMeter(t, cfg, meter.Options{})
	st, b, _ := post(t, base, "s", "application/json", chat(cfg.Models[0].Name, "hi", nil))
	if st != 404 || apiError(t, b).Code != "upstream_rejected" {
		t.Fatalf("%d %s", st, b)
	}
	r := m.Recorder().Receipts()[0]
	if r.Outcome != meter.OutcomeUpstreamRejected || r.Attempts != 1 || r.CostMicroUSD != 0 {
		t.Fatalf("receipt %+v", r)
	}
	if s := meter.Summarize(m.Recorder().Receipts()); s[0].Status != meter.StatusOK {
		t.Fatalf("summary %+v", s)
	}
}

// submission is a stand-in for eight different packs: each routes its scenario
// calls to its own model with its own prompts.
type submission struct {
	model  string
	prompt string
}

// evaluate runs one submission's scenarios through a fresh meter (as a
// validator does per evaluation) and returns the verdict's status and, only
// when every scenario completed, a score: the number of answers the fixture
// model got right (a scripted step solved).
func evaluate(t *testing.T, upURL string, sub submission) (status string, score string) {
	cfg := testConfig(t, upURL)
	m, base := newMeter(t, cfg, meter.Options{})
	solved := 0
	for i := range 3 {
		scen := fmt.Sprintf("scenario-%02d", i)
		body := chat(sub.model, fmt.Sprintf("[fixture-task:incident-%d] %s", i, sub.prompt), nil)
		st, b, _ := post(t, base, scen, "application/json", body)
		if st == 200 && strings.Contains(string(b), "Solved.") {
			solved++
		}
	}
	for _, s := range meter.Summarize(m.Recorder().Receipts()) {
		if s.Status != meter.StatusOK {
			return s.Status, ""
		}
	}
	return "passed", fmt.Sprintf("%d/3", solved)
}

// TestExhaustedAccountIncident reproduces the public incident: the model
// account runs out of credits (HTTP 402 on every call) while eight different
// submissions are evaluated. Every one must get infra_error; none a score of 0
// and none another's score.
func TestExhaustedAccountIncident(t *testing.T) {
	up := upstream.New(upstream.Options{})
	for i := range 3 {
		up.AddScript(fmt.Sprintf("incident-%d", i), upstream.Script{Steps: []upstream.Step{{Content: "Solved.", Difficulty: 300 + 200*i}}})
	}
	url, stop, err := upstream.Start(up)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var subs []submission
	for i, m := range models(t) {
		subs = append(subs, submission{model: m, prompt: fmt.Sprintf("pack %d", i)})
	}
	// With credits, the packs score differently: the scores carry information.
	healthy := map[string]bool{}
	for _, s := range subs {
		st, score := evaluate(t, url, s)
		if st != "passed" || score == "" {
			t.Fatalf("healthy evaluation of %s: %s %q", s.model, st, score)
		}
		healthy[score] = true
	}
	if len(healthy) < 2 {
		t.Fatalf("healthy scores %v do not differ; the test would not see a copied score", healthy)
	}
	up.SetFaults(upstream.Faults{Fail402: true})
	for _, s := range subs {
		st, score := evaluate(t, url, s)
		if st != meter.StatusInfraError || score != "" {
			t.Errorf("submission %s during the 402 outage: status %q score %q, want infra_error and no score", s.model, st, score)
		}
	}
}

// TestClientGoneIsNotInfraError: a client that gives up (a timeout, a policy
// keeping only the first of parallel answers) does not turn the call into an
// upstream error; the call completes and is recorded as it would have been.
func TestClientGoneIsNotInfraError(t *testing.T) {
	up, url := startUpstream(t, upstream.Options{LatencyMillis: 300})
	m, base := newMeter(t, testConfig(t, url), meter.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // give up once the call has reached the upstream
		for up.Calls() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(chat(kimi, "slow", nil)))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the client did not give up")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(m.Recorder().Receipts()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rs := m.Recorder().Receipts()
	if len(rs) != 1 || rs[0].Outcome != meter.OutcomeOK || rs[0].CostMicroUSD == 0 || up.Calls() != 1 {
		t.Fatalf("receipts %+v, upstream calls %d", rs, up.Calls())
	}
}
