package evaluate

import (
	"context"
	"fmt"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/opencontainers/go-digest"
)

// Verdict is a verdict record of any protocol.
type Verdict interface {
	// Head returns the fields every protocol's verdict shares.
	Head() protocol.VerdictHead
	// Details renders the protocol's own fields for text output.
	Details() []protocol.Detail
}

// Driver is one competition kind's evaluation, shared by 'feval evaluate' and
// 'feval replay'. Neither knows more about a protocol than this interface.
type Driver interface {
	// Prepare checks the validator's options against one case and its round
	// before anything is written, and returns the driver to decide it with
	// (the rollouts driver verifies and derives its beacon here).
	Prepare(ctx context.Context, c protocol.Case, round protocol.Round) (Driver, error)
	// Decide computes the verdict of one reveal whose checks gave c.Entry. It
	// may run the submission in the sandbox and write signed evidence (such
	// as checkpoints) to c.Store with c.Signer.
	Decide(ctx context.Context, c protocol.Case) (Verdict, error)
	// Redecide re-derives the recorded verdict from its inputs in c.Store
	// (c.Signer is nil): the same inputs give the same record. Findings are
	// differences that the record itself cannot show.
	Redecide(ctx context.Context, c protocol.Case, recorded *bundle.Loaded) (Verdict, []protocol.Finding, error)
	// Evidence lists the artifacts, beyond the inputs every verdict names,
	// that a recorded verdict depends on, for replay to fetch.
	Evidence(recorded *bundle.Loaded) ([]digest.Digest, error)
}

// Options are the validator's and auditor's choices for every protocol.
type Options struct {
	// Rollouts are the audit's beacon and whether to recompute every row.
	Rollouts rollouts.Params
	// Optimizer are the bar, the floor and the machine that trains.
	Optimizer optimizer.Params
	// Retrain makes an optimizer replay train again and compare checkpoints.
	Retrain bool
	// Scenarios are the meter's upstream and the policy runner.
	Scenarios scenarios.Params
	// VerifyOnly makes a scenarios replay re-run only the verifiers on the
	// recorded final workspaces.
	VerifyOnly bool
}

// Driver returns the driver of a protocol configured with o.
func (o Options) Driver(name string) (Driver, error) {
	switch name {
	case "rollouts":
		return rolloutsDriver{o.Rollouts}, nil
	case "optimizer":
		return optimizerDriver{p: o.Optimizer, retrain: o.Retrain}, nil
	case "scenarios":
		return scenariosDriver{p: o.Scenarios, verifyOnly: o.VerifyOnly}, nil
	}
	return nil, fmt.Errorf("protocol %q has no evaluation driver in this feval", name)
}

// numberedDriver is a Driver whose Decide writes nothing and takes from the
// case only its store, references and entry, and its sequence number only to
// record it: EvaluateAll computes its verdicts while the signing key is still
// being decrypted and numbers each when it is written. Its verdicts name no
// evidence (Evidence returns nothing).
type numberedDriver interface {
	Driver
	// Numbered returns v, a verdict of this driver's Decide, with the
	// sequence number n.
	Numbered(v Verdict, n uint64) Verdict
}

type rolloutsDriver struct{ p rollouts.Params }

func (rolloutsDriver) Numbered(v Verdict, n uint64) Verdict {
	rv := v.(rollouts.Verdict)
	rv.Sequence = n
	return rv
}

// Prepare verifies the beacon of an audit (only an accepted reveal is audited)
// and derives its value.
func (d rolloutsDriver) Prepare(_ context.Context, c protocol.Case, round protocol.Round) (Driver, error) {
	if c.Entry.Status != protocol.StatusAccepted || c.Entry.RevealSeen == nil {
		return d, nil
	}
	b, err := rollouts.ResolveBeacon(d.p.Beacon, round, *c.Entry.RevealSeen)
	if err != nil {
		return nil, err
	}
	d.p.Beacon = b
	return d, nil
}

func (d rolloutsDriver) Decide(ctx context.Context, c protocol.Case) (Verdict, error) {
	p := d.p
	p.Sequence = c.Sequence
	return rollouts.Decide(ctx, c.Store, c.Refs, c.Entry, p)
}

