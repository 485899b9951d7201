package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/feval/feval/policy"
)

// TestPolicyTry: 'feval policy try' runs a pack of each form on the sample
// session against the in-process fixture upstream and reports each route,
// call and cost; a directory that is not a pack is rejected with exit code 6.
func TestPolicyTry(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox needs Linux")
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv(envStore, filepath.Join(t.TempDir(), "store"))
	models := filepath.Join("..", "..", "fixtures", "scenarios", "models.txt")
	for _, c := range []struct {
		pack, form, route string
	}{
		{"draft-review", "policy.json", "draft-review"},
		{"py-session", "policy.py", "work"},
		{"server", "server", ""},
	} {
		var out, errb bytes.Buffer
		code := run([]string{"feval", "policy", "try", "--json",
			filepath.Join("..", "..", "fixtures", "policies", c.pack, "pack")}, strings.NewReader(""), &out, &errb)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.pack, code, errb.String())
		}
		if _, err := checkOutput(schemaDir, []string{"policy", "try", "--json"}, out.Bytes()); err != nil {
			t.Error(err)
		}
		var res policy.TryResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("%s: %v: %s", c.pack, err, out.String())
		}
		if string(res.Form) != c.form || len(res.Requests) != 4 || res.CostMicroUSD <= 0 || res.CapMicroUSD != 300_000 {
			t.Fatalf("%s: %+v", c.pack, res)
		}
		var sum int64
		for _, r := range res.Requests {
			if r.HTTPStatus != 200 || r.Failure != nil || len(r.Calls) == 0 {
				t.Errorf("%s: request %+v", c.pack, r)
			}
			for _, call := range r.Calls {
				sum += call.CostMicroUSD
			}
		}
		if sum != res.CostMicroUSD || res.Requests[1].Route != c.route {
			t.Errorf("%s: cost %d vs %d, route of the tool turn %q", c.pack, sum, res.CostMicroUSD, res.Requests[1].Route)
		}
	}
	// The reference allowlist from a file gives the same pack the same result;
	// two sources of configuration are a usage error.
	var out, errb bytes.Buffer
	if code := run([]string{"feval", "policy", "try", "--models", models, "--config", "meter.json", "x"}, strings.NewReader(""), &out, &errb); code != exitUsage ||
		!strings.Contains(errb.String(), "--task, --config and --models") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	errb.Reset()
	code := run([]string{"feval", "policy", "try", "--models", models, filepath.Join("..", "..", "fixtures", "policies")},
		strings.NewReader(""), &out, &errb)
	if code != exitRejected || !strings.Contains(errb.String(), "invalid scenario pack") || strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
