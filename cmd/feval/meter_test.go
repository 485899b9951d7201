package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/fixtures/upstream"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/protocol"
)

// serveMeter runs 'feval meter serve' logic until calls returns, then stops it
// as a signal would.
func serveMeter(t *testing.T, st *storeOptions, k *keyOptions, o meterServeOptions, calls func(base string)) meterServeResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &appEnv{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	addr := make(chan string, 1)
	type outcome struct {
		res meterServeResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := runMeterServe(ctx, a, st, k, o, func(s string) { addr <- s })
		done <- outcome{res, err}
	}()
	select {
	case s := <-addr:
		calls("http://" + s + "/v1")
		cancel()
	case r := <-done:
		t.Fatalf("meter serve stopped before listening: %v", r.err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.res
}

func TestMeterServeRecordAndReplay(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv(envStore, filepath.Join(dir, "store"))
	t.Setenv(envPassword, "pw")
	l, err := cas.Init(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	priv, _, err := bundle.GenerateKey([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "me.key")
	if err := os.WriteFile(keyPath, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := bundle.LoadSigner(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	subDir := filepath.Join(dir, "pack")
	os.MkdirAll(subDir, 0o755)
	os.WriteFile(filepath.Join(subDir, "SKILL.md"), []byte("a pack\n"), 0o644)
	packed, err := bundle.PackPath(context.Background(), l, signer, subDir, bundle.PackOptions{Kind: "submission"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}

	up := upstream.New(upstream.Options{})
	url, stop, err := upstream.Start(up)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	names := []string{"kimi-k2-instruct", "gpt-oss-120b"}
	cfg, _ := json.Marshal(meter.ReferenceConfig(names, "http://upstream.invalid/v1"))
	cfgPath := filepath.Join(dir, "meter.json")
	os.WriteFile(cfgPath, cfg, 0o644)

	// The recording run reads its configuration from a signed scenarios task.
	taskDir := filepath.Join(dir, "task")
	os.MkdirAll(taskDir, 0o755)
	os.WriteFile(filepath.Join(taskDir, meter.TaskConfigFile), cfg, 0o644)
	task, err := protocol.CreateTask(context.Background(), l, signer, "scenarios", taskDir, bundle.EpochCreated)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	st := &storeOptions{Path: filepath.Join(dir, "store")}
	k := &keyOptions{Path: keyPath}
	var answers []string
	calls := func(base string) {
		for i, body := range []string{
			`{"model":"kimi-k2-instruct","messages":[{"role":"user","content":"one"}]}`,
			`{"model":"gpt-oss-120b","messages":[{"role":"user","content":"two"}],"stream":true}`,
			`{"model":"llama","messages":[{"role":"user","content":"three"}]}`,
		} {
			req, _ := http.NewRequest("POST", base+"/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(meter.ScenarioHeader, []string{"s1", "s1", "s2"}[i])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers = append(answers, string(b))
		}
	}
	rec := serveMeter(t, st, k, meterServeOptions{Task: task.Digest.String(), Listen: "127.0.0.1:0", Upstream: url,
		Record: true, Subject: packed.Artifact.Digest.String()}, calls)
	if rec.Artifacts == nil || len(rec.Summaries) != 2 || rec.Summaries[0].Calls != 2 || rec.Summaries[0].Status != meter.StatusOK ||
		rec.Summaries[1].Outcomes[meter.OutcomeRefusedModel] != 1 {
		t.Fatalf("result %+v", rec)
	}
	recorded := answers
	answers = nil
	stop() // replay needs no upstream

	// Over a Unix socket this time.
	sock := filepath.Join(dir, "m2.sock")
	rep := serveMeter(t, st, k, meterServeOptions{ConfigFile: cfgPath, Listen: "unix:" + sock,
		Replay: rec.Artifacts.Trace.Digest.String(), Record: true, Subject: packed.Artifact.Digest.String()}, func(string) {
		orig := http.DefaultClient
		http.DefaultClient = unixHTTPClient(sock)
		defer func() { http.DefaultClient = orig }()
		calls("http://meter/v1")
	})
	if !rep.Replay || len(rep.Divergences) != 0 || strings.Join(answers, "\n") != strings.Join(recorded, "\n") {
		t.Fatalf("replay %+v\nanswers %q\nrecorded %q", rep, answers, recorded)
	}
	// What --json prints is what its schema says.
	for _, res := range []meterServeResult{rec, rep} {
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkOutput(schemaDir, []string{"meter", "serve", "--json"}, b); err != nil {
			t.Error(err)
		}
	}
	if rep.Artifacts.Receipts.Digest != rec.Artifacts.Receipts.Digest || rep.Artifacts.Trace.Digest != rec.Artifacts.Trace.Digest {
		t.Fatalf("replayed recording differs: %+v vs %+v", rep.Artifacts, rec.Artifacts)
	}
}

func TestMeterServeRejectsBadFlags(t *testing.T) {
	for _, o := range []meterServeOptions{
		{},
		{Task: "t", ConfigFile: "c"},
		{ConfigFile: "c", Record: true},
		{ConfigFile: "c", Subject: "s"},
		{ConfigFile: "c", Scenario: "../x"},
	} {
		var ue *usageError
		if err := o.check(); !errors.As(err, &ue) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "meter.json")
	os.WriteFile(bad, []byte(`{"format":"feval.meter.v1","models":[]}`), 0o644)
	_, err := runMeterServe(context.Background(), &appEnv{stderr: &bytes.Buffer{}}, &storeOptions{}, &keyOptions{},
		meterServeOptions{ConfigFile: bad, Listen: "127.0.0.1:0"}, func(string) {})
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "models") {
		t.Fatalf("bad config: %v (exit %d)", err, exitCode(err))
	}
	cfg, _ := json.Marshal(meter.ReferenceConfig([]string{"m"}, "http://127.0.0.1:1/v1"))
	os.WriteFile(bad, cfg, 0o644)
	_, err = runMeterServe(context.Background(), &appEnv{stderr: &bytes.Buffer{}}, &storeOptions{}, &keyOptions{},
		meterServeOptions{ConfigFile: bad, Listen: "0.0.0.0:0"}, func(string) {})
	if exitCode(err) != exitUsage || !errors.Is(err, meter.ErrNotLoopback) && !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("non-loopback listen: %v", err)
	}
}

func unixHTTPClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
}
