package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/cas"
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
