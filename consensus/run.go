package consensus

import (
	"context"
	"errors"
	"fmt"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Input is a stake table or rules given either as the bytes of a JSON file or as
// a reference (digest, prefix or tag) to a signed artifact of that kind. At most
// one of the two is set; a zero Input means the defaults (rules only).
type Input struct {
	JSON []byte
	Ref  string
}

// Options are a consensus run's inputs as a user names them.
type Options struct {
	// Round is the round's digest, prefix or tag, in the local store or in
	// Source.
	Round string
	// Source, when not nil, is a registry the round, its reveals, submissions
	// and verdicts (with their signatures) are first copied from.
	Source cas.Store
	// Stakes is the stake table; required.
	Stakes Input
	// Rules are the rules; zero means [scoring.DefaultRules].
	Rules Input
	// Incumbent is the seat holder before the round; nil when vacant.
	Incumbent *Incumbent
	// Created is the artifacts' creation time; "" is the fixed epoch.
	Created string
	// Trusted are the keys whose signature on a stake table or rules
	// artifact given by reference (the round owner's, typically) the caller
	// accepts, besides the caller's own signing key. An input artifact no
	// trusted key signed is refused, whoever else signed it.
	Trusted []*bundle.PublicKey
}

// Outcome is a written consensus record and the artifacts it names.
type Outcome struct {
	Record   Record         `json:"record"`
	Artifact cas.Descriptor `json:"artifact"`
	Stakes   cas.Descriptor `json:"stakes_artifact"`
	Rules    cas.Descriptor `json:"rules_artifact"`
}

// Run computes the consensus of a round and writes it to l signed by s: it
// gathers the round from opts.Source (if any), writes the stake table and rules
// given as JSON as signed artifacts (so that the record can name them by
// digest), calls [Compute] and writes the record with the round as its subject.
// A stake table or rules artifact given by reference must be signed by s's key
// or one of opts.Trusted; otherwise the error wraps
// [bundle.ErrNoTrustedSignature] and names who did sign.
func Run(ctx context.Context, l *cas.Layout, s *bundle.Signer, opts Options) (Outcome, error) {
	// Files are checked before anything is fetched or written.
	stakes, rules, err := parseInputs(opts)
	if err != nil {
		return Outcome{}, err
	}
	round, err := cas.ResolveRef(ctx, l, opts.Round)
	if errors.Is(err, cas.ErrNotFound) && opts.Source != nil {
		round, err = cas.ResolveRef(ctx, opts.Source, opts.Round)
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("round %s: %w", opts.Round, err)
	}
	if opts.Source != nil {
		if err := Gather(ctx, opts.Source, l, round); err != nil {
			return Outcome{}, err
		}
	}
	var out Outcome
	var stakesDesc, rulesDesc ocispec.Descriptor
	trusted := append([]*bundle.PublicKey{s.Public()}, opts.Trusted...)
	if stakes != nil {
		stakesDesc, err = WriteStakes(ctx, l, s, *stakes, opts.Created)
	} else {
		stakesDesc, err = artifactInput(ctx, l, opts.Source, opts.Stakes.Ref, KindStakes)
		if err == nil {
			err = checkInputSigners(ctx, l, stakesDesc, "stake table", trusted)
		}
	}
	if err != nil {
		return Outcome{}, err
	}
	if rules != nil {
		rulesDesc, err = WriteRules(ctx, l, s, *rules, opts.Created)
	} else {
		rulesDesc, err = artifactInput(ctx, l, opts.Source, opts.Rules.Ref, KindRules)
		if err == nil {
			err = checkInputSigners(ctx, l, rulesDesc, "rules", trusted)
		}
	}
	if err != nil {
		return Outcome{}, err
	}
	out.Record, err = Compute(ctx, l, Request{Round: round.Digest, Stakes: stakesDesc.Digest, Rules: rulesDesc.Digest, Incumbent: opts.Incumbent})
	if err != nil {
		return Outcome{}, err
	}
	ri, err := loadRound(ctx, l, round.Digest)
	if err != nil {
		return Outcome{}, err
	}
	subject := ri.desc
	desc, err := writeRecord(ctx, l, s, out.Record, subject, opts.Created)
	if err != nil {
		return Outcome{}, err
	}
	out.Artifact, out.Stakes, out.Rules = cas.Descriptor(desc), cas.Descriptor(stakesDesc), cas.Descriptor(rulesDesc)
	return out, l.Flush()
}

// parseInputs checks the inputs given as JSON and returns them; nil means the
// input is an artifact reference. Rules given neither way are the defaults.
func parseInputs(opts Options) (*StakeTable, *scoring.Rules, error) {
	for _, in := range []struct {
		name string
		in   Input
	}{{"stake table", opts.Stakes}, {"rules", opts.Rules}} {
		if in.in.JSON != nil && in.in.Ref != "" {
			return nil, nil, fmt.Errorf("%w: %s: give a file or an artifact, not both", ErrInput, in.name)
		}
	}
	var stakes *StakeTable
	switch {
	case opts.Stakes.JSON != nil:
		t, err := ParseStakes(opts.Stakes.JSON)
		if err != nil {
			return nil, nil, err
		}
		stakes = &t
	case opts.Stakes.Ref == "":
		return nil, nil, fmt.Errorf("%w: a stake table is required", ErrInput)
	}
	var rules *scoring.Rules
	switch {
	case opts.Rules.JSON != nil:
		r, err := ParseRules(opts.Rules.JSON)
		if err != nil {
			return nil, nil, err
		}
		rules = &r
	case opts.Rules.Ref == "":
		r := scoring.DefaultRules()
		rules = &r
	}
	return stakes, rules, nil
}

// checkInputSigners requires a signature by one of trusted on a stake table or
// rules artifact: who may set the stakes and the rules is the caller's
// decision, like whose verdicts count. Signatures by other keys or in other
// formats are ignored.
func checkInputSigners(ctx context.Context, st cas.Store, desc ocispec.Descriptor, what string, trusted []*bundle.PublicKey) error {
	if _, err := bundle.VerifySignatures(ctx, st, desc, trusted); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// artifactInput resolves ref in l, else in src (copying it with its
// signatures), and checks its kind.
func artifactInput(ctx context.Context, l *cas.Layout, src cas.Store, ref, kind string) (ocispec.Descriptor, error) {
	desc, err := cas.ResolveRef(ctx, l, ref)
	if errors.Is(err, cas.ErrNotFound) && src != nil {
		if desc, err = cas.ResolveRef(ctx, src, ref); err == nil {
			_, err = cas.Copy(ctx, src, l, desc, cas.CopyOptions{Referrers: true})
		}
	}
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("%s %s: %w", kind, ref, err)
	}
	art, err := bundle.Load(ctx, l, desc)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("%s %s: %w", kind, ref, err)
	}
	if art.Kind != kind {
		return ocispec.Descriptor{}, fmt.Errorf("%w: %s is a %s artifact, not %s", ErrInput, desc.Digest, art.Kind, kind)
	}
	return clean(art.Desc), nil
}

