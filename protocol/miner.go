package protocol

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/gate"
	"github.com/feval/feval/internal/strictjson"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// MinerKeyTitle is the title of the commitment layer that carries the miner's
// public key (PEM).
const MinerKeyTitle = "miner.pub"

// ErrDamaged reports private state of the store's own user (a miner's
// commitment secrets, a validator's first-seen records) that does not parse.
var ErrDamaged = errors.New("damaged private state")

// ErrUnknownCommitment reports a commitment the miner's store has no secret for.
var ErrUnknownCommitment = errors.New("no such commitment in this store")

// CreateTask packs a task directory into a signed task artifact.
func CreateTask(ctx context.Context, l *cas.Layout, s *bundle.Signer, protocol, dir, created string) (ocispec.Descriptor, error) {
	if !ValidProtocol(protocol) {
		return ocispec.Descriptor{}, fmt.Errorf("protocol %q: want one of %s", protocol, strings.Join(Protocols, ", "))
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if !fi.IsDir() {
		return ocispec.Descriptor{}, fmt.Errorf("%s: a task is a directory", dir)
	}
	layer, err := bundle.PackTree(l, dir, nil)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	var size int64
	fmt.Sscan(layer.Annotations[bundle.AnnotationContentSize], &size)
	rec := Task{Protocol: protocol, Content: bundle.Content{Type: "tree", Digest: digest.Digest(layer.Annotations[bundle.AnnotationContentDigest]), Size: size}}
	return bundle.WriteSigned(ctx, l, s, bundle.Artifact{Kind: KindTask, Record: rec, Layers: []ocispec.Descriptor{layer}, Created: created})
}

// OpenRound writes a signed round for a task already in the store. The round's
// subject is the task.
func OpenRound(ctx context.Context, l *cas.Layout, s *bundle.Signer, task ocispec.Descriptor, commitUntil, revealUntil Window, created string) (ocispec.Descriptor, error) {
	var t Task
	taskArt, err := LoadAs(ctx, l, task, KindTask, &t)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if commitUntil.Kind != revealUntil.Kind {
		return ocispec.Descriptor{}, errors.New("both windows must be times or both heights")
	}
	if !windowBefore(commitUntil, revealUntil) {
		return ocispec.Descriptor{}, fmt.Errorf("the reveal window (%s) must close after the commit window (%s)", revealUntil, commitUntil)
	}
	rec := Round{Task: task.Digest, Protocol: t.Protocol, CommitUntil: commitUntil, RevealUntil: revealUntil}
	subj := taskArt.Desc
	return bundle.WriteSigned(ctx, l, s, bundle.Artifact{Kind: KindRound, Record: rec, Subject: &subj, Created: created})
}

func windowBefore(a, b Window) bool {
	if a.Kind == "height" {
		return a.Height < b.Height
	}
	return a.Time < b.Time // RFC 3339 UTC with fixed layout sorts as time
}

// ErrGate reports a submission that fails its protocol's static gate before it
// is committed.
var ErrGate = errors.New("submission fails the static gate")

// PreCheck runs the round's static gate over a submission on disk before the
// miner commits to it, so that a miner learns at once what the validators will
// reject at reveal time. The round's task must be in the store (pull the round).
func PreCheck(ctx context.Context, st cas.Store, round ocispec.Descriptor, path string, gateFn GateFunc) ([]gate.Violation, error) {
	var r Round
	if _, err := LoadAs(ctx, st, round, KindRound, &r); err != nil {
		return nil, fmt.Errorf("reading round: %w", err)
	}
	task, err := LoadTaskFS(ctx, st, r.Task)
	if err != nil {
		return nil, fmt.Errorf("the round's task is not in this store (pull the round again): %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var sub fs.FS
	if fi.IsDir() {
		sub = os.DirFS(path)
	} else {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		sub = bundle.TreeFS([]bundle.File{{Path: filepath.Base(path), Mode: 0o644, Data: b}})
	}
	return gateFn(ctx, r.Protocol, task, sub)
}

// Secret is what the miner keeps private between commit and reveal. It lives in
// the store's private directory, never in an artifact until the reveal.
type Secret struct {
	Commitment         string        `json:"commitment"`
	CommitmentArtifact digest.Digest `json:"commitment_artifact"`
	Round              digest.Digest `json:"round"`
	Submission         digest.Digest `json:"submission"`
	Miner              string        `json:"miner"`
	Salt               string        `json:"salt"`
}

// Committed is the outcome of Commit.
type Committed struct {
	Commitment string         `json:"commitment"` // the line to publish
	Artifact   cas.Descriptor `json:"artifact"`   // the commitment artifact
	Submission digest.Digest  `json:"submission"`
	Round      digest.Digest  `json:"round"`
}

// Commit packs the submission at path, draws a salt from rand, writes the signed
// commitment artifact (subject: the round) and keeps the secret in the store.
func Commit(ctx context.Context, l *cas.Layout, s *bundle.Signer, round ocispec.Descriptor, path, created string, rand io.Reader) (Committed, error) {
	var r Round
	roundArt, err := LoadAs(ctx, l, round, KindRound, &r)
	if err != nil {
		return Committed{}, fmt.Errorf("reading round: %w", err)
	}
	sub, err := PackSubmission(ctx, l, s, path, bundle.PackOptions{Kind: KindSubmission, Created: created})
	if err != nil {
		return Committed{}, err
	}
	salt := make([]byte, SaltSize)
	if _, err := io.ReadFull(rand, salt); err != nil {
		return Committed{}, fmt.Errorf("drawing salt: %w", err)
	}
	miner := s.Public().Fingerprint
	value := ComputeCommitment(sub.Artifact.Digest, miner, round.Digest, salt)
	keyLayer, err := bundle.PushData(ctx, l, MinerKeyTitle, s.Public().PEM)
	if err != nil {
		return Committed{}, err
	}
	subj := roundArt.Desc
	desc, err := bundle.WriteSigned(ctx, l, s, bundle.Artifact{
		Kind: KindCommitment, Record: Commitment{Commitment: value, Round: round.Digest, Miner: miner},
		Layers: []ocispec.Descriptor{keyLayer}, Subject: &subj, Created: created,
	})
	if err != nil {
		return Committed{}, err
	}
	sec := Secret{Commitment: value, CommitmentArtifact: desc.Digest, Round: round.Digest, Submission: sub.Artifact.Digest, Miner: miner, Salt: hex.EncodeToString(salt)}
	if err := saveSecret(l, sec); err != nil {
		return Committed{}, err
	}
	return Committed{Commitment: value, Artifact: cas.Descriptor(desc), Submission: sub.Artifact.Digest, Round: round.Digest}, nil
}

func secretsDir(l *cas.Layout) string { return filepath.Join(l.Root(), cas.PrivateDir, "commitments") }

func saveSecret(l *cas.Layout, sec Secret) error {
	dir := secretsDir(l)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(sec)
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(sec.Commitment, "sha256:") + ".json"
	if err := cas.WriteFileAtomic(filepath.Join(dir, name), b); err != nil {
		return err
	}
	return os.Chmod(filepath.Join(dir, name), 0o600)
}

// LoadSecret finds the secret of a commitment by its value, a prefix of at least
// 12 hex digits, or the commitment artifact's digest.
func LoadSecret(l *cas.Layout, ref string) (Secret, error) {
	entries, err := os.ReadDir(secretsDir(l))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Secret{}, err
	}
	want := strings.TrimPrefix(ref, "sha256:")
	if len(want) < cas.MinPrefix {
		return Secret{}, fmt.Errorf("%q: give the commitment (at least %d hex digits): %w", ref, cas.MinPrefix, cas.ErrBadReference)
	}
	var found []Secret
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(secretsDir(l), n))
		if err != nil {
			return Secret{}, err
		}
		var s Secret
		if err := strictjson.Decode(b, &s); err != nil {
			return Secret{}, fmt.Errorf("commitment secret %s: %w: %v", filepath.Join(secretsDir(l), n), ErrDamaged, err)
		}
		if strings.HasPrefix(strings.TrimPrefix(s.Commitment, "sha256:"), want) || strings.HasPrefix(s.CommitmentArtifact.Encoded(), want) {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 0:
		return Secret{}, fmt.Errorf("%s: %w", ref, ErrUnknownCommitment)
	case 1:
		return found[0], nil
	}
	return Secret{}, fmt.Errorf("%s matches %d commitments; give more digits: %w", ref, len(found), cas.ErrBadReference)
}

// Revealed is the outcome of RevealCommitment.
type Revealed struct {
	Artifact   cas.Descriptor `json:"artifact"` // the reveal artifact
	Commitment digest.Digest  `json:"commitment_artifact"`
	Submission digest.Digest  `json:"submission"`
}

// RevealCommitment writes the signed reveal (subject: the commitment artifact).
func RevealCommitment(ctx context.Context, l *cas.Layout, s *bundle.Signer, sec Secret, created string) (Revealed, error) {
	if s.Public().Fingerprint != sec.Miner {
		return Revealed{}, fmt.Errorf("commitment %s was made with key %s, not the key given", sec.Commitment, sec.Miner[:16])
	}
	commit, err := l.Resolve(ctx, sec.CommitmentArtifact.String())
	if err != nil {
		return Revealed{}, fmt.Errorf("commitment artifact: %w", err)
	}
	rec := Reveal{Commitment: sec.Commitment, Round: sec.Round, Miner: sec.Miner, Submission: sec.Submission, Salt: sec.Salt}
	desc, err := bundle.WriteSigned(ctx, l, s, bundle.Artifact{Kind: KindReveal, Record: rec, Subject: &commit, Created: created})
	if err != nil {
		return Revealed{}, err
	}
	return Revealed{Artifact: cas.Descriptor(desc), Commitment: commit.Digest, Submission: sec.Submission}, nil
}
