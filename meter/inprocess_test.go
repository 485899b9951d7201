package meter_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
)

func TestCallAllAdmitsInOrder(t *testing.T) {
	_, up := startUpstream(t, upstream.Options{LatencyMillis: 5})
	bodies := [][]byte{
		chat("kimi-k2-instruct", "one", nil),
		chat("glm-4.5", "two", map[string]any{"stream": true}),
		[]byte(`{"model":`),
		chat("not-allowed", "four", nil),
		chat("gpt-oss-120b", "five", nil),
	}
	var runs [][]meter.Receipt
	for range 2 {
		m, err := meter.New(testConfig(t, up), meter.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res := mustScenario(t, m, "fan-out").CallAll(context.Background(), bodies)
		wantStatus := []int{200, 200, 400, 404, 200}
		for i, r := range res {
			if r.Status != wantStatus[i] {
				t.Fatalf("call %d: status %d: %s", i, r.Status, r.Body)
			}
		}
		if !strings.HasSuffix(string(res[1].Body), "data: [DONE]\n\n") {
			t.Fatalf("streamed result %q", res[1].Body)
		}
		rs := m.Recorder().Receipts()
		for i, r := range rs {
			if r.Seq != int64(i+1) || r.RequestDigest != meter.RequestDigest(bodies[i]) {
				t.Fatalf("receipt %d is not call %d: %+v", r.Seq, i, r)
			}
		}
		runs = append(runs, rs)
		m.Close()
	}
	if !reflect.DeepEqual(runs[0], runs[1]) {
		t.Fatal("two runs of the same parallel calls gave different receipts")
	}
}

func TestTransportInProcess(t *testing.T) {
	_, up := startUpstream(t, upstream.Options{})
	m, err := meter.New(testConfig(t, up), meter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := &http.Client{Transport: meter.Transport(mustScenario(t, m, "inproc").Handler())}
	resp, err := c.Post("http://meter/v1/chat/completions", "application/json",
		bytes.NewReader(chat("deepseek-v3.1", "stream please", map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}})))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Fatalf("%d %v %q", resp.StatusCode, resp.Header, b)
	}
	resp, err = c.Get("http://meter/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if rs := m.Recorder().Receipts(); len(rs) != 1 || rs[0].Outcome != meter.OutcomeOK || rs[0].Scenario != "inproc" || resp.StatusCode != 200 {
		t.Fatalf("receipts %+v, models status %d", rs, resp.StatusCode)
	}
}