// Gather copies a round from src into l: the round with every referrer, recursively
// (commitments, reveals, signatures, verdicts of submissions that never arrived),
// then every submission a reveal of the round names, with its referrers
// (verdicts and their signatures). Submissions src lacks are skipped.
func Gather(ctx context.Context, src cas.Store, l *cas.Layout, round ocispec.Descriptor) error {
	if _, err := cas.Copy(ctx, src, l, round, cas.CopyOptions{Subjects: true, Referrers: true, Siblings: true}); err != nil {
		return fmt.Errorf("gathering round %s: %w", round.Digest, err)
	}
	reveals, err := discoverReveals(ctx, l, round)
	if err != nil {
		return err
	}
	seen := make(map[digest.Digest]bool)
	for _, rd := range reveals {
		var rv protocol.Reveal
		if _, err := protocol.LoadAs(ctx, l, rd, protocol.KindReveal, &rv); err != nil || rv.Validate() != nil || seen[rv.Submission] {
			continue // not an entry; Compute ignores it as well
		}
		seen[rv.Submission] = true
		sub, err := src.Resolve(ctx, rv.Submission.String())
		if errors.Is(err, cas.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("gathering submission %s: %w", rv.Submission, err)
		}
		err = protocol.CopySubmission(ctx, src, l, sub)
		if errors.Is(err, cas.ErrNotFound) {
			continue // not whole at the source: missing, as above
		}
		if err != nil {
			return fmt.Errorf("gathering submission %s: %w", rv.Submission, err)
		}
	}
	return l.Flush()
}

