// Package roundtest plays a round's miner side in the protocol drivers' tests:
// a fresh miner with its own store and key commits a submission, the
// validator observes the commitment, and the miner reveals, each record
// moving between the two stores as 'feval commit --to' and 'feval reveal --to'
// move them through a registry.
package roundtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/docs/schemas"
	"github.com/feval/feval/internal/jsonschema"
	"github.com/feval/feval/protocol"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// NewSigner returns a signer with a fresh P-256 key.
func NewSigner(t testing.TB) *bundle.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := bundle.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// At is an observation at the RFC 3339 time s.
func At(s string) protocol.Observation {
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return protocol.Observation{Now: ts}
}

// Submit commits the submission in dir to round from a fresh miner, has the
// validator observe the commitment at seen, reveals it, and returns the
// reveal, with the submission, in the validator's store. Like 'feval commit
// --skip-gate-check' it does not run the gate, so gate evasions reach the
// validator.
func Submit(t testing.TB, ctx context.Context, validator *cas.Layout, round ocispec.Descriptor, dir string, seen protocol.Observation) ocispec.Descriptor {
	t.Helper()
	miner, err := cas.Init(filepath.Join(t.TempDir(), "miner"))
	if err != nil {
		t.Fatal(err)
	}
	key := NewSigner(t)
	if _, err := cas.Copy(ctx, validator, miner, round, cas.CopyOptions{Subjects: true}); err != nil {
		t.Fatal(err)
	}
	c, err := protocol.Commit(ctx, miner, key, round, dir, "", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cas.Copy(ctx, miner, validator, c.Artifact.OCI(), cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.Collect(ctx, validator, validator, round, seen); err != nil {
		t.Fatal(err)
	}
	sec, err := protocol.LoadSecret(miner, c.Commitment)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := protocol.RevealCommitment(ctx, miner, key, sec, "")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := miner.Resolve(ctx, rv.Submission.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.CopySubmission(ctx, miner, validator, sub); err != nil {
		t.Fatal(err)
	}
	if _, err := cas.Copy(ctx, miner, validator, rv.Artifact.OCI(), cas.CopyOptions{Referrers: true}); err != nil {
		t.Fatal(err)
	}
	return rv.Artifact.OCI()
}

var verdictSchemas = sync.OnceValues(func() (*jsonschema.Set, error) { return jsonschema.Load(schemas.FS) })

// MatchesSchema fails t unless record, encoded as feval writes it, matches
// the schema of docs/schemas named schema: what evaluate writes must be what
// consensus reads (CONSENSUS.md 8.2).
func MatchesSchema(t testing.TB, schema string, record any) {
	t.Helper()
	set, err := verdictSchemas()
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Canonical(record)
	if err != nil {
		t.Fatal(err)
	}
	val, err := jsonschema.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Validate(schema, val); err != nil {
		t.Errorf("%s: %v", schema, err)
	}
}
