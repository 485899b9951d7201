package policy_test

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/policy"
)

// recordedSession drives a sidecar through a scripted task, plain and streamed
// requests, and returns every answer the agent received.
func recordedSession(t *testing.T, m *meter.Meter, pack *policy.Pack, tasks map[string]upstream.Script) [][]byte {
	t.Helper()
	sc, err := m.Scenario("scenario-07")
	if err != nil {
		t.Fatal(err)
	}
	s, err := policy.Start(t.Context(), pack, policy.Options{Scenario: sc})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var answers [][]byte
	runSession(t, s, "task-1", tasks["task-1"]) // its answers are in the trace
	for _, stream := range []bool{false, true} {
		body := map[string]any{"messages": msgs("user", "Explain the failure."), "stream": stream}
		_, b := post(t, s, body)
		answers = append(answers, b)
		body["tools"] = agentTools
		_, b = post(t, s, body)
		answers = append(answers, b)
	}
	return answers
}

// TestSidecarReplay: a recorded sidecar session of each form, replayed with
// the meter in replay mode (no upstream), makes the same calls: the trace
// is byte-identical, the receipts equal, there are no divergences, and the
// agent receives the same answers.
func TestSidecarReplay(t *testing.T) {
	needSandbox(t)
	tasks := scriptedTasks()
	for _, name := range []string{"parallel-judge", "draft-review", "majority-fallback", "py-session", "py-stream", "server"} {
		t.Run(name, func(t *testing.T) {
			pack := fixturePack(t, filepath.Join(packsDir, name, "pack"))
			live := newEnv(t, upstream.Options{Scripts: tasks}, meter.Options{})
			answers := recordedSession(t, live.m, pack, tasks)
			trace := live.m.Recorder().Trace()
			enc, err := meter.EncodeTrace(trace)
			if err != nil {
				t.Fatal(err)
			}
			entries, err := meter.DecodeTrace(bytes.NewReader(enc))
			if err != nil {
				t.Fatal(err)
			}

			cfg := live.m.Config()
			for i := range cfg.Models {
				cfg.Models[i].Upstream = "http://127.0.0.1:9/v1" // nothing listens: replay must not call out
			}
			rm, err := meter.New(cfg, meter.Options{Replay: entries})
			if err != nil {
				t.Fatal(err)
			}
			defer rm.Close()
			replayed := recordedSession(t, rm, pack, tasks)
			if d := rm.Recorder().Divergences(); len(d) > 0 {
				t.Fatalf("divergences %+v", d)
			}
			enc2, err := meter.EncodeTrace(rm.Recorder().Trace())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, enc2) {
				t.Fatalf("replayed trace differs (%d vs %d bytes)", len(enc), len(enc2))
			}
			if !reflect.DeepEqual(live.m.Recorder().Receipts(), rm.Recorder().Receipts()) {
				t.Fatal("replayed receipts differ")
			}
			for i := range answers {
				if !bytes.Equal(answers[i], replayed[i]) {
					t.Fatalf("answer %d differs:\n%s\n%s", i, answers[i], replayed[i])
				}
			}
			if len(trace) < 8 {
				t.Fatalf("only %d calls recorded", len(trace))
			}
		})
	}
}
