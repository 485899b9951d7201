package consensus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"strconv"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/strictjson"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Artifact kinds this package reads and writes.
const (
	// KindConsensus is the kind of the consensus record.
	KindConsensus = "consensus"
	// KindStakes is the kind of a stake table artifact.
	KindStakes = "stakes"
	// KindRules is the kind of a rules artifact.
	KindRules = "rules"
)

// ErrInput reports a stake table, rules, runs file or incumbent that does not
// have the documented form (a usage mistake, not a failure of the store).
// Errors of [ParseStakes], [ParseRules] and [ParseRuns] wrap it.
var ErrInput = errors.New("malformed input")

// StakeTable maps validator key fingerprints (64 lower-case hex digits, the
// SHA-256 of the key's DER SubjectPublicKeyInfo) to stake in the chain's
// smallest unit. Its JSON form is {"stakes": {"<fingerprint>": <integer>}}.
type StakeTable struct {
	Stakes map[string]uint64 `json:"stakes"`
}

// Total returns the sum of all stakes, or an error wrapping
// [scoring.ErrStakeOverflow] if it does not fit in a uint64.
func (t StakeTable) Total() (uint64, error) {
	var sum uint64
	for _, s := range t.Stakes {
		if sum+s < sum {
			return 0, scoring.ErrStakeOverflow
		}
		sum += s
	}
	return sum, nil
}

func (t StakeTable) validate() error {
	if t.Stakes == nil {
		return fmt.Errorf("%w: stake table: missing \"stakes\" object", ErrInput)
	}
	for fp := range t.Stakes {
		if !validFingerprint(fp) {
			return fmt.Errorf("%w: stake table: %q is not a key fingerprint (64 lower-case hex digits)", ErrInput, fp)
		}
	}
	if _, err := t.Total(); err != nil {
		return fmt.Errorf("%w: stake table: %w", ErrInput, err)
	}
	return nil
}

