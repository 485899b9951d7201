package evaluate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Batch is a validator's evaluation of several reveals in one process: the
// reveals named, or every reveal that answers a commitment of a round.
type Batch struct {
	// Reveals are digests, prefixes or tags of reveals (local store or
	// Source), evaluated in this order.
	Reveals []string
	// Round is a digest, prefix or tag of a round: with no Reveals, every
	// reveal that answers one of its commitments (RoundReport.Entries) is
	// evaluated, in commitment order. Reveals that do not answer their
	// commitment (RoundReport.Extra: invalid openings anyone could push,
	// double reveals) are not: evaluate one by name to get its verdict.
	Round   string
	Task    string // digest, prefix or tag every reveal must belong to ("" = any)
	Source  cas.Store
	Obs     protocol.Observation
	Options Options
	Created string
}

// Result is the outcome of one reveal of a batch: its verdict (Outcome), or
// the error that kept it from having one (Err). A RejectedError (a reveal of
// a protocol without a verdict format that failed its checks) leaves Outcome
// nil.
type Result struct {
	Reveal  string // as named, or the digest when the batch named a round
	Outcome *Outcome
	Err     error
}

// EvaluateAll evaluates the reveals of b, each as Evaluate would alone and
// in the same order (the same verdict bytes, sequence numbers following each
// other), paying once what they share: each round is collected and its
// reveal checks run once for all of its reveals (CheckRoundFor: only the
// reveals evaluated are gated), and a task is read from the store and
// parsed once.
//
// signer returns the signing key; it may still be decrypting when
// EvaluateAll is called, and is waited for only before the first write (with
// a local source, after the reveal checks), so nothing is written if it
// fails. The error is for the batch as a whole (the key, the round, the
// store); a reveal's own failure is its Result's Err. Results are in the
// order of b.Reveals, or in commitment order for a round.
func EvaluateAll(ctx context.Context, l *cas.Layout, signer func() (*bundle.Signer, error), b Batch) ([]Result, error) {
	// The round checks' gate and each decision share one tree of the task.
	ctx = protocol.WithTaskTrees(ctx, protocol.NewTaskTrees())
	src := b.Source
	if src == nil {
		src = l
	}
	local := src == cas.Store(l)
	var (
		s      *bundle.Signer
		keyErr error
		waited bool
	)
	key := func() error {
		if !waited {
			s, keyErr = signer()
			waited = true
		}
		return keyErr
	}
	// fail reports a failure of the batch; a bad key comes first, as it
	// would have had the key been decrypted before anything else.
	fail := func(err error) error {
		if kerr := key(); kerr != nil {
			return kerr
		}
		return err
	}
	// fetch resolves a reference in the local store, else in the source,
	// copying it (and what it links to) in once the key is known good.
	fetch := func(ref string, opts cas.CopyOptions) (ocispec.Descriptor, error) {
		d, err := cas.ResolveRef(ctx, l, ref)
		if !errors.Is(err, cas.ErrNotFound) || local {
			return d, err
		}
		if d, err = cas.ResolveRef(ctx, src, ref); err != nil {
			return d, err
		}
		if err := key(); err != nil {
			return d, err
		}
		_, err = cas.Copy(ctx, src, l, d, opts)
		return d, err
	}
	var task digest.Digest
	if b.Task != "" {
		d, err := cas.ResolveRef(ctx, l, b.Task)
		if err != nil {
			return nil, fail(fmt.Errorf("task %s: %w", b.Task, err))
		}
		task = d.Digest
	}

	type item struct {
		Result
		desc  ocispec.Descriptor
		refs  protocol.Refs
		round protocol.Round
	}
	var items []*item
	var rounds []ocispec.Descriptor // in order of first use
	want := map[digest.Digest][]digest.Digest{}
	addRound := func(rd ocispec.Descriptor) {
		if _, ok := want[rd.Digest]; !ok {
			rounds = append(rounds, rd)
			want[rd.Digest] = []digest.Digest{}
		}
	}
	if b.Round != "" {
		if len(b.Reveals) > 0 {
			return nil, errors.New("a batch names reveals or a round, not both")
		}
		rd, err := fetch(b.Round, cas.CopyOptions{})
		if err != nil {
			return nil, fail(fmt.Errorf("round %s: %w", b.Round, err))
		}
		var r protocol.Round
		if _, err := protocol.LoadAs(ctx, l, rd, protocol.KindRound, &r); err != nil {
			return nil, fail(fmt.Errorf("round %s: %w", b.Round, err))
		}
		if task != "" && r.Task != task {
			return nil, fail(fmt.Errorf("%w: round %s is for task %s, not %s", ErrTaskMismatch, rd.Digest, r.Task, task))
		}
		addRound(rd)
		want[rd.Digest] = nil // every reveal of the round
	}
	for _, name := range b.Reveals {
		it := &item{Result: Result{Reveal: name}}
		items = append(items, it)
		d, err := fetch(name, cas.CopyOptions{Subjects: true, Referrers: true, Siblings: true})
		if err != nil {
			if waited && keyErr != nil {
				return nil, keyErr
			}
			it.Err = fmt.Errorf("reveal %s: %w", name, err)
			continue
		}
		it.desc = d
		if it.refs, it.round, it.Err = rollouts.ResolveRound(ctx, l, d); it.Err != nil {
			continue
		}
		if task != "" && it.refs.Task != task {
			it.Err = fmt.Errorf("%w: reveal %s is for task %s, not %s", ErrTaskMismatch, d.Digest, it.refs.Task, task)
			continue
		}
		addRound(it.refs.Round)
		want[it.refs.Round.Digest] = append(want[it.refs.Round.Digest], d.Digest)
	}

	// The reveal checks, once per round.
	reports := map[digest.Digest]protocol.RoundReport{}
	pre := map[digest.Digest]*decided{}
	for _, rd := range rounds {
		var seen map[digest.Digest]protocol.Seen
		var observed []digest.Digest
		var err error
		if local {
			// Nothing to copy: check against the readings Collect would
			// record, while the key is decrypted, and record them after.
			seen, observed, err = protocol.Preview(ctx, l, rd, b.Obs)
		} else if err = key(); err == nil {
			seen, err = protocol.Collect(ctx, src, l, rd, b.Obs)
		}
		if err != nil {
			return nil, fail(err)
		}
		rep, err := protocol.CheckRoundFor(ctx, l, rd, seen, b.Obs, Gate, want[rd.Digest])
		if err != nil {
			return nil, fail(err)
		}
		if local {
			if !waited {
				// The verdicts need nothing of the key but their
				// signature: computed now, while it is decrypted.
				precompute(ctx, l, b, rep, want[rd.Digest], pre)
			}
			if err := key(); err != nil {
				return nil, err
			}
			recorded, err := protocol.Observe(l, observed, b.Obs)
			if err != nil {
				return nil, err
			}
			if !maps.Equal(recorded, seen) { // another process observed some meanwhile
				if rep, err = protocol.CheckRoundFor(ctx, l, rd, recorded, b.Obs, Gate, want[rd.Digest]); err != nil {
					return nil, err
				}
			}
		}
		reports[rd.Digest] = rep
	}
	if b.Round != "" {
		rd := rounds[0]
		for _, e := range reports[rd.Digest].Entries {
			if e.Reveal == "" {
				continue
			}
			it := &item{Result: Result{Reveal: e.Reveal.String()}}
			items = append(items, it)
			if it.desc, it.Err = l.Resolve(ctx, e.Reveal.String()); it.Err == nil {
				it.refs, it.round, it.Err = rollouts.ResolveRound(ctx, l, it.desc)
			}
		}
	}
	if err := key(); err != nil {
		return nil, err
	}

	out := make([]Result, len(items))
	var unlisted []int // results whose verdicts index.json does not list yet
	steps := cas.StepsFrom(ctx)
	steps.Begin("reveal", len(items))
	for i, it := range items {
		if i > 0 {
			steps.Step("reveal")
		}
		if it.Err == nil {
			rep := reports[it.refs.Round.Digest]
			var o Outcome
			var listed bool
			o, listed, it.Err = decide(ctx, l, s, b, it.desc, it.round, rep, pre[it.desc.Digest])
			if it.Err == nil {
				it.Outcome = &o
				if !listed {
					unlisted = append(unlisted, i)
				}
			}
		}
		out[i] = it.Result
	}
	if len(items) > 0 {
		steps.Step("reveal")
	}
	if len(unlisted) > 0 {
		if err := l.Flush(); err != nil {
			for _, i := range unlisted {
				out[i].Outcome, out[i].Err = nil, err
			}
		}
	}
	return out, nil
}

