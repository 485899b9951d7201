package meter_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

type exchange struct {
	status int
	body   string
}

type step struct {
	scenario string
	body     []byte
}

// session is a recorded evaluation's calls: plain, streamed with and without
// usage, tool calls, a repeated request, refusals and a retried upstream error.
func session(t *testing.T) []step {
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "shell",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}}}
	task := "[fixture-task:replay] Make the tests pass."
	first := chat("deepseek-v3.1", task, map[string]any{"tools": tools})
	return []step{
		{"scn-a", chat(kimi, "Plan the change.", map[string]any{"max_tokens": 300, "temperature": 0.2})},
		{"scn-a", chat("glm-4.5", "Stream it.", map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}})},
		{"scn-a", chat("glm-4.5", "Stream it.", map[string]any{"stream": true})},
		{"scn-a", first},
		{"scn-a", first}, // same request again: occurrence 1
		{"scn-a", chat("not-allowed", "hi", nil)},
		{"scn-b", chat("mistral-large-2411", "Too much.", map[string]any{"max_tokens": 60_000})},
		{"scn-b", chat("gpt-oss-120b", "Small and cheap.", map[string]any{"stream": true, "tools": tools})},
		{"scn-b", []byte(`{"broken":`)},
	}
}

func runSession(t *testing.T, base string, steps []step) []exchange {
	var out []exchange
	for _, s := range steps {
		st, b, _ := post(t, base, s.scenario, "application/json", s.body)
		out = append(out, exchange{st, string(b)})
	}
	return out
}

