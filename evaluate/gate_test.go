package evaluate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/feval/feval/fixtures/scenariotask"
)

func TestGateDispatch(t *testing.T) {
	ctx := context.Background()
	sgd := "import torch\nfrom torch.optim import Optimizer\n\n\nclass SGD(Optimizer):\n" +
		"    def __init__(self, params, lr=0.01):\n        super().__init__(params, dict(lr=lr))\n\n" +
		"    @torch.no_grad()\n    def step(self, closure=None):\n        for group in self.param_groups:\n" +
		"            for p in group[\"params\"]:\n                if p.grad is not None:\n" +
		"                    p.add_(p.grad, alpha=-group[\"lr\"])\n        return None\n"
	task := fstest.MapFS{"task.json": {Data: []byte(`{"protocol":"optimizer"}`)}}
	vs, err := Gate(ctx, "optimizer", task, fstest.MapFS{"optimizer.py": {Data: []byte(sgd)}})
	if err != nil || len(vs) != 0 {
		t.Fatalf("honest optimizer: %v %v", vs, err)
	}
	vs, err = Gate(ctx, "optimizer", task, fstest.MapFS{"optimizer.py": {Data: []byte("import os\n")}})
	if err != nil || len(vs) == 0 {
		t.Fatalf("an os import passed the optimizer gate: %v", err)
	}
	if _, err := Gate(ctx, "scenarios", fstest.MapFS{"task.json": {Data: []byte(`{}`)}}, fstest.MapFS{}); err == nil || !strings.Contains(err.Error(), "malformed scenarios task") {
		t.Fatalf("a scenarios task without its fields: %v", err)
	}
	if _, err := Gate(ctx, "rollouts", fstest.MapFS{}, fstest.MapFS{}); err == nil {
		t.Fatal("a rollouts task without task.json was accepted")
	}
	if _, err := Gate(ctx, "chess", task, fstest.MapFS{}); err == nil {
		t.Fatal("an unknown protocol was accepted")
	}
}

// TestScenarioTaskStrict: a scenarios task.json is read with exact names and
// no other fields, and the gate reads its allowlist from it.
func TestScenarioTaskStrict(t *testing.T) {
	dir := t.TempDir()
	if err := scenariotask.Generate(filepath.Join(dir, "task"), filepath.Join(dir, "hidden"), scenariotask.Config{Scenarios: []string{"09-temperature"}}); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, "task", "task.json"))
	if err != nil {
		t.Fatal(err)
	}
	task := os.DirFS(filepath.Join(dir, "task"))
	if err := ValidateTask("scenarios", task); err != nil {
		t.Fatalf("a scenarios task: %v", err)
	}
	if vs, err := Gate(context.Background(), "scenarios", task, fstest.MapFS{"SKILL.md": {Data: []byte("# s\n")},
		"policy.json": {Data: []byte(`{"schema":"feval.policy.v1","routes":[{"name":"default","mode":"single","steps":[{"model":"gpt-4o"}]}]}`)}}); err != nil || len(vs) == 0 {
		t.Fatalf("a pack routed off the allowlist: %v, %v", vs, err)
	}
	for name, in := range map[string]string{
		"models in another case": strings.Replace(string(good), `"models"`, `"Models"`, 1),
		"an unknown field":       strings.Replace(string(good), `"protocol"`, `"budget": 3, "protocol"`, 1),
		"another protocol":       strings.Replace(string(good), `"protocol": "scenarios"`, `"protocol": "rollouts"`, 1),
	} {
		if in == string(good) {
			t.Fatalf("%s: the edit did not apply", name)
		}
		path := filepath.Join(dir, "task", "task.json")
		if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := ValidateTask("scenarios", task); err == nil {
			t.Errorf("%s was accepted", name)
		}
		if err := os.WriteFile(path, good, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
