package policy_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
)

// packExpect is a fixture pack's expect.json (fixtures/policies/README.md).
type packExpect struct {
	Description   string          `json:"description"`
	Form          string          `json:"form"`
	CapMicroUSD   int64           `json:"cap_micro_usd"`
	RequestMillis int64           `json:"request_millis"`
	MaxRestarts   int             `json:"max_restarts"`
	Requests      []expectRequest `json:"requests"`
}

type expectRequest struct {
	Content         string         `json:"content"`
	Tools           bool           `json:"tools"`
	Stream          bool           `json:"stream"`
	Status          int            `json:"status"`
	Failure         string         `json:"failure"`
	MessageContains string         `json:"message_contains"`
	Route           string         `json:"route"`
	Models          []string       `json:"models"`
	AnswerContains  string         `json:"answer_contains"`
	Outcomes        map[string]int `json:"outcomes"`
}

const packsDir = "../fixtures/policies"

func packNames(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(packsDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) < 15 {
		t.Fatalf("only %d fixture packs in %s", len(out), packsDir)
	}
	return out
}

// agentBody is the request an expectation describes, after the earlier
// turns of the session.
func agentBody(history []map[string]any, rq expectRequest) map[string]any {
	ms := append(append([]map[string]any{}, history...), map[string]any{"role": "user", "content": rq.Content})
	b := map[string]any{"model": "feval-policy", "messages": ms}
	if rq.Tools {
		b["tools"] = shellTool
	}
	if rq.Stream {
		b["stream"] = true
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	return b
}

// answerText is the content of a completion or of a stream's chunks.
func answerText(body []byte) string {
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &c) == nil && len(c.Choices) > 0 {
		return c.Choices[0].Message.Content
	}
	var sb strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(data), &ch)
		for _, c := range ch.Choices {
			sb.WriteString(c.Delta.Content)
		}
	}
	return sb.String()
}

func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var sb strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		b, _ := os.ReadFile(p)
		sb.WriteString(p + "\x00" + string(b) + "\x00")
		return nil
	})
	return sb.String()
}

// TestPacks runs every fixture pack (reference and adversarial) through the
// sidecar, the real meter and the fixture upstream, and asserts each
// request's expected outcome from its expect.json.
func TestPacks(t *testing.T) {
	needSandbox(t)
	for _, name := range packNames(t) {
		t.Run(name, func(t *testing.T) {
			var ex packExpect
			b, err := os.ReadFile(filepath.Join(packsDir, name, "expect.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &ex); err != nil {
				t.Fatal(err)
			}
			e := newEnvCap(t, ex.CapMicroUSD)
			pack := fixturePack(t, filepath.Join(packsDir, name, "pack"))
			if string(pack.Form) != ex.Form {
				t.Fatalf("form %s, want %s", pack.Form, ex.Form)
			}
			before := treeDigest(t, pack.Dir)
			s := e.start(t, pack, policy.Options{Limits: policy.Limits{RequestMillis: ex.RequestMillis, MaxRestarts: ex.MaxRestarts}})
			var history []map[string]any
			for i, rq := range ex.Requests {
				code, body := post(t, s, agentBody(history, rq))
				history = append(history, map[string]any{"role": "user", "content": rq.Content},
					map[string]any{"role": "assistant", "content": "ok"})
				recs := s.Requests()
				if len(recs) != i+1 {
					t.Fatalf("request %d: %d records", i+1, len(recs))
				}
				rec := recs[i]
				if code != rq.Status || rec.HTTPStatus != rq.Status {
					t.Errorf("request %d: status %d (recorded %d), want %d: %s", i+1, code, rec.HTTPStatus, rq.Status, body)
				}
				switch {
				case rq.Failure == "" && rec.Failure != nil:
					t.Errorf("request %d: unexpected failure %+v", i+1, rec.Failure)
				case rq.Failure != "" && (rec.Failure == nil || rec.Failure.Kind != rq.Failure || !strings.Contains(rec.Failure.Message, rq.MessageContains)):
					t.Errorf("request %d: failure %+v, want %s containing %q", i+1, rec.Failure, rq.Failure, rq.MessageContains)
				}
				if rq.Failure != "" && !bytes.Contains(body, []byte(`"policy_`+rq.Failure+`"`)) {
					t.Errorf("request %d: the agent's error does not name policy_%s: %s", i+1, rq.Failure, body)
				}
				if rq.Route != "" && rec.Route != rq.Route {
					t.Errorf("request %d: route %q, want %q", i+1, rec.Route, rq.Route)
				}
				rs := receiptsOf(e, rec.Seqs)
				if rq.Models != nil {
					if got := modelsOf(rs); !reflect.DeepEqual(got, rq.Models) && !(len(got) == 0 && len(rq.Models) == 0) {
						t.Errorf("request %d: models %v, want %v", i+1, got, rq.Models)
					}
				}
				if rq.Outcomes != nil {
					got := map[string]int{}
					for _, rc := range rs {
						got[rc.Outcome]++
					}
					for k, n := range rq.Outcomes {
						if got[k] != n {
							t.Errorf("request %d: %d receipts %s, want %d (all: %v)", i+1, got[k], k, n, got)
						}
					}
				}
				if rq.AnswerContains != "" && !strings.Contains(answerText(body), rq.AnswerContains) {
					t.Errorf("request %d: answer %q lacks %q", i+1, answerText(body), rq.AnswerContains)
				}
				if strings.Contains(string(body), "ESCAPED") {
					t.Errorf("request %d: %s", i+1, body)
				}
			}
			var total int64
			for _, rc := range e.m.Recorder().Receipts() {
				total += rc.CostMicroUSD
			}
			if total > e.m.Config().CapMicroUSD {
				t.Errorf("spent %d micro-USD past the cap %d", total, e.m.Config().CapMicroUSD)
			}
			if after := treeDigest(t, pack.Dir); after != before {
				t.Errorf("the pack directory changed")
			}
		})
	}
}

func newEnvCap(t *testing.T, capMicroUSD int64) *env {
	t.Helper()
	e := newEnv(t, upstream.Options{}, meter.Options{})
	if capMicroUSD == 0 {
		return e
	}
	c := e.m.Config()
	c.CapMicroUSD = capMicroUSD
	m, err := meter.New(c, meter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	e.m = m
	if e.sc, err = m.Scenario("scenario-01"); err != nil {
		t.Fatal(err)
	}
	return e
}
