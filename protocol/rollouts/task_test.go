package rollouts_test

import (
	"bytes"
	"errors"
	"testing"
	"testing/fstest"

	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/protocol/rollouts"
)

// TestLoadTaskStrict: task files are read with exact field names; a name in
// another case or an unknown one is refused, though encoding/json alone would
// accept the first.
func TestLoadTaskStrict(t *testing.T) {
	g := fx.Generate([]byte(fx.ReferenceSeed), 3, 3)
	taskJSON, tasksJSONL, err := fx.EncodeTask(g.Spec, g.Items)
	if err != nil {
		t.Fatal(err)
	}
	load := func(tj, tl []byte) error {
		_, err := rollouts.LoadTask(fstest.MapFS{
			rollouts.TaskFile:  {Data: tj},
			rollouts.TasksFile: {Data: tl},
		})
		return err
	}
	if err := load(taskJSON, tasksJSONL); err != nil {
		t.Fatalf("the generated task: %v", err)
	}
	for name, c := range map[string]struct{ old, new string }{
		"task.json field in another case":   {`"rows":`, `"Rows":`},
		"task.json unknown field":           {`"rows":`, `"extra":1,"rows":`},
		"tasks.jsonl field in another case": {`"task_id":`, `"Task_ID":`},
	} {
		tj, tl := taskJSON, tasksJSONL
		if bytes.Contains(tj, []byte(c.old)) {
			tj = bytes.Replace(tj, []byte(c.old), []byte(c.new), 1)
		} else {
			tl = bytes.Replace(tl, []byte(c.old), []byte(c.new), 1)
		}
		if bytes.Equal(tj, taskJSON) && bytes.Equal(tl, tasksJSONL) {
			t.Fatalf("%s: nothing replaced", name)
		}
		if err := load(tj, tl); !errors.Is(err, rollouts.ErrTask) {
			t.Errorf("%s: LoadTask = %v, want ErrTask", name, err)
		}
	}
}