// Publish pushes a consensus outcome to dst: the stake table and rules artifacts
// and the record, each with its signatures, after every input the record names
// that dst lacks (round, reveals, verdicts, each with its subjects and
// referrers), so that an auditor can replay it from dst alone.
func Publish(ctx context.Context, l *cas.Layout, dst cas.Store, out Outcome) error {
	in := out.Record.Inputs
	inputs := []digest.Digest{in.Round}
	inputs = append(inputs, in.Reveals...)
	for _, v := range in.Verdicts {
		inputs = append(inputs, v.Verdict)
	}
	for _, d := range inputs {
		desc, err := l.Resolve(ctx, d.String())
		if err != nil {
			return fmt.Errorf("publishing input %s: %w", d, err)
		}
		ok, err := dst.Exists(ctx, desc)
		if err != nil {
			return fmt.Errorf("publishing input %s: %w", d, err)
		}
		if ok {
			continue
		}
		if _, err := cas.Copy(ctx, l, dst, desc, cas.CopyOptions{Subjects: true, Referrers: true}); err != nil {
			return fmt.Errorf("publishing input %s: %w", d, err)
		}
	}
	for _, desc := range []ocispec.Descriptor{out.Stakes.OCI(), out.Rules.OCI(), out.Artifact.OCI()} {
		if _, err := cas.Copy(ctx, l, dst, desc, cas.CopyOptions{Referrers: true}); err != nil {
			return fmt.Errorf("publishing %s: %w", desc.Digest, err)
		}
	}
	return nil
}

// Fetch copies a consensus record and everything its replay reads from src into
// l: the record with its signatures and subject (the round, with its
// commitments, reveals and their signatures), the stake table and rules, and
// every verdict it names with its signatures and subject.
func Fetch(ctx context.Context, src cas.Store, l *cas.Layout, consensus ocispec.Descriptor) error {
	if _, err := cas.Copy(ctx, src, l, consensus, cas.CopyOptions{Subjects: true, Referrers: true, Siblings: true}); err != nil {
		return fmt.Errorf("fetching consensus: %w", err)
	}
	_, rec, err := LoadRecord(ctx, l, consensus)
	if err != nil {
		return fmt.Errorf("fetching consensus: %w", err)
	}
	want := []digest.Digest{rec.Inputs.Stakes, rec.Inputs.Rules}
	for _, v := range rec.Inputs.Verdicts {
		want = append(want, v.Verdict)
	}
	for _, d := range want {
		if _, err := l.Resolve(ctx, d.String()); err == nil {
			continue
		}
		desc, err := src.Resolve(ctx, d.String())
		if err != nil {
			return fmt.Errorf("fetching input %s: %w", d, err)
		}
		if _, err := cas.Copy(ctx, src, l, desc, cas.CopyOptions{Subjects: true, Referrers: true, Siblings: true}); err != nil {
			return fmt.Errorf("fetching input %s: %w", d, err)
		}
	}
	return l.Flush()
}