func (d rolloutsDriver) Redecide(ctx context.Context, c protocol.Case, recorded *bundle.Loaded) (Verdict, []protocol.Finding, error) {
	var rv rollouts.Verdict
	if err := recorded.Decode(&rv); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", protocol.ErrMalformed, err)
	}
	p := rollouts.Params{Sequence: c.Sequence}
	if rv.Audit != nil {
		p.Full = rv.Audit.Full
		var r protocol.Round
		if _, err := protocol.LoadAs(ctx, c.Store, c.Refs.Round, protocol.KindRound, &r); err != nil {
			return nil, nil, fmt.Errorf("reading round: %w", err)
		}
		// A drand beacon is verified and its value derived again; a plain one
		// is taken as recorded and regenerates as unverified.
		b, err := rollouts.ResolveBeacon(rv.Audit.Beacon, r, rv.RevealCheck.RevealSeen)
		if err != nil {
			return nil, nil, fmt.Errorf("verdict %s: %w: %w", recorded.Desc.Digest, bundle.ErrVerify, err)
		}
		p.Beacon = b
	}
	v, err := rollouts.Decide(ctx, c.Store, c.Refs, c.Entry, p)
	return v, nil, err
}

func (rolloutsDriver) Evidence(*bundle.Loaded) ([]digest.Digest, error) { return nil, nil }

type optimizerDriver struct {
	p       optimizer.Params
	retrain bool
}

// Prepare resolves the round's beacon, from which the seeds and the held-out
// windows are derived: an accepted reveal is not evaluated without one.
func (d optimizerDriver) Prepare(_ context.Context, c protocol.Case, round protocol.Round) (Driver, error) {
	p, err := optimizer.Prepare(d.p, c, round)
	if err != nil {
		return nil, err
	}
	d.p = p
	return d, nil
}

func (d optimizerDriver) Decide(ctx context.Context, c protocol.Case) (Verdict, error) {
	return optimizer.Decide(ctx, c, d.p)
}

func (d optimizerDriver) Redecide(ctx context.Context, c protocol.Case, recorded *bundle.Loaded) (Verdict, []protocol.Finding, error) {
	rv, err := optimizer.Parse(recorded)
	if err != nil {
		return nil, nil, err
	}
	opts := optimizer.ReplayOptions{Retrain: d.retrain, Machine: d.p.Machine}
	if c.Entry.Status == protocol.StatusAccepted {
		// The seeds and windows are derived again from the recorded beacon,
		// a drand one verified again against the round.
		if rv.Beacon == nil {
			return nil, nil, fmt.Errorf("%w: verdict %s of an accepted reveal names no beacon", protocol.ErrMalformed, recorded.Desc.Digest)
		}
		var r protocol.Round
		if _, err := protocol.LoadAs(ctx, c.Store, c.Refs.Round, protocol.KindRound, &r); err != nil {
			return nil, nil, fmt.Errorf("reading round: %w", err)
		}
		b, err := rollouts.ResolveBeacon(*rv.Beacon, r, rv.RevealCheck.RevealSeen)
		if err != nil {
			return nil, nil, fmt.Errorf("verdict %s: %w: %w", recorded.Desc.Digest, bundle.ErrVerify, err)
		}
		opts.Beacon = b
	}
	return optimizer.Redecide(ctx, c, rv, opts)
}

func (optimizerDriver) Evidence(recorded *bundle.Loaded) ([]digest.Digest, error) {
	rv, err := optimizer.Parse(recorded)
	if err != nil {
		return nil, err
	}
	return optimizer.Evidence(rv), nil
}

type scenariosDriver struct {
	p          scenarios.Params
	verifyOnly bool
}

// Prepare refuses to evaluate an accepted reveal without the task's hidden
// tests (scenarios.ErrNoHidden).
func (d scenariosDriver) Prepare(_ context.Context, c protocol.Case, _ protocol.Round) (Driver, error) {
	if c.Entry.Status == protocol.StatusAccepted && d.p.Hidden == "" {
		return nil, scenarios.ErrNoHidden
	}
	return d, nil
}

func (d scenariosDriver) Decide(ctx context.Context, c protocol.Case) (Verdict, error) {
	return scenarios.Decide(ctx, c, d.p)
}

func (d scenariosDriver) Redecide(ctx context.Context, c protocol.Case, recorded *bundle.Loaded) (Verdict, []protocol.Finding, error) {
	rv, err := scenarios.Parse(recorded)
	if err != nil {
		return nil, nil, err
	}
	return scenarios.Redecide(ctx, c, rv, d.p, scenarios.ReplayOptions{VerifyOnly: d.verifyOnly})
}

func (scenariosDriver) Evidence(recorded *bundle.Loaded) ([]digest.Digest, error) {
	rv, err := scenarios.Parse(recorded)
	if err != nil {
		return nil, err
	}
	return scenarios.Evidence(rv), nil
}
