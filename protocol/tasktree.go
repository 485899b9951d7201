package protocol

import (
	"context"
	"fmt"
	"io/fs"
	"sync"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
)

// TaskTree is the in-memory tree of a task artifact, as LoadTaskFS returns
// it. It carries the digest of the task artifact it was read from, so that
// a protocol can keep what it parses of a task by that digest instead of
// hashing the task's files again (rollouts.LoadTask). Only LoadTaskFS makes
// one, after the store has delivered the artifact under that digest; the
// tree must not be modified.
type TaskTree struct {
	fs.FS
	task digest.Digest
}

// TaskDigest returns the digest of the task artifact the tree was read from.
func (t *TaskTree) TaskDigest() digest.Digest { return t.task }

// ReadFile, ReadDir and Stat use the tree's own (fs.ReadFileFS and so on).
func (t *TaskTree) ReadFile(name string) ([]byte, error)       { return fs.ReadFile(t.FS, name) }
func (t *TaskTree) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(t.FS, name) }
func (t *TaskTree) Stat(name string) (fs.FileInfo, error)      { return fs.Stat(t.FS, name) }

// TaskTrees shares the trees of task artifacts among the loads of one
// evaluation batch or one replay session: LoadTaskFS under a context made by
// WithTaskTrees reads and decompresses a task's tree from the store once,
// and later loads of the same digest return the same tree once the store
// resolves the digest again (so a store that no longer holds the task still
// fails the load). It is safe for concurrent use and holds at most a few
// trees (taskTreesSize), the ones used last.
type TaskTrees struct {
	mu    sync.Mutex
	order []digest.Digest
	trees map[digest.Digest]*TaskTree
}

const taskTreesSize = 2

// NewTaskTrees returns an empty TaskTrees.
func NewTaskTrees() *TaskTrees { return &TaskTrees{trees: map[digest.Digest]*TaskTree{}} }

type taskTreesKey struct{}

// WithTaskTrees returns a context under which LoadTaskFS shares trees
// through trees.
func WithTaskTrees(ctx context.Context, trees *TaskTrees) context.Context {
	return context.WithValue(ctx, taskTreesKey{}, trees)
}

func (c *TaskTrees) get(d digest.Digest) *TaskTree {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trees[d]
}

func (c *TaskTrees) put(t *TaskTree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.trees[t.task]; ok {
		return
	}
	if len(c.order) == taskTreesSize {
		delete(c.trees, c.order[0])
		c.order = c.order[1:]
	}
	c.order = append(c.order, t.task)
	c.trees[t.task] = t
}

// LoadTaskFS loads a task artifact's tree into memory (a *TaskTree), or
// returns the tree already loaded under ctx (WithTaskTrees).
func LoadTaskFS(ctx context.Context, st cas.Store, task digest.Digest) (fs.FS, error) {
	desc, err := st.Resolve(ctx, task.String())
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", task, err)
	}
	trees, _ := ctx.Value(taskTreesKey{}).(*TaskTrees)
	if trees != nil {
		if t := trees.get(desc.Digest); t != nil {
			return t, nil
		}
	}
	var rec Task
	art, err := LoadAs(ctx, st, desc, KindTask, &rec)
	if err != nil {
		return nil, err
	}
	files, err := bundle.LoadTree(ctx, st, art, bundle.DefaultLimits)
	if err != nil {
		return nil, err
	}
	t := &TaskTree{FS: bundle.TreeFS(files), task: desc.Digest}
	if trees != nil {
		trees.put(t)
	}
	return t, nil
}