// decided is a verdict computed before it could be written (precompute),
// with the entry and references it was computed from.
type decided struct {
	entry protocol.Entry
	refs  protocol.Refs
	v     Verdict
}

// maxPrecomputed bounds the verdicts precompute holds, so that a batch's
// memory does not grow with its reveals (a full rollouts verdict of 10,000
// rows is a few MB): about as many audits as the key's decryption lasts.
var maxPrecomputed = 16 // a variable for tests

// precompute computes, into pre, the verdicts of the first reveals of rep in
// want (nil: every reveal) whose driver is a numberedDriver, as decide would
// with rep, until pre holds maxPrecomputed: nothing is written and nothing
// is reported (decide computes again what fails here, and reports it).
func precompute(ctx context.Context, l *cas.Layout, b Batch, rep protocol.RoundReport, want []digest.Digest, pre map[digest.Digest]*decided) {
	wanted := func(d digest.Digest) bool { return want == nil || slices.Contains(want, d) }
	for _, e := range rep.Entries {
		if len(pre) >= maxPrecomputed {
			return
		}
		if e.Reveal == "" || !wanted(e.Reveal) || pre[e.Reveal] != nil {
			continue
		}
		reveal, err := l.Resolve(ctx, e.Reveal.String())
		if err != nil {
			continue
		}
		_, round, err := rollouts.ResolveRound(ctx, l, reveal)
		if err != nil {
			continue
		}
		d, err := b.Options.Driver(round.Protocol)
		if err != nil {
			continue
		}
		if _, ok := d.(numberedDriver); !ok {
			continue
		}
		refs, err := protocol.ResolveRefs(ctx, l, reveal)
		if err != nil {
			continue
		}
		c := protocol.Case{Store: l, Refs: refs, Entry: e, Created: b.Created}
		if d, err = d.Prepare(ctx, c, round); err != nil {
			continue
		}
		if v, err := d.Decide(ctx, c); err == nil {
			pre[e.Reveal] = &decided{entry: e, refs: refs, v: v}
		}
	}
}

