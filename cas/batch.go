package cas

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
)

// syncBatch collects the blobs a Copy writes into a local layout: each is
// written in full under a temporary name as it arrives, and commit then
// fsyncs them all at once and only then gives each its name. Syncing them
// together lets the filesystem make them durable in one journal commit
// instead of one commit per blob spread over the transfer (up to maxHeld
// blobs; the rest sync on their own). The rules of
// Layout.ingest hold: a blob's name only ever holds its complete, durable
// bytes, and the directory is synced before index.json may list it.
type syncBatch struct {
	mu   sync.Mutex
	held []heldBlob
	done bool // committed or discarded: later writes sync on their own
}

// heldBlob is a blob written under a temporary name, not yet synced.
type heldBlob struct {
	tmp    *os.File
	target string
}

type batchKey struct{}

// withBatch returns ctx carrying b: a layout's Push under it hands b the
// blob instead of syncing and naming it.
func withBatch(ctx context.Context, b *syncBatch) context.Context {
	return context.WithValue(ctx, batchKey{}, b)
}

func batchOf(ctx context.Context) *syncBatch {
	b, _ := ctx.Value(batchKey{}).(*syncBatch)
	return b
}

// maxHeld bounds the files a batch holds open; blobs beyond it sync and are
// named on their own, as outside a batch.
const maxHeld = 64

// hold takes tmp (written in full, verified, open) to be named target at
// commit; it reports false once the batch has ended or is full, and the
// caller then syncs and names the blob itself.
func (b *syncBatch) hold(tmp *os.File, target string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done || len(b.held) >= maxHeld {
		return false
	}
	b.held = append(b.held, heldBlob{tmp, target})
	return true
}

// take ends the batch and returns what it holds.
func (b *syncBatch) take() []heldBlob {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = true
	h := b.held
	b.held = nil
	return h
}

// commit fsyncs every held blob at once, then renames each into place and
// marks its directory for l's next Flush or Close. On failure nothing held
// is named and every temporary file is removed.
func (b *syncBatch) commit(l *Layout) error {
	held := b.take()
	errs := make([]error, len(held))
	var wg sync.WaitGroup
	for i, h := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.tmp.Sync()
		}()
	}
	wg.Wait()
	err := errors.Join(errs...)
	for _, h := range held {
		if cerr := h.tmp.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(h.tmp.Name(), h.target)
		}
		if err != nil {
			os.Remove(h.tmp.Name())
			continue
		}
		l.markDirty(filepath.Dir(h.target))
	}
	return err
}

// discard ends the batch, removing every held blob.
func (b *syncBatch) discard() {
	for _, h := range b.take() {
		h.tmp.Close()
		os.Remove(h.tmp.Name())
	}
}