func validFingerprint(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// ParseStakes reads a stake table file: a JSON object with exactly one member,
// "stakes", an object from fingerprints to non-negative integers below 2^64
// whose sum also fits in 64 bits. Anything else (unknown members, fractions,
// exponents, negative numbers, malformed fingerprints, duplicate keys, trailing
// data) is an error wrapping [ErrInput].
func ParseStakes(b []byte) (StakeTable, error) {
	var raw struct {
		Stakes map[string]json.RawMessage `json:"stakes"`
	}
	if err := decodeStrict(b, &raw); err != nil {
		return StakeTable{}, fmt.Errorf("%w: stake table: %v", ErrInput, err)
	}
	if raw.Stakes == nil {
		return StakeTable{}, fmt.Errorf("%w: stake table: missing \"stakes\" object", ErrInput)
	}
	t := StakeTable{Stakes: make(map[string]uint64, len(raw.Stakes))}
	for fp, n := range raw.Stakes {
		v, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil {
			return StakeTable{}, fmt.Errorf("%w: stake table: stake %s of %s is not an integer in [0, 2^64)", ErrInput, n, fp)
		}
		t.Stakes[fp] = v
	}
	return t, t.validate()
}

// ParseRules reads a rules file into [scoring.DefaultRules]: members it omits
// keep their defaults. Unknown members, floats, non-canonical rationals,
// duplicate keys and rules outside their domain ([scoring.Rules.Validate]) are
// errors wrapping [ErrInput].
func ParseRules(b []byte) (scoring.Rules, error) {
	r := scoring.DefaultRules()
	if err := decodeStrict(b, &r); err != nil {
		return scoring.Rules{}, fmt.Errorf("%w: rules: %v", ErrInput, err)
	}
	if err := r.Validate(); err != nil {
		return scoring.Rules{}, fmt.Errorf("%w: rules: %w", ErrInput, err)
	}
	return r, nil
}

// ParseRuns reads a frontier runs file: a JSON list of [scoring.Run] objects
// (submission, author, run_index, loss_micro_nats, at_sec), in the order the
// runs became final. Unknown members, floats, malformed submission digests and
// trailing data are errors wrapping [ErrInput]; the frontier rules themselves
// are checked by [scoring.FoldFrontier].
func ParseRuns(b []byte) ([]scoring.Run, error) {
	var runs []scoring.Run
	if err := decodeStrict(b, &runs); err != nil {
		return nil, fmt.Errorf("%w: runs: %v", ErrInput, err)
	}
	if runs == nil {
		return nil, fmt.Errorf("%w: runs: want a JSON list", ErrInput)
	}
	for i, r := range runs {
		if err := r.Submission.Validate(); err != nil {
			return nil, fmt.Errorf("%w: runs: run %d: submission: %v", ErrInput, i, err)
		}
	}
	return runs, nil
}

// decodeStrict decodes one JSON value strictly (strictjson.Decode: exact field
// names, unknown fields and duplicate names refused, nothing after it), with
// integers only.
func decodeStrict(b []byte, v any) error {
	if len(b) > bundle.MaxRecordSize {
		return fmt.Errorf("%d bytes exceed the %d byte limit", len(b), bundle.MaxRecordSize)
	}
	// Canonicalize rejects non-integer numbers.
	if _, err := bundle.Canonicalize(b); err != nil {
		return err
	}
	return strictjson.Decode(b, v)
}

// WriteStakes writes t as a stake table artifact signed by s and returns it.
// Equal tables give equal digests (canonical JSON, fixed creation time).
func WriteStakes(ctx context.Context, st cas.Store, s *bundle.Signer, t StakeTable, created string) (ocispec.Descriptor, error) {
	if err := t.validate(); err != nil {
		return ocispec.Descriptor{}, err
	}
	return bundle.WriteSigned(ctx, st, s, bundle.Artifact{Kind: KindStakes, Record: t, Created: created})
}

// WriteRules writes r as a rules artifact signed by s and returns it. The record
// holds every parameter, defaults included, so its digest names the rules in
// force.
func WriteRules(ctx context.Context, st cas.Store, s *bundle.Signer, r scoring.Rules, created string) (ocispec.Descriptor, error) {
	if err := r.Validate(); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("%w: rules: %w", ErrInput, err)
	}
	return bundle.WriteSigned(ctx, st, s, bundle.Artifact{Kind: KindRules, Record: r, Created: created})
}

// LoadStakes reads a stake table artifact.
func LoadStakes(ctx context.Context, st cas.Store, desc ocispec.Descriptor) (StakeTable, error) {
	var t StakeTable
	if _, err := protocol.LoadAs(ctx, st, desc, KindStakes, &t); err != nil {
		return StakeTable{}, fmt.Errorf("stake table %s: %w", desc.Digest, err)
	}
	if err := t.validate(); err != nil {
		return StakeTable{}, fmt.Errorf("stake table %s: %w", desc.Digest, err)
	}
	return t, nil
}

// LoadRules reads a rules artifact; members it omits keep their defaults.
func LoadRules(ctx context.Context, st cas.Store, desc ocispec.Descriptor) (scoring.Rules, error) {
	// A rules record is its author's rules file, canonicalised: omitted
	// members are defaults, so it is read as ParseRules reads the file (strict
	// names, no unknown members) rather than as a record that must re-encode
	// from its Go form.
	art, err := bundle.Load(ctx, st, desc)
	if err != nil {
		return scoring.Rules{}, fmt.Errorf("rules %s: %w", desc.Digest, err)
	}
	if art.Kind != KindRules {
		return scoring.Rules{}, fmt.Errorf("rules %s is a %s, not a %s: %w", desc.Digest, art.Kind, KindRules, protocol.ErrMalformed)
	}
	r, err := ParseRules(art.Record)
	if err != nil {
		return scoring.Rules{}, fmt.Errorf("rules %s: %w", desc.Digest, err)
	}
	return r, nil
}