func testStore(t *testing.T) (*cas.Layout, *bundle.Signer) {
	l, err := cas.Init(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bundle.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return l, s
}

type noNetwork struct{ t *testing.T }

func (n noNetwork) RoundTrip(r *http.Request) (*http.Response, error) {
	n.t.Errorf("replay contacted an upstream: %s", r.URL)
	return nil, errors.New("no network in replay")
}

func TestRecordThenReplay(t *testing.T) {
	ctx := context.Background()
	up := upstream.New(upstream.Options{Faults: upstream.Faults{Status5xxEvery: 5}})
	up.AddScript("replay", upstream.Script{Steps: []upstream.Step{{Tool: "shell", Arguments: `{"cmd":"pytest -q"}`, Difficulty: 100}}})
	url, stop, err := upstream.Start(up)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, url)
	cfg.CapMicroUSD = 100_000
	m, base := newMeter(t, cfg, meter.Options{})
	steps := session(t)
	recorded := runSession(t, base, steps)
	stop() // nothing answers from here on

	// The session exercised what it claims to.
	outcomes := map[string]int{}
	retried := false
	for _, r := range m.Recorder().Receipts() {
		outcomes[r.Outcome]++
		retried = retried || r.Attempts > 1
	}
	if outcomes[meter.OutcomeOK] != 6 || outcomes[meter.OutcomeRefusedModel] != 1 || outcomes[meter.OutcomeRefusedCap] != 1 ||
		outcomes[meter.OutcomeBadRequest] != 1 || !retried {
		t.Fatalf("outcomes %v, retried %v", outcomes, retried)
	}
	if rs := m.Recorder().Receipts(); rs[4].Occurrence != 1 || rs[3].Occurrence != 0 || rs[3].RequestDigest != rs[4].RequestDigest {
		t.Fatalf("occurrences %+v %+v", rs[3], rs[4])
	}

	// A streamed tool call is kept as its chunks and as the call they add up to.
	if te := m.Recorder().Trace()[7]; te.Scenario != "scn-b" || te.Seq != 2 || te.Upstream.Assembled == nil ||
		len(te.Upstream.Assembled.ToolCalls) != 1 || te.Upstream.Assembled.ToolCalls[0].Name != "shell" ||
		te.Upstream.Assembled.ToolCalls[0].Arguments != "{}" || te.Upstream.Assembled.FinishReason != "tool_calls" {
		t.Fatalf("streamed tool call in the trace: %+v", te.Upstream)
	}

	st1, signer := testStore(t)
	subject, err := bundle.PushData(ctx, st1, "submission", []byte("the evaluated pack"))
	if err != nil {
		t.Fatal(err)
	}
	arts, err := meter.WriteArtifacts(ctx, st1, signer, m.Recorder(), cfg, subject, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []ocispec.Descriptor{arts.Trace, arts.Receipts} {
		if _, err := bundle.VerifySignatures(ctx, st1, d, []*bundle.PublicKey{signer.Public()}); err != nil {
			t.Fatalf("signature of %s: %v", d.ArtifactType, err)
		}
	}
	rr, err := meter.LoadReceipts(ctx, st1, arts.Receipts)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Trace != arts.Trace.Digest || rr.Submission != subject.Digest || !reflect.DeepEqual(rr.Receipts, m.Recorder().Receipts()) {
		t.Fatalf("receipts record %+v", rr)
	}
	_, entries, err := meter.LoadTrace(ctx, st1, arts.Trace)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(entries, m.Recorder().Trace()) {
		t.Fatal("trace read back differs from the recording")
	}

	// Replay with no upstream and no network.
	rm, rbase := newMeter(t, cfg, meter.Options{Replay: entries, Transport: noNetwork{t}})
	replayed := runSession(t, rbase, steps)
	if !reflect.DeepEqual(replayed, recorded) {
		for i := range recorded {
			if replayed[i] != recorded[i] {
				t.Errorf("call %d: replayed %d %q\nrecorded %d %q", i, replayed[i].status, replayed[i].body, recorded[i].status, recorded[i].body)
			}
		}
		t.FailNow()
	}
	if d := rm.Recorder().Divergences(); len(d) != 0 {
		t.Fatalf("divergences %+v", d)
	}
	st2, _ := testStore(t)
	if _, err := bundle.PushData(ctx, st2, "submission", []byte("the evaluated pack")); err != nil {
		t.Fatal(err)
	}
	arts2, err := meter.WriteArtifacts(ctx, st2, signer, rm.Recorder(), cfg, subject, "")
	if err != nil {
		t.Fatal(err)
	}
	if arts2.Trace.Digest != arts.Trace.Digest || arts2.Receipts.Digest != arts.Receipts.Digest {
		t.Fatalf("replay artifacts differ: trace %s vs %s, receipts %s vs %s", arts2.Trace.Digest, arts.Trace.Digest, arts2.Receipts.Digest, arts.Receipts.Digest)
	}

	// A request the trace lacks is a divergence naming its digest and position.
	extra := chat(kimi, "A question nobody asked.", nil)
	st, b, _ := post(t, rbase, "scn-b", "application/json", extra)
	if st != http.StatusConflict || apiError(t, b).Code != "replay_divergence" {
		t.Fatalf("%d %s", st, b)
	}
	want := meter.Divergence{Scenario: "scn-b", Seq: 4, RequestDigest: meter.RequestDigest(extra), Occurrence: 0}
	if d := rm.Recorder().Divergences(); len(d) != 1 || d[0] != want {
		t.Fatalf("divergences %+v, want %+v", d, want)
	}
	if !strings.Contains(string(b), string(want.RequestDigest)) {
		t.Fatalf("the error does not name the request: %s", b)
	}
	for _, s := range meter.Summarize(rm.Recorder().Receipts()) {
		if s.Scenario == "scn-b" && s.Status != meter.StatusDiverged {
			t.Fatalf("summary %+v", s)
		}
	}
}

// TestTraceDigestGolden pins the encoding of a trace payload: a change here
// changes every recorded trace's digest and must be a new format version.
func TestTraceDigestGolden(t *testing.T) {
	entries := []meter.TraceEntry{{Scenario: "s", Seq: 1, RequestDigest: digest.FromString("r"), Request: `{"model":"m","temperature":0.5}`,
		Forwarded: true, Upstream: &meter.Exchange{Attempts: 1, Status: 200, Chunks: []string{"data: {}\n\n", "data: [DONE]\n\n"}}}}
	b, err := meter.EncodeTrace(entries)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"forwarded":true,"occurrence":0,"request":"{\"model\":\"m\",\"temperature\":0.5}","request_digest":"` + digest.FromString("r").String() +
		`","scenario":"s","seq":1,"upstream":{"attempts":1,"chunks":["data: {}\n\n","data: [DONE]\n\n"],"status":200}}` + "\n"
	if string(b) != want {
		t.Fatalf("trace line\n got %s\nwant %s", b, want)
	}
	back, err := meter.DecodeTrace(strings.NewReader(string(b)))
	if err != nil || !reflect.DeepEqual(back, entries) {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	for _, bad := range []string{
		`{"seq":1}`,               // no newline
		"{\"seq\": 1}\n",          // not canonical
		"{\"bogus\":1}\n",         // unknown field
		"{\"Seq\":1}\n",           // another case
		"{\"seq\":1}\n{\"seq\":2", // truncated
	} {
		if _, err := meter.DecodeTrace(strings.NewReader(bad)); !errors.Is(err, meter.ErrTrace) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
