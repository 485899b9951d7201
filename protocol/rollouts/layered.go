package rollouts

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/big"
	"slices"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/gate"
	"github.com/feval/feval/protocol"
)

// layeredRows reads a submission in format 3 (docs/PROTOCOL.md §6): the rows
// index, verified by its digest and validated in full against the task, gives
// the claimed score and where each row is; a row is read by byte range and
// checked against its SHA-256 in the index before it is decoded. An audit
// reads only the sampled rows and never hashes the whole rows layer; a full
// evaluation (full) reads the rows layer whole, verifying its digest, and
// then checks every row the same way.
func layeredRows(ctx context.Context, st cas.Store, art *bundle.Loaded, task *LoadedTask, full bool) (submissionRows, error) {
	ixl, rl, rowsPath, err := protocol.RowsLayers(art)
	if err != nil {
		return submissionRows{}, err
	}
	index, err := protocol.ReadRowsIndex(ctx, st, ixl)
	if err != nil {
		return submissionRows{}, err
	}
	x, err := gate.ParseRowsIndex(index, gate.RowsIndexLimits{MaxRows: task.Spec.Rows, MaxRowBytes: task.Spec.MaxRowBytes})
	if err != nil {
		return submissionRows{}, fmt.Errorf("submission rows index: %w: %w", protocol.ErrMalformed, err)
	}
	if x.RowsSize() != rl.Size {
		return submissionRows{}, fmt.Errorf("submission rows index: %w: %w: it describes %d bytes of rows, the rows layer has %d", protocol.ErrMalformed, gate.ErrRowsIndex, x.RowsSize(), rl.Size)
	}
	meta, vs := gate.ParseRolloutSubmission(x.Meta())
	switch {
	case len(vs) > 0:
		return submissionRows{}, fmt.Errorf("%w: submission.json: %s", protocol.ErrMalformed, vs[0])
	case meta.Rows != rowsPath || meta.Claims != "":
		return submissionRows{}, fmt.Errorf("submission rows index: %w: %w: submission.json names rows %q and claims %q, the rows layer is %q",
			protocol.ErrMalformed, gate.ErrRowsIndex, meta.Rows, meta.Claims, rowsPath)
	}
	if err := x.MatchSortedIDs(task.sortedIDs()); err != nil {
		return submissionRows{}, fmt.Errorf("submission rows index: %w: %w", protocol.ErrMalformed, err)
	}
	rewards, counts := x.RewardCounts()
	rats := make([]*big.Rat, len(rewards))
	sum := new(big.Rat)
	for k, s := range rewards {
		r, err := gate.ParseReward(s) // ParseRowsIndex accepted it
		if err != nil {
			return submissionRows{}, err
		}
		rats[k] = r
		sum.Add(sum, new(big.Rat).Mul(r, new(big.Rat).SetInt64(counts[k])))
	}
	score := sum.Quo(sum, big.NewRat(int64(x.Len()), 1))
	var ra io.ReaderAt
	var closeFn func() error
	if full {
		b, err := cas.ReadAll(ctx, st, rl, rl.Size)
		if err != nil {
			return submissionRows{}, fmt.Errorf("reading rows layer: %w", err)
		}
		ra = bytes.NewReader(b)
	} else {
		f, err := cas.OpenAt(ctx, st, rl, rl.Size)
		if err != nil {
			return submissionRows{}, fmt.Errorf("opening rows layer: %w", err)
		}
		ra, closeFn = f, f.Close
	}
	var buf []byte
	get := func(id string) (row, *gate.RowError, error) {
		i, ok := x.Find(id)
		if !ok { // MatchIDs: every task id is in the index
			return row{}, nil, fmt.Errorf("task id %q has no row", id)
		}
		off, n := x.Span(i)
		claim := row{claimed: rats[0], claimedText: x.Reward(i)}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		b := buf[:n]
		if _, err := ra.ReadAt(b, off); err != nil {
			return claim, nil, fmt.Errorf("reading row %d of the rows layer: %w", i+1, err)
		}
		r, rerr := x.CheckRow(i, b)
		if rerr != nil {
			return claim, rerr, nil
		}
		k, _ := x.RewardOf(i)
		return row{response: r.Response, prompt: r.PromptTokens, completion: r.CompletionTokens, claimed: rats[k], claimedText: claim.claimedText}, nil, nil
	}
	return submissionRows{n: x.Len(), score: score, revision: meta.ModelRevision, get: get, close: closeFn}, nil
}

// sortedIDs returns the task ids in byte-wise order and their
// gate.SortedIDsDigest, made once per task (a LoadedTask is shared and never
// modified after LoadTask; see cache.go).
func (t *LoadedTask) sortedIDs() ([]string, [32]byte) {
	t.sortOnce()
	return t.sorted, t.sortedDigest
}

// idList is IDs made once per task; callers must not modify it.
func (t *LoadedTask) idList() []string {
	t.sortOnce()
	return t.ids
}

func (t *LoadedTask) sortOnce() {
	t.sortedOnce.Do(func() {
		t.ids = t.IDs()
		t.sorted = slices.Clone(t.ids)
		slices.Sort(t.sorted)
		t.sortedDigest = gate.SortedIDsDigest(t.sorted)
	})
}
