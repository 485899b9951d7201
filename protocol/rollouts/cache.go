package rollouts

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/opencontainers/go-digest"
)

// A validator evaluates every submission of a round against one task, and the
// reveal checks gate every reveal against it: parsing the task's 10,000 items
// once per process instead of once per use is what keeps an audit small next
// to a full evaluation (docs/PERFORMANCE.md). Two caches keep parsed tasks:
//
//   - by content (LoadTask): the key is the SHA-256 of task.json and of
//     tasks.jsonl, so a hit is the parse of the very same bytes;
//   - by task digest (Decide): used only after the store has resolved the
//     digest, so a verdict never depends on a task its store does not hold.
//
// A LoadedTask is never modified after it is parsed, so sharing it is safe.
// Each cache keeps the few tasks used last (a process rarely needs more than
// one).

const taskCacheSize = 4

type taskCache struct {
	mu      sync.Mutex
	keys    []string
	entries map[string]*LoadedTask
}

var (
	tasksByContent = &taskCache{entries: map[string]*LoadedTask{}}
	tasksByDigest  = &taskCache{entries: map[string]*LoadedTask{}}
)

func (c *taskCache) get(key string) *LoadedTask {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[key]
}

func (c *taskCache) put(key string, t *LoadedTask) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; ok {
		return
	}
	if len(c.keys) == taskCacheSize {
		delete(c.entries, c.keys[0])
		c.keys = c.keys[1:]
	}
	c.keys = append(c.keys, key)
	c.entries[key] = t
}

func contentKey(taskJSON, tasksJSONL []byte) string {
	a, b := sha256.Sum256(taskJSON), sha256.Sum256(tasksJSONL)
	return fmt.Sprintf("%x%x", a, b)
}

// loadTaskArtifact returns the parsed task a task artifact holds, from the
// cache when the store resolves its digest.
func loadTaskArtifact(ctx context.Context, st cas.Store, task digest.Digest) (*LoadedTask, error) {
	if t := tasksByDigest.get(task.String()); t != nil {
		if _, err := st.Resolve(ctx, task.String()); err != nil {
			return nil, fmt.Errorf("task %s: %w", task, err)
		}
		return t, nil
	}
	fsys, err := protocol.LoadTaskFS(ctx, st, task)
	if err != nil {
		return nil, err
	}
	t, err := LoadTask(fsys)
	if err != nil {
		return nil, err
	}
	tasksByDigest.put(task.String(), t)
	return t, nil
}

// ForgetTasks empties the parsed-task caches (for measuring a process's first
// evaluation).
func ForgetTasks() {
	for _, c := range []*taskCache{tasksByContent, tasksByDigest} {
		c.mu.Lock()
		c.keys, c.entries = nil, map[string]*LoadedTask{}
		c.mu.Unlock()
	}
}
