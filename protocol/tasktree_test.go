package protocol_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/roundtest"
	"github.com/feval/feval/protocol"
)

// TestTaskTreesShared: under WithTaskTrees a task's tree is read once and
// shared; the store must still hold the task; without it each load reads
// the store again.
func TestTaskTreesShared(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "task.txt"), []byte("the task\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	task, err := protocol.CreateTask(ctx, l, roundtest.NewSigner(t), "optimizer", dir, "")
	if err != nil {
		t.Fatal(err)
	}
	shared := protocol.WithTaskTrees(ctx, protocol.NewTaskTrees())
	a, err := protocol.LoadTaskFS(shared, l, task.Digest)
	if err != nil {
		t.Fatal(err)
	}
	b, err := protocol.LoadTaskFS(shared, l, task.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("two loads under one TaskTrees gave two trees")
	}
	if tt, ok := a.(*protocol.TaskTree); !ok || tt.TaskDigest() != task.Digest {
		t.Errorf("tree %T does not name its task %s", a, task.Digest)
	}
	if got, err := fs.ReadFile(a, "task.txt"); err != nil || string(got) != "the task\n" {
		t.Errorf("task.txt = %q, %v", got, err)
	}
	c, err := protocol.LoadTaskFS(ctx, l, task.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Error("a load without TaskTrees gave the shared tree")
	}
	empty, err := cas.Init(filepath.Join(t.TempDir(), "empty"))
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if _, err := protocol.LoadTaskFS(shared, empty, task.Digest); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("a store without the task gave %v, want ErrNotFound", err)
	}
}
