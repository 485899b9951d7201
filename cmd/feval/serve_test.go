package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/web"
	"github.com/urfave/cli/v2"
)

// TestServeAddr: the viewer binds to loopback unless told otherwise.
func TestServeAddr(t *testing.T) {
	for _, c := range []struct {
		addr  string
		allow bool
		ok    bool
	}{
		{"127.0.0.1:8080", false, true},
		{"localhost:0", false, true},
		{"[::1]:8080", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"192.0.2.7:80", false, false},
		{"0.0.0.0:8080", true, true},
		{"8080", false, false},
	} {
		err := checkServeAddr(c.addr, c.allow)
		if (err == nil) != c.ok {
			t.Errorf("%s (allow %v): %v", c.addr, c.allow, err)
		}
		if err != nil && exitCode(err) != exitUsage {
			t.Errorf("%s: exit code %d, want usage", c.addr, exitCode(err))
		}
	}
}

// TestServe runs 'feval serve' on a free loopback port: it prints the URL,
// serves the pages and their JSON, refuses a foreign Host, and stops when
// its context ends.
func TestServe(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	l, err := cas.Init(store)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, serveConfig{addr: "127.0.0.1:0", store: store}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/") {
		t.Fatalf("printed %q", line)
	}
	go io.Copy(io.Discard, pr)
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url + "api/rounds")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Rounds []json.RawMessage `json:"rounds"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || body.Rounds == nil {
		t.Fatalf("GET /api/rounds: %d %v %+v", resp.StatusCode, err, body)
	}
	if resp.Header.Get("Content-Security-Policy") == "" {
		t.Error("no Content-Security-Policy")
	}
	req, _ := http.NewRequest("GET", url+"rounds", nil)
	req.Host = "rebound.example:8080"
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host got %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("serve ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// TestServeFrontierFlags: the frontier page takes a runs file with its
// baseline, or an optimizer round; the serve command's own --round (rounds
// to gather) does not count as either, and mixed or partial flags are usage
// errors.
func TestServeFrontierFlags(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs.json")
	if err := os.WriteFile(runs, []byte(`[{"submission":"sha256:`+strings.Repeat("ab", 32)+`","author":"a","run_index":0,"loss_micro_nats":1900000,"at_sec":60}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) (*web.Frontier, error) {
		var f *web.Frontier
		var err error
		cmd := serveCommand(&appEnv{stdout: io.Discard, stderr: io.Discard})
		cmd.Action = func(c *cli.Context) error { f, err = serveFrontier(c); return nil }
		app := &cli.App{Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard}
		if rerr := app.Run(append([]string{"feval", "serve"}, args...)); rerr != nil {
			t.Fatalf("%v: %v", args, rerr)
		}
		return f, err
	}
	f, err := parse("--events", runs, "--baseline", "2000000", "--round", "r1", "--from", "localhost:5000/x")
	if err != nil || f == nil || f.BaselineMicroNats != 2000000 || len(f.Runs) != 1 || f.Round != "" {
		t.Fatalf("--events with --round to gather: %+v, %v", f, err)
	}
	if f, err := parse(); f != nil || err != nil {
		t.Errorf("no frontier flag: %+v, %v", f, err)
	}
	for _, args := range [][]string{
		{"--events", runs},
		{"--baseline", "5"},
		{"--events", runs, "--baseline", "5", "--frontier-round", "r1"},
		{"--launch", "2026-12-01T00:00:00Z"},
		{"--rules", runs},
	} {
		if _, err := parse(args...); exitCode(err) != exitUsage {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	f, err = parse("--frontier-round", "r1")
	if err != nil || f == nil || f.Runs != nil {
		t.Errorf("--frontier-round: %+v, %v", f, err)
	}
}

// TestAggregateTrust: with no key named and none of one's own, an aggregate
// refuses as a usage error; a named key file that is missing is reported as
// not found, by name.
func TestAggregateTrust(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "validator.pub")
	_, err := (&trustOptions{own: missing}).LoadForAggregate()
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "no trusted key") {
		t.Errorf("no key at all: %v (exit %d), want the usage refusal", err, exitCode(err))
	}
	_, err = (&trustOptions{Keys: []string{missing}}).LoadForAggregate()
	if exitCode(err) != exitNotFound || !strings.Contains(err.Error(), missing) {
		t.Errorf("a named key file missing: %v (exit %d), want not found naming it", err, exitCode(err))
	}
	if _, err := serveTrusted(&trustOptions{Keys: []string{missing}}); exitCode(err) != exitNotFound {
		t.Errorf("serve with a named key file missing: %v", err)
	}
}
