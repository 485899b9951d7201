package meter_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
)

// TestScenarioReceipts: a scenario's receipts from a recording index on are
// that scenario's only, sorted by sequence number, with the running count.
func TestScenarioReceipts(t *testing.T) {
	_, up := startUpstream(t, upstream.Options{})
	m, err := meter.New(testConfig(t, up), meter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, b := mustScenario(t, m, "a"), mustScenario(t, m, "b")
	req := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"model":"gpt-oss-120b","messages":[{"role":"user","content":"call %d"}]}`, i))
	}
	a.CallAll(context.Background(), [][]byte{req(1), req(2)})
	b.Call(context.Background(), req(3))
	a.CallAll(context.Background(), [][]byte{req(4), req(5), req(6)})
	got, n := m.Recorder().ScenarioReceipts("a", 2)
	if n != 5 || len(got) != 3 || got[0].Seq != 3 || got[2].Seq != 5 || got[0].Scenario != "a" {
		t.Fatalf("n %d, receipts %+v", n, got)
	}
	if got, n := m.Recorder().ScenarioReceipts("b", 1); n != 1 || len(got) != 0 {
		t.Fatalf("b: n %d, %+v", n, got)
	}
	if got, n := m.Recorder().ScenarioReceipts("none", 0); n != 0 || got != nil {
		t.Fatalf("none: n %d, %+v", n, got)
	}
}