// decide evaluates one reveal whose round's checks gave rep. p, when not nil,
// is its verdict computed beforehand: used when computed from the same entry
// and references. The verdict of a driver that may run long (not a
// numberedDriver) is listed in index.json before decide returns (listed);
// the others are listed together at the end of the batch, as every command
// lists what it wrote when it finishes (docs/RELIABILITY.md).
func decide(ctx context.Context, l *cas.Layout, s *bundle.Signer, b Batch, reveal ocispec.Descriptor, round protocol.Round, rep protocol.RoundReport, p *decided) (out Outcome, listed bool, err error) {
	out, err = decideUnlisted(ctx, l, s, b, reveal, round, rep, p)
	if err != nil {
		return Outcome{}, false, err
	}
	if d, derr := b.Options.Driver(round.Protocol); derr == nil {
		if _, ok := d.(numberedDriver); ok {
			return out, false, nil
		}
	}
	return out, true, l.Flush()
}

func decideUnlisted(ctx context.Context, l *cas.Layout, s *bundle.Signer, b Batch, reveal ocispec.Descriptor, round protocol.Round, rep protocol.RoundReport, p *decided) (Outcome, error) {
	entry, ok := rep.Find(reveal.Digest)
	if !ok {
		return Outcome{}, fmt.Errorf("reveal %s was not found among the round's reveals", reveal.Digest)
	}
	driver, err := b.Options.Driver(round.Protocol)
	if err != nil {
		// The reveal checks are every protocol's; a protocol without a
		// driver has no verdict format yet.
		if entry.Status != protocol.StatusAccepted {
			return Outcome{}, &RejectedError{Reveal: reveal.Digest, Entry: entry}
		}
		return Outcome{}, fmt.Errorf("reveal %s of a %s round passed the reveal checks: %w", reveal.Digest, round.Protocol, ErrUnsupported)
	}
	refs, err := protocol.ResolveRefs(ctx, l, reveal) // the submission may have arrived
	if err != nil {
		return Outcome{}, err
	}
	c := protocol.Case{Store: l, Signer: s, Refs: refs, Entry: entry, Created: b.Created}
	// The driver checks its options (the rollouts beacon) before anything is
	// written.
	if driver, err = driver.Prepare(ctx, c, round); err != nil {
		return Outcome{}, err
	}
	if c.Sequence, err = nextSequence(l); err != nil {
		return Outcome{}, err
	}
	var v Verdict
	if nd, ok := driver.(numberedDriver); ok && p != nil && reflect.DeepEqual(p.entry, entry) && reflect.DeepEqual(p.refs, refs) {
		v = nd.Numbered(p.v, c.Sequence)
	} else if v, err = driver.Decide(ctx, c); err != nil {
		return Outcome{}, err
	}
	subject := refs.Submission
	if subject.MediaType == "" {
		subject = refs.Reveal // the submission never arrived; the verdict still names its digest
	}
	desc, err := bundle.WriteSigned(ctx, l, s, bundle.Artifact{Kind: protocol.KindVerdict, Record: v, Subject: &subject, Created: b.Created})
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Verdict: v, Artifact: cas.Descriptor(desc), Evidence: []cas.Descriptor{}}
	if _, ok := driver.(numberedDriver); ok {
		return out, nil // its verdicts name no evidence
	}
	art, err := bundle.Load(ctx, l, desc)
	if err != nil {
		return Outcome{}, err
	}
	ds, err := driver.Evidence(art)
	if err != nil {
		return Outcome{}, err
	}
	for _, d := range ds {
		e, err := l.Resolve(ctx, d.String())
		if err != nil {
			return Outcome{}, fmt.Errorf("evidence %s: %w", d, err)
		}
		out.Evidence = append(out.Evidence, cas.Descriptor(e))
	}
	return out, nil
}
