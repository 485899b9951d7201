package cas_test

import (
	"context"
	"sync"
	"testing"

	"github.com/feval/feval/cas"
)

type countProgress struct {
	mu           sync.Mutex
	total, added int64
	starts       int
}

func (p *countProgress) Start(n int64) { p.mu.Lock(); p.total += n; p.starts++; p.mu.Unlock() }
func (p *countProgress) Add(n int64)   { p.mu.Lock(); p.added += n; p.mu.Unlock() }
func (p *countProgress) Done()         {}

// TestCopyReportsToContextProgress: with no Progress in its options, Copy
// reports to the one the context carries; an explicit one wins.
func TestCopyReportsToContextProgress(t *testing.T) {
	src := newLayout(t)
	d := artifact(t, src, "application/vnd.test", "payload bytes", nil)

	fromCtx := &countProgress{}
	ctx := cas.WithProgress(context.Background(), fromCtx)
	res, err := cas.Copy(ctx, src, newLayout(t), d, cas.CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fromCtx.starts != 1 || fromCtx.total == 0 || fromCtx.added != res.Bytes {
		t.Errorf("context progress saw %+v, copy moved %d bytes", fromCtx, res.Bytes)
	}

	explicit, unused := &countProgress{}, &countProgress{}
	ctx = cas.WithProgress(context.Background(), unused)
	if _, err := cas.Copy(ctx, src, newLayout(t), d, cas.CopyOptions{Progress: explicit}); err != nil {
		t.Fatal(err)
	}
	if explicit.starts != 1 || unused.starts != 0 {
		t.Errorf("explicit %+v, context %+v: the option must win", explicit, unused)
	}
	if cas.ProgressFrom(context.Background()) != cas.NoProgress {
		t.Error("a bare context carries a progress")
	}
}
