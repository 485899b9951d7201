package evaluate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// ErrTaskMismatch reports a reveal that belongs to another task than the one the
// validator named.
var ErrTaskMismatch = errors.New("the reveal belongs to another task")

// ErrUnsupported reports an evaluation this feval cannot perform: the audit of
// an accepted reveal of a protocol without a verdict format yet.
var ErrUnsupported = errors.New("evaluating this protocol is not supported yet: only its reveal checks run")

// RejectedError is a reveal that failed a reveal check, in a round whose
// protocol has no verdict format: the check's outcome is the result.
type RejectedError struct {
	Reveal digest.Digest
	Entry  protocol.Entry
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("reveal %s rejected (%s): %s", e.Reveal, e.Entry.Reason, e.Entry.Detail)
}

// Request is one evaluation a validator asks for.
type Request struct {
	Reveal string // digest, prefix or tag of the reveal (local store or Source)
	Task   string // digest, prefix or tag the reveal must belong to ("" = any)
	Source cas.Store
	Obs    protocol.Observation
	// Options configure the protocol drivers.
	Options Options
	Created string
}

// Outcome is a signed verdict and where it is.
type Outcome struct {
	Verdict  Verdict        `json:"record"` // the verdict record
	Artifact cas.Descriptor `json:"artifact"`
	// Evidence are the artifacts the verdict names beyond the shared inputs
	// (checkpoints), to publish with it.
	Evidence []cas.Descriptor `json:"evidence"`
}

// Evaluate runs a validator's evaluation of one reveal: it collects the round
// from the source, records first-seen times, applies the reveal checks, hands
// the reveal to its protocol's Driver, and writes the verdict signed by s,
// with the submission as its subject. It is EvaluateAll of one reveal.
func Evaluate(ctx context.Context, l *cas.Layout, s *bundle.Signer, req Request) (Outcome, error) {
	rs, err := EvaluateAll(ctx, l, func() (*bundle.Signer, error) { return s, nil }, Batch{
		Reveals: []string{req.Reveal}, Task: req.Task, Source: req.Source, Obs: req.Obs, Options: req.Options, Created: req.Created})
	if err != nil {
		return Outcome{}, err
	}
	if rs[0].Outcome == nil {
		return Outcome{}, rs[0].Err
	}
	return *rs[0].Outcome, rs[0].Err
}

// nextSequence returns the validator's next verdict sequence number, kept in the
// store's private state under the store lock.
func nextSequence(l *cas.Layout) (uint64, error) {
	unlock, err := l.LockExclusive()
	if err != nil {
		return 0, err
	}
	defer unlock()
	path := filepath.Join(l.Root(), cas.PrivateDir, "sequence")
	var n uint64
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, err
	default:
		if n, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err != nil {
			return 0, fmt.Errorf("damaged sequence file %s: %w", path, err)
		}
	}
	n++
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return 0, err
	}
	return n, cas.WriteFileAtomic(path, []byte(strconv.FormatUint(n, 10)+"\n"))
}

// LoadVerdict reads a verdict artifact of any protocol and the fields every
// verdict shares.
func LoadVerdict(ctx context.Context, st cas.Store, desc ocispec.Descriptor) (*bundle.Loaded, protocol.VerdictHead, error) {
	art, err := bundle.Load(ctx, st, desc)
	if err != nil {
		return nil, protocol.VerdictHead{}, err
	}
	if art.Kind != protocol.KindVerdict {
		return nil, protocol.VerdictHead{}, fmt.Errorf("%s is a %s, not a verdict: %w", desc.Digest, art.Kind, protocol.ErrMalformed)
	}
	h, err := protocol.ParseVerdictHead(art.Record)
	if err != nil {
		return nil, h, err
	}
	return art, h, nil
}
