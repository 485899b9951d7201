package rollouts_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/feval/feval/gate"
	"github.com/feval/feval/protocol/rollouts"
)

// TestGenerateResumes: a generation stopped part way and left with a partial
// last line resumes to the very bytes of an uninterrupted one; a directory of
// another generation is refused untouched.
func TestGenerateResumes(t *testing.T) {
	e := newModelEnv(t, 1<<20)
	want, err := os.ReadFile(e.rows)
	if err != nil {
		t.Fatal(err)
	}
	wantSub, err := os.ReadFile(filepath.Join(filepath.Dir(e.rows), gate.RolloutSubmissionFile))
	if err != nil {
		t.Fatal(err)
	}
	newGen := func(miner string) *rollouts.Generator {
		g := &rollouts.Generator{Task: e.loaded, Model: e.m, Text: e.m.ResponseText, Workers: 1,
			Spec: rollouts.GenerateSpec{Task: e.task, Round: e.round, Model: e.model.Digest, Miner: miner, Sampling: e.loaded.Spec.Model.Sampling}}
		return g
	}
	dir := filepath.Join(e.dir, "resumed")
	ctx, cancel := context.WithCancel(e.ctx)
	g := newGen(e.entry.Miner)
	g.Progress = func(done int) {
		if done == 7 {
			cancel()
		}
	}
	if _, err := g.Run(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v", err)
	}
	// A kill mid-write: a partial line and a temporary file.
	f, err := os.OpenFile(filepath.Join(dir, rollouts.GeneratedRowsFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"task_id":"math-0`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(dir, ".submission.json-123"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Another miner's generation does not touch it.
	before, _ := os.ReadFile(filepath.Join(dir, rollouts.GeneratedRowsFile))
	if _, err := newGen("other").Run(e.ctx, dir); !errors.Is(err, rollouts.ErrGenerate) {
		t.Fatalf("another generation in the directory: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, rollouts.GeneratedRowsFile)); string(after) != string(before) {
		t.Fatal("a refused generation changed the rows")
	}

	res, err := newGen(e.entry.Miner).Run(e.ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 7 || res.Generated != len(e.loaded.Items)-7 {
		t.Errorf("resumed %d and generated %d rows, want 7 and %d", res.Resumed, res.Generated, len(e.loaded.Items)-7)
	}
	got, _ := os.ReadFile(filepath.Join(dir, rollouts.GeneratedRowsFile))
	gotSub, _ := os.ReadFile(filepath.Join(dir, gate.RolloutSubmissionFile))
	if string(got) != string(want) || string(gotSub) != string(wantSub) {
		t.Fatal("the resumed generation differs from the uninterrupted one")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("the submission holds %d files, want rows.jsonl and submission.json", len(ents))
	}
	// Complete: not written again.
	if _, err := newGen(e.entry.Miner).Run(e.ctx, dir); !errors.Is(err, rollouts.ErrGenerate) {
		t.Errorf("generating into a complete submission: %v", err)
	}

	// A task without a model section has nothing to generate.
	plain, err := rollouts.LoadTask(os.DirFS(filepath.Join(e.dir, "task")))
	if err != nil {
		t.Fatal(err)
	}
	g = newGen(e.entry.Miner)
	g.Task = plain
	if _, err := g.Run(e.ctx, filepath.Join(e.dir, "plain")); !errors.Is(err, rollouts.ErrGenerate) {
		t.Errorf("generating for a task without a model: %v", err)
	}
}
