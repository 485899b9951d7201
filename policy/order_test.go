package policy_test

import (
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
)

// slowModels delays the fixture upstream's answers for some models.
type slowModels struct {
	h     http.Handler
	delay map[string]time.Duration
}

func (s slowModels) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	for m, d := range s.delay {
		if strings.Contains(string(b), `"model":"`+m+`"`) {
			time.Sleep(d)
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	s.h.ServeHTTP(w, r)
}

// TestParallelOrderIsTheTrace: a parallel route's calls are numbered in step
// order whichever model answers first, so two runs whose models answer in
// opposite orders record the same receipts and the same trace.
func TestParallelOrderIsTheTrace(t *testing.T) {
	pol := `{"schema": "feval.policy.v1", "routes": [{"name": "panel", "mode": "parallel", "combine": "first",
	  "steps": [{"model": "kimi-k2-instruct"}, {"model": "glm-4.5"}, {"model": "gpt-oss-120b"}]}]}`
	pack := loadPack(t, writePack(t, map[string]string{"policy.json": pol}))
	run := func(delay map[string]time.Duration) ([]meter.Receipt, []byte) {
		up := slowModels{h: upstream.New(upstream.Options{}), delay: delay}
		m, err := meter.New(meter.ReferenceConfig(models(t), "http://fixture.invalid/v1"), meter.Options{Transport: meter.Transport(up)})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		sc, _ := m.Scenario("s")
		s, err := policy.Start(t.Context(), pack, policy.Options{Scenario: sc})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := 0; i < 2; i++ {
			if code, body := post(t, s, map[string]any{"messages": msgs("user", "go")}); code != 200 {
				t.Fatalf("%d %s", code, body)
			}
		}
		enc, err := meter.EncodeTrace(m.Recorder().Trace())
		if err != nil {
			t.Fatal(err)
		}
		return m.Recorder().Receipts(), enc
	}
	r1, t1 := run(map[string]time.Duration{"kimi-k2-instruct": 150 * time.Millisecond})
	r2, t2 := run(map[string]time.Duration{"gpt-oss-120b": 150 * time.Millisecond, "glm-4.5": 75 * time.Millisecond})
	if got := modelsOf(r1[:3]); !reflect.DeepEqual(got, []string{"kimi-k2-instruct", "glm-4.5", "gpt-oss-120b"}) {
		t.Fatalf("calls in %v, not in step order", got)
	}
	if !reflect.DeepEqual(r1, r2) || !bytes.Equal(t1, t2) {
		t.Fatal("the receipts or the trace depend on which model answered first")
	}
}
