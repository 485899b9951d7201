package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/opencontainers/go-digest"
)

// Limits on the exchanges page.
const (
	// maxExchangesShown bounds the model calls one page lists.
	maxExchangesShown = 500
	// maxExchangeText bounds each message and answer shown, in runes.
	maxExchangeText = 4000
)

// ExchangesPage is one scenario of a scenarios verdict as its agent lived it:
// the model calls the meter recorded in the verdict's trace, in order, with
// the last message sent and the answer received.
type ExchangesPage struct {
	Verdict  digest.Digest            `json:"verdict"`
	Scenario scenarios.ScenarioResult `json:"scenario"`
	Trace    digest.Digest            `json:"trace"`
	// Exchanges are the scenario's trace entries in sequence order; Hidden
	// counts those past maxExchangesShown.
	Exchanges []ExchangeView `json:"exchanges"`
	Hidden    int            `json:"hidden"`
}

// ExchangeView is one model call: what was asked and what came back.
type ExchangeView struct {
	Seq        int64  `json:"seq"`
	Occurrence int64  `json:"occurrence"`
	Model      string `json:"model"`
	// Messages is how many messages the request sent; Last the last one's
	// role and text (cut).
	Messages int    `json:"messages"`
	LastRole string `json:"last_role,omitempty"`
	Last     string `json:"last,omitempty"`
	// Forwarded tells whether the call reached the model; Status, Failure
	// and Answer are the model's final answer (the text cut), ToolCalls the
	// tools it asked for.
	Forwarded bool     `json:"forwarded"`
	Status    int      `json:"status,omitempty"`
	Failure   string   `json:"failure,omitempty"`
	Answer    string   `json:"answer,omitempty"`
	ToolCalls []string `json:"tool_calls"`
}

func (s *Server) exchangesPage(ctx context.Context, l *cas.Layout, r *http.Request) (string, any, error) {
	desc, art, err := s.loadVerdict(ctx, l, r)
	if err != nil {
		return "", nil, err
	}
	name := r.PathValue("scenario")
	v := scenariosView(art.Record)
	if v == nil {
		return "", nil, fmt.Errorf("verdict %s is not a scenarios verdict: %w", desc.Digest, ErrWrongKind)
	}
	p := ExchangesPage{Verdict: desc.Digest, Trace: v.Trace, Exchanges: []ExchangeView{}}
	found := false
	for _, sc := range v.Scenarios {
		if sc.Name == name {
			p.Scenario, found = sc, true
		}
	}
	if !found {
		return "", nil, fmt.Errorf("verdict %s has no scenario %q: %w", desc.Digest, clipValue(name), cas.ErrNotFound)
	}
	if v.Trace == "" {
		return "", nil, fmt.Errorf("verdict %s names no trace: %w", desc.Digest, cas.ErrNotFound)
	}
	td, err := s.resolve(ctx, l, v.Trace)
	if err != nil {
		return "", nil, fmt.Errorf("trace %s: %w", v.Trace, err)
	}
	_, entries, err := meter.LoadTrace(ctx, l, td)
	if err != nil {
		return "", nil, err
	}
	for _, e := range entries {
		if e.Scenario != name {
			continue
		}
		if len(p.Exchanges) == maxExchangesShown {
			p.Hidden++
			continue
		}
		p.Exchanges = append(p.Exchanges, exchangeView(e))
	}
	return "Scenario " + clipValue(name) + " of verdict " + shortD(desc.Digest), p, nil
}

// exchangeView reads what a trace entry asked and answered. The request is
// the agent's, the answer the model's: both are shown, never interpreted.
func exchangeView(e meter.TraceEntry) ExchangeView {
	x := ExchangeView{Seq: e.Seq, Occurrence: e.Occurrence, Forwarded: e.Forwarded, ToolCalls: []string{}}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal([]byte(e.Request), &req) == nil {
		x.Model, x.Messages = req.Model, len(req.Messages)
		if n := len(req.Messages); n > 0 {
			last := req.Messages[n-1]
			x.LastRole, x.Last = last.Role, clip(policy.ContentText(last.Content), maxExchangeText)
		}
	}
	if u := e.Upstream; u != nil {
		x.Status, x.Failure = u.Status, u.Failure
		switch {
		case u.Assembled != nil:
			x.Answer = u.Assembled.Content
			for _, c := range u.Assembled.ToolCalls {
				x.ToolCalls = append(x.ToolCalls, clip(c.Name+" "+c.Arguments, 400))
			}
		default:
			var calls []string
			x.Answer, calls = answerText(u.Body)
			x.ToolCalls = append(x.ToolCalls, calls...)
		}
		x.Answer = clip(x.Answer, maxExchangeText)
	}
	return x
}

// answerText is the first choice's message content and tool calls of a
// chat completion body, or the body itself when it is not one.
func answerText(body string) (string, []string) {
	var resp struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal([]byte(body), &resp) != nil || len(resp.Choices) == 0 {
		return body, nil
	}
	m := resp.Choices[0].Message
	var calls []string
	for i, c := range m.ToolCalls {
		if i == 32 {
			break
		}
		calls = append(calls, clip(c.Function.Name+" "+c.Function.Arguments, 400))
	}
	return m.Content, calls
}
