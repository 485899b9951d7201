package evaluate

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"
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
	if _, err := Gate(ctx, "scenarios", fstest.MapFS{"task.json": {Data: []byte(`{}`)}}, fstest.MapFS{}); err == nil || !strings.Contains(err.Error(), "allowed models") {
		t.Fatalf("a scenarios task without models: %v", err)
	}
	if _, err := Gate(ctx, "rollouts", fstest.MapFS{}, fstest.MapFS{}); err == nil {
		t.Fatal("a rollouts task without task.json was accepted")
	}
	if _, err := Gate(ctx, "chess", task, fstest.MapFS{}); err == nil {
		t.Fatal("an unknown protocol was accepted")
	}
}

// TestScenarioTaskStrict: a scenarios task.json is read with exact names.
func TestScenarioTaskStrict(t *testing.T) {
	good := `{"protocol": "scenarios", "models": ["deepseek-v3.1"]}`
	if err := ValidateTask("scenarios", fstest.MapFS{"task.json": {Data: []byte(good)}}); err != nil {
		t.Fatalf("a scenarios task: %v", err)
	}
	for name, in := range map[string]string{
		"models in another case": `{"protocol": "scenarios", "Models": ["deepseek-v3.1"]}`,
		"an unknown field":       `{"protocol": "scenarios", "models": ["deepseek-v3.1"], "budget": 3}`,
		"another protocol":       `{"protocol": "rollouts", "models": ["deepseek-v3.1"]}`,
	} {
		if err := ValidateTask("scenarios", fstest.MapFS{"task.json": {Data: []byte(in)}}); err == nil {
			t.Errorf("%s: %s was accepted", name, in)
		}
	}
}
