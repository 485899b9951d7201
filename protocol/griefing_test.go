package protocol

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/gate"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// roundFixture is a round in one local store, with miners that commit and
// reveal through the production functions and an adversary who can push
// anything to the store.
type roundFixture struct {
	t     *testing.T
	ctx   context.Context
	l     *cas.Layout
	round ocispec.Descriptor
	seen  map[digest.Digest]Seen
}

const (
	fixCommitUntil = "2026-12-01T00:00:00Z"
	fixRevealUntil = "2026-12-02T00:00:00Z"
	beforeClose    = "2026-11-30T10:00:00Z"
	afterClose     = "2026-12-01T06:00:00Z"
	laterStill     = "2026-12-01T08:00:00Z"
	afterReveals   = "2026-12-02T06:00:00Z"
)

func newSigner(t *testing.T) *bundle.Signer {
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

func newRoundFixture(t *testing.T) *roundFixture {
	t.Helper()
	ctx := context.Background()
	l, err := cas.Init(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "task.json"), []byte(`{"protocol":"optimizer"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	owner := newSigner(t)
	task, err := CreateTask(ctx, l, owner, "optimizer", dir, "")
	if err != nil {
		t.Fatal(err)
	}
	cu, _ := ParseWindow(fixCommitUntil)
	ru, _ := ParseWindow(fixRevealUntil)
	round, err := OpenRound(ctx, l, owner, task, cu, ru, "")
	if err != nil {
		t.Fatal(err)
	}
	return &roundFixture{t: t, ctx: ctx, l: l, round: round, seen: map[digest.Digest]Seen{}}
}

// commit commits content (a file body) for s, first seen at `at`.
func (f *roundFixture) commit(s *bundle.Signer, content, at string) Secret {
	f.t.Helper()
	path := filepath.Join(f.t.TempDir(), "optimizer.py")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	c, err := Commit(f.ctx, f.l, s, f.round, path, "", rand.Reader)
	if err != nil {
		f.t.Fatal(err)
	}
	f.seen[c.Artifact.Digest] = Seen{Time: at}
	sec, err := LoadSecret(f.l, c.Commitment)
	if err != nil {
		f.t.Fatal(err)
	}
	return sec
}

// reveal writes a reveal record for sec's commitment signed by s, with a
// creation time that makes it a distinct artifact, first seen at `at`.
func (f *roundFixture) reveal(s *bundle.Signer, sec Secret, created, at string) digest.Digest {
	f.t.Helper()
	commit, err := f.l.Resolve(f.ctx, sec.CommitmentArtifact.String())
	if err != nil {
		f.t.Fatal(err)
	}
	rec := Reveal{Commitment: sec.Commitment, Round: sec.Round, Miner: sec.Miner, Submission: sec.Submission, Salt: sec.Salt}
	desc, err := bundle.WriteSigned(f.ctx, f.l, s, bundle.Artifact{Kind: KindReveal, Record: rec, Subject: &commit, Created: created})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, ok := f.seen[desc.Digest]; !ok {
		f.seen[desc.Digest] = Seen{Time: at}
	}
	return desc.Digest
}

// honest is the miner's own reveal, through RevealCommitment.
func (f *roundFixture) honest(s *bundle.Signer, sec Secret, at string) digest.Digest {
	f.t.Helper()
	r, err := RevealCommitment(f.ctx, f.l, s, sec, "")
	if err != nil {
		f.t.Fatal(err)
	}
	if _, ok := f.seen[r.Artifact.Digest]; !ok {
		f.seen[r.Artifact.Digest] = Seen{Time: at}
	}
	return r.Artifact.Digest
}

// junkSignature attaches a signature referrer whose bundle is not a Sigstore
// bundle at all, as anyone who can push could.
func (f *roundFixture) junkSignature(target ocispec.Descriptor) {
	f.t.Helper()
	layer, err := bundle.PushBytes(f.ctx, f.l, bundle.MediaTypeSigstoreBundle, []byte(`{"junk":true}`))
	if err != nil {
		f.t.Fatal(err)
	}
	cfg, err := bundle.PushBytes(f.ctx, f.l, ocispec.MediaTypeEmptyJSON, ocispec.DescriptorEmptyJSON.Data)
	if err != nil {
		f.t.Fatal(err)
	}
	subj := ocispec.Descriptor{MediaType: target.MediaType, Digest: target.Digest, Size: target.Size}
	m := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
		ArtifactType: bundle.MediaTypeSigstoreBundle, Config: cfg, Layers: []ocispec.Descriptor{layer}, Subject: &subj}
	mb, err := json.Marshal(m)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := bundle.PushBytes(f.ctx, f.l, ocispec.MediaTypeImageManifest, mb); err != nil {
		f.t.Fatal(err)
	}
}

func (f *roundFixture) check(now string) RoundReport {
	f.t.Helper()
	obs := Observation{}
	obs.Now, _ = time.Parse(time.RFC3339, now)
	rep, err := CheckRound(f.ctx, f.l, f.round, f.seen, obs, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	// The check of one reveal, as a validator evaluating it runs it, gives
	// that reveal the entry the whole round's check gives it.
	for _, e := range append(append([]Entry{}, rep.Entries...), rep.Extra...) {
		if e.Reveal == "" {
			continue
		}
		one, err := CheckRoundFor(f.ctx, f.l, f.round, f.seen, obs, nil, []digest.Digest{e.Reveal})
		if err != nil {
			f.t.Fatal(err)
		}
		got, ok := one.Find(e.Reveal)
		if !ok || len(one.Entries)+len(one.Extra) != 1 {
			f.t.Fatalf("CheckRoundFor(%s) lists %d entries and %d extra, want the reveal's alone", e.Reveal, len(one.Entries), len(one.Extra))
		}
		if !reflect.DeepEqual(got, e) {
			f.t.Errorf("CheckRoundFor(%s) = %+v, CheckRound gives %+v", e.Reveal, got, e)
		}
	}
	return rep
}

// want asserts the status and reason of the entry of a reveal.
func want(t *testing.T, rep RoundReport, reveal digest.Digest, status, reason string) {
	t.Helper()
	e, ok := rep.Find(reveal)
	if !ok {
		t.Fatalf("reveal %s is not listed", reveal)
	}
	if e.Status != status || e.Reason != reason {
		t.Errorf("reveal %s: %s %s (%s), want %s %s", reveal.Encoded()[:12], e.Status, e.Reason, e.Detail, status, reason)
	}
}

// TestRevealGriefing: whoever can push to the round's store cannot spoil a
// miner's reveal, and cannot help a copier by knocking out the original.
func TestRevealGriefing(t *testing.T) {
	t.Run("junk reveal pushed first", func(t *testing.T) {
		f := newRoundFixture(t)
		alice, mallory := newSigner(t), newSigner(t)
		sec := f.commit(alice, "alice v1\n", beforeClose)
		junk := sec
		junk.Salt = hex.EncodeToString(make([]byte, SaltSize))
		bad := f.reveal(mallory, junk, "", afterClose)
		honest := f.honest(alice, sec, laterStill)
		rep := f.check(laterStill)
		want(t, rep, honest, StatusAccepted, "")
		want(t, rep, bad, StatusRejected, ReasonKeyMismatch)
		if len(rep.Entries) != 1 || rep.Entries[0].Reveal != honest {
			t.Errorf("the commitment is answered by %v, want the honest reveal", rep.Entries)
		}
	})
	t.Run("the miner's reveal re-signed by another key pushed first", func(t *testing.T) {
		f := newRoundFixture(t)
		alice, mallory := newSigner(t), newSigner(t)
		sec := f.commit(alice, "alice v1\n", beforeClose)
		// A copy of the honest record as a new artifact under mallory's key,
		// seen before the honest one.
		resigned := f.reveal(mallory, sec, "2026-12-01T05:00:00Z", afterClose)
		honest := f.honest(alice, sec, laterStill)
		// And mallory's signature added to the honest artifact itself.
		desc, err := f.l.Resolve(f.ctx, honest.String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bundle.Sign(f.ctx, f.l, mallory, desc); err != nil {
			t.Fatal(err)
		}
		rep := f.check(laterStill)
		want(t, rep, honest, StatusAccepted, "")
		want(t, rep, resigned, StatusRejected, ReasonKeyMismatch)
	})
	t.Run("a copier after a junk reveal of the original", func(t *testing.T) {
		f := newRoundFixture(t)
		alice, bob, mallory := newSigner(t), newSigner(t), newSigner(t)
		secA := f.commit(alice, "shared content\n", "2026-11-30T09:00:00Z")
		secB := f.commit(bob, "shared content\n", beforeClose)
		junk := secA
		junk.Salt = hex.EncodeToString(make([]byte, SaltSize))
		bad := f.reveal(mallory, junk, "", afterClose)
		honestA := f.honest(alice, secA, laterStill)
		honestB := f.honest(bob, secB, laterStill)
		rep := f.check(laterStill)
		want(t, rep, bad, StatusRejected, ReasonKeyMismatch)
		want(t, rep, honestA, StatusAccepted, "")
		want(t, rep, honestB, StatusRejected, ReasonCopy)
	})
	t.Run("a copier of an original that is itself rejected", func(t *testing.T) {
		f := newRoundFixture(t)
		alice, bob := newSigner(t), newSigner(t)
		secA := f.commit(alice, "shared content\n", "2026-11-30T09:00:00Z")
		secB := f.commit(bob, "shared content\n", beforeClose)
		lateA := f.honest(alice, secA, afterReveals)
		honestB := f.honest(bob, secB, laterStill)
		rep := f.check(afterReveals)
		want(t, rep, lateA, StatusRejected, ReasonRevealLate)
		want(t, rep, honestB, StatusRejected, ReasonCopy)
	})
	t.Run("double reveal means two valid openings", func(t *testing.T) {
		f := newRoundFixture(t)
		alice, mallory := newSigner(t), newSigner(t)
		sec := f.commit(alice, "alice v1\n", beforeClose)
		first := f.honest(alice, sec, afterClose)
		bad := f.reveal(mallory, sec, "2026-12-01T04:00:00Z", afterClose)
		second := f.reveal(alice, sec, "2026-12-01T07:00:00Z", laterStill)
		rep := f.check(laterStill)
		want(t, rep, first, StatusAccepted, "")
		want(t, rep, second, StatusRejected, ReasonDoubleReveal)
		want(t, rep, bad, StatusRejected, ReasonKeyMismatch)
	})
	t.Run("other signatures on the commitment, reveal and submission", func(t *testing.T) {
		f := newRoundFixture(t)
		alice, mallory := newSigner(t), newSigner(t)
		sec := f.commit(alice, "alice v1\n", beforeClose)
		honest := f.honest(alice, sec, laterStill)
		for _, d := range []digest.Digest{sec.CommitmentArtifact, honest, sec.Submission} {
			desc, err := f.l.Resolve(f.ctx, d.String())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := bundle.Sign(f.ctx, f.l, mallory, desc); err != nil {
				t.Fatal(err)
			}
			f.junkSignature(desc)
		}
		want(t, f.check(laterStill), honest, StatusAccepted, "")
	})
	t.Run("only junk: the commitment stays unanswered", func(t *testing.T) {
		f := newRoundFixture(t)
		alice, mallory := newSigner(t), newSigner(t)
		sec := f.commit(alice, "alice v1\n", beforeClose)
		bad := f.reveal(mallory, sec, "", afterClose)
		rep := f.check(afterReveals)
		want(t, rep, bad, StatusRejected, ReasonKeyMismatch)
		if len(rep.Entries) != 1 || rep.Entries[0].Status != StatusUnrevealed {
			t.Errorf("entries %+v, want one unrevealed commitment", rep.Entries)
		}
	})
}

// TestCollectFetchesOnlyOpenings: a validator collecting a round brings in the
// submissions of the miners' valid openings only; a reveal anyone else pushed
// cannot make it fetch an artifact of the pusher's choosing.
func TestCollectFetchesOnlyOpenings(t *testing.T) {
	src := newRoundFixture(t) // the shared store the validator collects from
	val, err := cas.Init(filepath.Join(t.TempDir(), "validator"))
	if err != nil {
		t.Fatal(err)
	}
	defer val.Close()
	alice, mallory := newSigner(t), newSigner(t)
	sec := src.commit(alice, "alice v1\n", beforeClose)
	other := src.commit(mallory, "mallory's payload\n", beforeClose)
	junk := sec
	junk.Submission = other.Submission // names an artifact the validator has no reason to fetch
	src.reveal(mallory, junk, "", afterClose)
	at := func(s string) Observation { ts, _ := time.Parse(time.RFC3339, s); return Observation{Now: ts} }
	if _, err := Collect(src.ctx, src.l, val, src.round, at(afterClose)); err != nil {
		t.Fatal(err)
	}
	if _, err := val.Resolve(src.ctx, other.Submission.String()); err == nil {
		t.Errorf("a junk reveal made the validator fetch %s", other.Submission)
	}
	src.honest(alice, sec, laterStill)
	if _, err := Collect(src.ctx, src.l, val, src.round, at(laterStill)); err != nil {
		t.Fatal(err)
	}
	if _, err := val.Resolve(src.ctx, sec.Submission.String()); err != nil {
		t.Errorf("the miner's opening did not bring its submission: %v", err)
	}
}

// TestPrivateStateStrict: the store owner's own state is read strictly too,
// and a damaged file is ErrDamaged.
func TestPrivateStateStrict(t *testing.T) {
	f := newRoundFixture(t)
	sec := f.commit(newSigner(t), "alice v1\n", beforeClose)
	dir := filepath.Join(f.l.Root(), cas.PrivateDir)
	if err := os.WriteFile(filepath.Join(dir, "seen.json"), []byte(`{"`+sec.CommitmentArtifact.String()+`":{"Time":"x"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSeen(f.l); !errors.Is(err, ErrDamaged) {
		t.Errorf("LoadSeen of a mis-cased record: %v, want ErrDamaged", err)
	}
	name := filepath.Join(dir, "commitments", strings.TrimPrefix(sec.Commitment, "sha256:")+".json")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(strings.Replace(string(b), `"salt"`, `"Salt"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecret(f.l, sec.Commitment); !errors.Is(err, ErrDamaged) {
		t.Errorf("LoadSecret of a mis-cased secret: %v, want ErrDamaged", err)
	}
}

// commitArtifact commits s to an existing submission artifact, as Commit does
// for a path, first seen at `at`.
func (f *roundFixture) commitArtifact(s *bundle.Signer, sub ocispec.Descriptor, at string) Secret {
	f.t.Helper()
	salt := make([]byte, SaltSize)
	if _, err := rand.Read(salt); err != nil {
		f.t.Fatal(err)
	}
	miner := s.Public().Fingerprint
	value := ComputeCommitment(sub.Digest, miner, f.round.Digest, salt)
	keyLayer, err := bundle.PushData(f.ctx, f.l, MinerKeyTitle, s.Public().PEM)
	if err != nil {
		f.t.Fatal(err)
	}
	round := f.round
	desc, err := bundle.WriteSigned(f.ctx, f.l, s, bundle.Artifact{Kind: KindCommitment,
		Record: Commitment{Commitment: value, Round: f.round.Digest, Miner: miner}, Layers: []ocispec.Descriptor{keyLayer}, Subject: &round})
	if err != nil {
		f.t.Fatal(err)
	}
	f.seen[desc.Digest] = Seen{Time: at}
	return Secret{Commitment: value, CommitmentArtifact: desc.Digest, Round: f.round.Digest, Submission: sub.Digest, Miner: miner, Salt: hex.EncodeToString(salt)}
}

// TestCopyByContentNotClaim: the copy check compares the content the payload
// holds, not what the submission record claims it holds.
func TestCopyByContentNotClaim(t *testing.T) {
	f := newRoundFixture(t)
	alice, bob := newSigner(t), newSigner(t)
	secA := f.commit(alice, "shared content\n", "2026-11-30T09:00:00Z")
	// bob re-packs alice's payload under his key with a record that names other
	// content.
	subA, err := f.l.Resolve(f.ctx, secA.Submission.String())
	if err != nil {
		t.Fatal(err)
	}
	art, err := bundle.Load(f.ctx, f.l, subA)
	if err != nil {
		t.Fatal(err)
	}
	var rec bundle.ContentRecord
	if err := art.Decode(&rec); err != nil {
		t.Fatal(err)
	}
	rec.Content.Digest = digest.FromString("something else")
	forged, err := bundle.WriteSigned(f.ctx, f.l, bob, bundle.Artifact{Kind: KindSubmission, Record: rec, Layers: art.Payloads})
	if err != nil {
		t.Fatal(err)
	}
	secB := f.commitArtifact(bob, forged, beforeClose)
	honestA := f.honest(alice, secA, laterStill)
	revB := f.reveal(bob, secB, "", laterStill)
	rep := f.check(laterStill)
	want(t, rep, honestA, StatusAccepted, "")
	want(t, rep, revB, StatusRejected, ReasonMalformed)
}

// TestCheckRoundForGatesOnlyWanted: the check of one reveal runs the gate on
// that reveal's submission alone, and gives the same outcome as the round's.
func TestCheckRoundForGatesOnlyWanted(t *testing.T) {
	f := newRoundFixture(t)
	alice, bob := newSigner(t), newSigner(t)
	secA := f.commit(alice, "alice\n", beforeClose)
	secB := f.commit(bob, "bob: bad\n", beforeClose)
	revA := f.honest(alice, secA, afterClose)
	revB := f.honest(bob, secB, afterClose)
	var gated []string
	gateFn := func(_ context.Context, _ string, _, sub fs.FS) ([]gate.Violation, error) {
		b, err := fs.ReadFile(sub, "optimizer.py")
		if err != nil {
			return nil, err
		}
		gated = append(gated, string(b))
		if strings.Contains(string(b), "bad") {
			return []gate.Violation{{Rule: "bad", Detail: "bad content"}}, nil
		}
		return nil, nil
	}
	obs := Observation{Now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	rep, err := CheckRound(f.ctx, f.l, f.round, f.seen, obs, gateFn)
	if err != nil {
		t.Fatal(err)
	}
	if len(gated) != 2 {
		t.Fatalf("the round's check gated %d submissions, want 2", len(gated))
	}
	want(t, rep, revA, StatusAccepted, "")
	want(t, rep, revB, StatusRejected, ReasonGateFailed)
	for _, tc := range []struct {
		name           string
		reveal         digest.Digest
		content        string
		status, reason string
	}{
		{"alice", revA, "alice\n", StatusAccepted, ""},
		{"bob", revB, "bob: bad\n", StatusRejected, ReasonGateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gated = nil
			one, err := CheckRoundFor(f.ctx, f.l, f.round, f.seen, obs, gateFn, []digest.Digest{tc.reveal})
			if err != nil {
				t.Fatal(err)
			}
			if len(gated) != 1 || gated[0] != tc.content {
				t.Errorf("gated %q, want only %q", gated, tc.content)
			}
			want(t, one, tc.reveal, tc.status, tc.reason)
			all, _ := rep.Find(tc.reveal)
			if got, _ := one.Find(tc.reveal); !reflect.DeepEqual(got, all) {
				t.Errorf("entry %+v, the round's check gives %+v", got, all)
			}
		})
	}
}
