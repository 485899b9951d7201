package protocol

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Artifact kinds of the protocol.
const (
	KindTask       = "task"
	KindRound      = "round"
	KindSubmission = "submission"
	KindCommitment = "commitment"
	KindReveal     = "reveal"
	KindVerdict    = "verdict"
)

// Protocols feval knows.
var Protocols = []string{"rollouts", "scenarios", "optimizer"}

// ValidProtocol reports whether p is a known protocol.
func ValidProtocol(p string) bool {
	for _, q := range Protocols {
		if p == q {
			return true
		}
	}
	return false
}

// CommitmentDomain is the domain tag of the commitment hash.
const CommitmentDomain = "feval/commitment/v1"

// SaltSize is the length of a commitment salt in bytes.
const SaltSize = 32

// ErrMalformed reports a protocol record that does not have the required form.
var ErrMalformed = errors.New("malformed record")

// ErrWrongKind reports an artifact of another kind than the one required (a
// trace given where a submission is expected). It is also ErrMalformed.
var ErrWrongKind = fmt.Errorf("wrong artifact kind: %w", ErrMalformed)

// Task is the record of a task artifact: which protocol it is for, and its
// content (the task directory, as a tree payload).
type Task struct {
	Protocol string         `json:"protocol"`
	Content  bundle.Content `json:"content"`
}

// Window is the end of a round phase, either a time (RFC 3339 UTC) or a block
// height of an external chain.
type Window struct {
	Kind   string `json:"kind"` // "time" or "height"
	Time   string `json:"time,omitempty"`
	Height int64  `json:"height,omitempty"`
}

// ParseWindow reads "2026-12-01T00:00:00Z" (a time) or "height:123" / "#123" (a
// block height).
func ParseWindow(s string) (Window, error) {
	for _, pre := range []string{"height:", "#"} {
		if len(s) > len(pre) && s[:len(pre)] == pre {
			var h int64
			if _, err := fmt.Sscanf(s[len(pre):], "%d", &h); err != nil || h < 0 || fmt.Sprint(h) != s[len(pre):] {
				return Window{}, fmt.Errorf("%q: a height is a non-negative integer, e.g. height:4200", s)
			}
			return Window{Kind: "height", Height: h}, nil
		}
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return Window{}, fmt.Errorf("%q: want an RFC 3339 time such as 2026-12-01T00:00:00Z, or height:N", s)
	}
	return Window{Kind: "time", Time: t.UTC().Format(time.RFC3339)}, nil
}

func (w Window) String() string {
	if w.Kind == "height" {
		return fmt.Sprintf("height:%d", w.Height)
	}
	return w.Time
}

// Round is the record of a round: the task, and when commits and reveals close.
type Round struct {
	Task        digest.Digest `json:"task"`
	Protocol    string        `json:"protocol"`
	CommitUntil Window        `json:"commit_until"`
	RevealUntil Window        `json:"reveal_until"`
}

// Commitment is the record a miner publishes before the audit seed exists. It
// reveals nothing about the submission.
type Commitment struct {
	Commitment string        `json:"commitment"`
	Round      digest.Digest `json:"round"`
	Miner      string        `json:"miner"` // public-key fingerprint
}

// Reveal opens a commitment: the submission and the salt.
type Reveal struct {
	Commitment string        `json:"commitment"`
	Round      digest.Digest `json:"round"`
	Miner      string        `json:"miner"`
	Submission digest.Digest `json:"submission"`
	Salt       string        `json:"salt"` // hex, SaltSize bytes
}

// ComputeCommitment returns "sha256:" + hex SHA-256 of
// domain || 0x00 || submission || 0x00 || miner || 0x00 || round || 0x00 || salt,
// where the three strings are the digests' and fingerprint's text forms.
func ComputeCommitment(submission digest.Digest, miner string, round digest.Digest, salt []byte) string {
	h := sha256.New()
	for _, part := range []string{CommitmentDomain, submission.String(), miner, round.String()} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(salt)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Validate checks a commitment record's form.
func (c Commitment) Validate() error {
	if !validHash(c.Commitment) || c.Round.Validate() != nil || !validFingerprint(c.Miner) {
		return fmt.Errorf("commitment record: %w", ErrMalformed)
	}
	return nil
}

// Validate checks a reveal record's form.
func (r Reveal) Validate() error {
	if !lowerHex(r.Salt, SaltSize) || !validHash(r.Commitment) || r.Round.Validate() != nil ||
		r.Submission.Validate() != nil || !validFingerprint(r.Miner) {
		return fmt.Errorf("reveal record: %w", ErrMalformed)
	}
	return nil
}

// Opens reports whether the reveal hashes to its commitment.
func (r Reveal) Opens() bool {
	salt, err := hex.DecodeString(r.Salt)
	return err == nil && ComputeCommitment(r.Submission, r.Miner, r.Round, salt) == r.Commitment
}

func validHash(s string) bool {
	d, err := digest.Parse(s)
	return err == nil && d.Algorithm() == digest.SHA256
}

func validFingerprint(s string) bool { return lowerHex(s, 32) }

// lowerHex reports whether s is exactly n bytes in lower-case hex: one
// spelling per value, so that no two records differ only in the case of a hex
// digit.
func lowerHex(s string, n int) bool {
	if len(s) != 2*n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// LoadAs loads an artifact and decodes its record, requiring the given kind.
func LoadAs(ctx context.Context, st cas.Store, desc ocispec.Descriptor, kind string, v any) (*bundle.Loaded, error) {
	art, err := bundle.Load(ctx, st, desc)
	if err != nil {
		return nil, err
	}
	if art.Kind != kind {
		return nil, fmt.Errorf("%s is a %s, not a %s: %w", desc.Digest, art.Kind, kind, ErrWrongKind)
	}
	if err := art.Decode(v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return art, nil
}
