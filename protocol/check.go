package protocol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/gate"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Reveal statuses and rejection reasons. The reasons are part of the protocol:
// docs/PROTOCOL.md lists them and verdicts carry them.
const (
	StatusAccepted   = "accepted"
	StatusRejected   = "rejected"
	StatusPending    = "pending"    // committed, not yet revealed, reveal window open
	StatusUnrevealed = "unrevealed" // committed, reveal window closed without a reveal

	ReasonMalformed          = "malformed"           // a record does not have the required form
	ReasonBadSignature       = "bad_signature"       // commitment not signed by the key it names
	ReasonKeyMismatch        = "key_mismatch"        // reveal or submission not signed by the committing key
	ReasonRoundMismatch      = "round_mismatch"      // reveal names another round, miner or commitment
	ReasonCommitmentMismatch = "commitment_mismatch" // salt and submission do not hash to the commitment
	ReasonCommitLate         = "commit_late"         // commitment first seen after the commit window
	ReasonRevealEarly        = "reveal_early"        // reveal first seen before the commit window closed
	ReasonRevealLate         = "reveal_late"         // reveal first seen after the reveal window
	ReasonDoubleReveal       = "double_reveal"       // another reveal of this commitment came first
	ReasonCopy               = "copy"                // same content under an earlier commitment of another key
	ReasonSubmissionMissing  = "submission_missing"  // the revealed submission is not available
	ReasonGateFailed         = "gate_failed"         // the protocol's static gate rejected the submission
)

// GateFunc runs the static gate of a protocol over a submission tree, given the
// task tree. It never executes submission code.
type GateFunc func(ctx context.Context, protocol string, task, submission fs.FS) ([]gate.Violation, error)

// Entry is the status of one commitment and, if any, its reveal.
type Entry struct {
	Commitment         string           `json:"commitment"`
	CommitmentArtifact digest.Digest    `json:"commitment_artifact"`
	Miner              string           `json:"miner"`
	CommitSeen         Seen             `json:"commit_seen"`
	Reveal             digest.Digest    `json:"reveal,omitempty"`
	RevealSeen         *Seen            `json:"reveal_seen,omitempty"`
	Submission         digest.Digest    `json:"submission,omitempty"`
	Content            digest.Digest    `json:"content,omitempty"`
	Status             string           `json:"status"`
	Reason             string           `json:"reason,omitempty"`
	Detail             string           `json:"detail,omitempty"`
	Violations         []gate.Violation `json:"violations,omitempty"`
}

// RoundReport is the status of every commitment of a round, in commitment order.
type RoundReport struct {
	Round   digest.Digest `json:"round"`
	Task    digest.Digest `json:"task"`
	Entries []Entry       `json:"entries"`
	// Extra lists the reveals that do not answer their commitment: invalid
	// ones (not signed by the committing key, or not opening it), with their
	// reason, and valid ones that came after the first (double_reveal).
	Extra []Entry `json:"extra"`
}

// Find returns the entry of a reveal (accepted or not).
func (r RoundReport) Find(reveal digest.Digest) (Entry, bool) {
	for _, e := range append(append([]Entry{}, r.Entries...), r.Extra...) {
		if e.Reveal == reveal {
			return e, true
		}
	}
	return Entry{}, false
}

// CheckRound applies every reveal check to the commitments and reveals of a round
// held in the store, using the validator's first-seen records as the clock and
// obs.Now to tell pending from unrevealed. It trusts nothing a record says about
// itself: signatures are checked against the key the commitment binds, and the
// commitment hash is recomputed.
func CheckRound(ctx context.Context, st cas.Store, round ocispec.Descriptor, seen map[digest.Digest]Seen, obs Observation, gateFn GateFunc) (RoundReport, error) {
	return CheckRoundFor(ctx, st, round, seen, obs, gateFn, nil)
}

// CheckRoundFor is CheckRound for the reveals a validator evaluates: the
// report lists only the entries of the reveals in want (nil: every entry, as
// CheckRound), and each of those entries is the one CheckRound gives. Only
// the wanted reveals are gated. Every reveal of the round is still loaded and
// its signature checked, since which opening answers a commitment depends on
// all of them; the submission of another reveal is read and its content
// verified only when the content it claims is the content of a wanted reveal,
// the only case in which it can make a wanted reveal a copy (a submission
// whose verified content differs from its claim has no content).
func CheckRoundFor(ctx context.Context, st cas.Store, round ocispec.Descriptor, seen map[digest.Digest]Seen, obs Observation, gateFn GateFunc, want []digest.Digest) (RoundReport, error) {
	var wanted map[digest.Digest]bool
	if want != nil {
		wanted = make(map[digest.Digest]bool, len(want))
		for _, d := range want {
			wanted[d] = true
		}
	}
	var r Round
	if _, err := LoadAs(ctx, st, round, KindRound, &r); err != nil {
		return RoundReport{}, fmt.Errorf("reading round: %w", err)
	}
	rep := RoundReport{Round: round.Digest, Task: r.Task, Entries: []Entry{}, Extra: []Entry{}}
	commits, err := st.Referrers(ctx, round, bundle.ArtifactType(KindCommitment))
	if err != nil {
		return rep, err
	}
	var taskFS fs.FS
	loadTask := func() (fs.FS, error) {
		if taskFS == nil {
			fsys, err := LoadTaskFS(ctx, st, r.Task)
			if err != nil {
				return nil, err
			}
			taskFS = fsys
		}
		return taskFS, nil
	}
	opened := map[digest.Digest]bool{} // commitment artifacts with a valid opening
	// deferred are the valid openings not wanted whose submission was not
	// read: the content their submission record claims, and their key.
	type pending struct {
		claimed digest.Digest
		key     *bundle.PublicKey
	}
	deferred := map[digest.Digest]pending{}
	for _, cd := range commits {
		s, ok := seen[cd.Digest]
		if !ok {
			continue // not observed by this validator: no clock reading, no status
		}
		e, key := checkCommitment(ctx, st, cd, round.Digest, r, s)
		reveals, err := st.Referrers(ctx, cd, bundle.ArtifactType(KindReveal))
		if err != nil {
			return rep, err
		}
		if e.Status == StatusRejected || key == nil {
			rep.Entries = append(rep.Entries, e)
			// A rejected commitment's reveals share its fate: listed with its
			// reason, so that each has a status to evaluate.
			for _, rd := range reveals {
				if rs, ok := seen[rd.Digest]; ok {
					re := e
					re.Reveal, re.RevealSeen = rd.Digest, &rs
					rep.Extra = append(rep.Extra, re)
				}
			}
			continue
		}
		// Only a valid opening (signed by the committing key, opening the
		// commitment) answers the commitment. Anything else anyone pushed is
		// listed with its reason and ignored, so no one but the miner can spoil
		// the miner's reveal.
		var valid []Entry
		for _, rd := range reveals {
			rs, ok := seen[rd.Digest]
			if !ok {
				continue
			}
			re := e
			re.Reveal, re.RevealSeen = rd.Digest, &rs
			if wanted != nil && !wanted[rd.Digest] {
				// Only whether it is a valid opening matters, and what
				// content it claims.
				if ok, claimed := openingOf(ctx, st, &re, rd, round.Digest, key); ok {
					deferred[rd.Digest] = pending{claimed, key}
					valid = append(valid, re)
				}
				continue
			}
			if checkReveal(ctx, st, &re, rd, round.Digest, r, key, loadTask, gateFn, r.Protocol) {
				valid = append(valid, re)
			} else {
				rep.Extra = append(rep.Extra, re)
			}
		}
		if len(valid) == 0 {
			e.Status = StatusPending
			if !within(obs.seen(), r.RevealUntil) {
				e.Status = StatusUnrevealed
			}
			rep.Entries = append(rep.Entries, e)
			continue
		}
		// The first valid opening seen (ties: smaller digest) answers the
		// commitment; a later valid opening is a double reveal.
		sort.Slice(valid, func(i, j int) bool {
			a, b := valid[i], valid[j]
			if a.RevealSeen.Time != b.RevealSeen.Time {
				return a.RevealSeen.Time < b.RevealSeen.Time
			}
			return a.Reveal < b.Reveal
		})
		opened[valid[0].CommitmentArtifact] = true
		rep.Entries = append(rep.Entries, valid[0])
		for _, c := range valid[1:] {
			c.Status, c.Reason, c.Detail = StatusRejected, ReasonDoubleReveal, "commitment already revealed by "+valid[0].Reveal.String()
			c.Violations = nil
			rep.Extra = append(rep.Extra, c)
		}
	}
	sort.SliceStable(rep.Entries, func(i, j int) bool { return commitBefore(rep.Entries[i], rep.Entries[j]) })
	if wanted != nil {
		// The deferred openings that could be the original of a wanted
		// reveal's content: read and verify their submission now.
		contents := map[digest.Digest]bool{}
		for _, e := range rep.Entries {
			if wanted[e.Reveal] && e.Content != "" {
				contents[e.Content] = true
			}
		}
		for i, e := range rep.Entries {
			p, ok := deferred[e.Reveal]
			if ok && contents[p.claimed] {
				loadSubmission(ctx, st, e.Submission, p.key, &rep.Entries[i])
			}
		}
	}
	// Copies: the earliest commitment of a content wins; later ones from other
	// keys lose. Every valid opening whose content is known counts as an
	// original, whatever its own outcome (late, gate failure), so a copier
	// gains nothing when the original is rejected.
	first := map[digest.Digest]Entry{}
	for i, e := range rep.Entries {
		if !opened[e.CommitmentArtifact] || e.Content == "" {
			continue
		}
		orig, ok := first[e.Content]
		if !ok {
			first[e.Content] = e
			continue
		}
		if orig.Miner != e.Miner && e.Status == StatusAccepted {
			rep.Entries[i].Status, rep.Entries[i].Reason = StatusRejected, ReasonCopy
			rep.Entries[i].Detail = "same content as " + orig.Submission.String() + " committed earlier by " + orig.Miner[:16]
		}
	}
	sort.SliceStable(rep.Extra, func(i, j int) bool { return rep.Extra[i].Reveal < rep.Extra[j].Reveal })
	if wanted != nil {
		keep := func(es []Entry) []Entry {
			out := []Entry{}
			for _, e := range es {
				if e.Reveal != "" && wanted[e.Reveal] {
					out = append(out, e)
				}
			}
			return out
		}
		rep.Entries, rep.Extra = keep(rep.Entries), keep(rep.Extra)
	}
	return rep, nil
}

// openingOf applies the checks of checkReveal that decide whether a reveal is
// a valid opening of the commitment (the same checks, in the same order), and
// returns the content digest its submission record claims ("" when the
// submission cannot be read). It reads no submission content.
func openingOf(ctx context.Context, st cas.Store, e *Entry, rd ocispec.Descriptor, roundDigest digest.Digest, key *bundle.PublicKey) (bool, digest.Digest) {
	var rv Reveal
	if _, err := LoadAs(ctx, st, rd, KindReveal, &rv); err != nil || rv.Validate() != nil {
		return false, ""
	}
	e.Submission = rv.Submission
	if !signedBy(ctx, st, rd, key) || rv.Commitment != e.Commitment || rv.Round != roundDigest || rv.Miner != e.Miner || !rv.Opens() {
		return false, ""
	}
	sd, err := st.Resolve(ctx, rv.Submission.String())
	if err != nil {
		return true, ""
	}
	var content bundle.ContentRecord
	if _, err := LoadAs(ctx, st, sd, KindSubmission, &content); err != nil {
		return true, ""
	}
	return true, content.Content.Digest
}

func commitBefore(a, b Entry) bool {
	if a.CommitSeen.Time != b.CommitSeen.Time {
		return a.CommitSeen.Time < b.CommitSeen.Time
	}
	return a.Commitment < b.Commitment
}

func reject(e *Entry, reason, format string, a ...any) {
	e.Status, e.Reason, e.Detail = StatusRejected, reason, fmt.Sprintf(format, a...)
}

// checkCommitment loads a commitment, checks its form, its signature against the
// key it carries, and its timing. It returns the miner's key when the commitment
// is sound.
func checkCommitment(ctx context.Context, st cas.Store, cd ocispec.Descriptor, round digest.Digest, r Round, s Seen) (Entry, *bundle.PublicKey) {
	e := Entry{CommitmentArtifact: cd.Digest, CommitSeen: s, Status: StatusAccepted}
	var c Commitment
	art, err := LoadAs(ctx, st, cd, KindCommitment, &c)
	if err != nil {
		reject(&e, ReasonMalformed, "%v", err)
		return e, nil
	}
	e.Commitment, e.Miner = c.Commitment, c.Miner
	if err := c.Validate(); err != nil || c.Round != round || len(art.Payloads) != 1 {
		reject(&e, ReasonMalformed, "commitment record or layers do not have the required form")
		return e, nil
	}
	pem, err := bundle.ReadPayload(ctx, st, art.Payloads[0], 16<<10)
	if err != nil {
		reject(&e, ReasonMalformed, "miner key: %v", err)
		return e, nil
	}
	key, err := bundle.ParsePublicKey(pem)
	if err != nil || key.Fingerprint != c.Miner {
		reject(&e, ReasonMalformed, "the key in the commitment is not the miner %s", c.Miner)
		return e, nil
	}
	if !signedBy(ctx, st, cd, key) {
		reject(&e, ReasonBadSignature, "commitment is not signed by its miner's key")
		return e, nil
	}
	if !within(s, r.CommitUntil) {
		reject(&e, ReasonCommitLate, "first seen %s, commits closed %s", seenString(s), r.CommitUntil)
		return e, key
	}
	return e, key
}

// checkReveal applies the checks of one reveal and sets e's status. It reports
// whether the reveal is a valid opening of the commitment: well formed, signed
// by the committing key, naming the commitment, round and miner, and hashing to
// the commitment. Only the miner can make a valid opening; what happens to it
// after that (timing, submission, gate) is the miner's own doing. The content
// digest of a valid opening's submission is recorded whenever it can be read,
// even when the reveal is rejected, so that copies of it are recognised.
func checkReveal(ctx context.Context, st cas.Store, e *Entry, rd ocispec.Descriptor, roundDigest digest.Digest, r Round, key *bundle.PublicKey, loadTask func() (fs.FS, error), gateFn GateFunc, protocol string) bool {
	e.Status, e.Reason, e.Detail = StatusAccepted, "", ""
	var rv Reveal
	if _, err := LoadAs(ctx, st, rd, KindReveal, &rv); err != nil {
		reject(e, ReasonMalformed, "%v", err)
		return false
	}
	if err := rv.Validate(); err != nil {
		reject(e, ReasonMalformed, "%v", err)
		return false
	}
	e.Submission = rv.Submission
	if !signedBy(ctx, st, rd, key) {
		reject(e, ReasonKeyMismatch, "reveal is not signed by the committing key %s", key.Fingerprint[:16])
		return false
	}
	if rv.Commitment != e.Commitment || rv.Round != roundDigest || rv.Miner != e.Miner {
		reject(e, ReasonRoundMismatch, "reveal names another commitment, round or miner")
		return false
	}
	if !rv.Opens() {
		reject(e, ReasonCommitmentMismatch, "salt and submission %s do not hash to %s", rv.Submission, rv.Commitment)
		return false
	}
	subFS, subReason, subDetail := loadSubmission(ctx, st, rv.Submission, key, e)
	if within(*e.RevealSeen, r.CommitUntil) {
		reject(e, ReasonRevealEarly, "first seen %s, before commits closed %s", seenString(*e.RevealSeen), r.CommitUntil)
		return true
	}
	if !within(*e.RevealSeen, r.RevealUntil) {
		reject(e, ReasonRevealLate, "first seen %s, reveals closed %s", seenString(*e.RevealSeen), r.RevealUntil)
		return true
	}
	if subReason != "" {
		reject(e, subReason, "%s", subDetail)
		return true
	}
	if gateFn == nil {
		return true
	}
	task, err := loadTask()
	if err != nil {
		reject(e, ReasonMalformed, "task: %v", err)
		return true
	}
	vs, err := gateFn(ctx, protocol, task, subFS)
	if err != nil {
		reject(e, ReasonGateFailed, "gate could not run: %v", err)
		return true
	}
	if len(vs) > 0 {
		e.Violations = vs
		reject(e, ReasonGateFailed, "%d violations, first: %s", len(vs), vs[0].Rule)
	}
	return true
}

// loadSubmission reads a revealed submission signed by key and records its
// content digest in e. On failure it returns the rejection reason and detail.
func loadSubmission(ctx context.Context, st cas.Store, sub digest.Digest, key *bundle.PublicKey, e *Entry) (fs.FS, string, string) {
	sd, err := st.Resolve(ctx, sub.String())
	if err != nil {
		return nil, ReasonSubmissionMissing, err.Error()
	}
	var content bundle.ContentRecord
	subArt, err := LoadAs(ctx, st, sd, KindSubmission, &content)
	if err != nil {
		if errors.Is(err, cas.ErrNotFound) {
			return nil, ReasonSubmissionMissing, err.Error()
		}
		return nil, ReasonMalformed, "submission: " + err.Error()
	}
	if !signedBy(ctx, st, sd, key) {
		return nil, ReasonKeyMismatch, "submission is not signed by the committing key"
	}
	fsys, err := LoadSubmissionFS(ctx, st, subArt)
	if err != nil {
		return nil, ReasonMalformed, "submission content: " + err.Error()
	}
	// LoadSubmissionFS verified the payload against its content digest; the record's
	// claim must be that digest, or a copier could name other content and
	// escape the copy check.
	if payload := subArt.Payloads[0].Annotations[bundle.AnnotationContentDigest]; content.Content.Digest.String() != payload {
		return nil, ReasonMalformed, fmt.Sprintf("submission record names content %s, its payload is %s", content.Content.Digest, payload)
	}
	e.Content = content.Content.Digest
	return fsys, "", ""
}

// signedBy reports whether key made one of target's signatures. Other
// signature referrers (another key's, a damaged one, another tool's) are
// ignored: whoever can push to the store can add them, so they must not be able
// to unmake the signer's signature.
func signedBy(ctx context.Context, st cas.Store, target ocispec.Descriptor, key *bundle.PublicKey) bool {
	fps, _ := bundle.VerifySignatures(ctx, st, target, []*bundle.PublicKey{key})
	for _, fp := range fps {
		if fp == key.Fingerprint {
			return true
		}
	}
	return false
}

func seenString(s Seen) string {
	if s.Height != nil {
		return fmt.Sprintf("%s (height %d)", s.Time, *s.Height)
	}
	return s.Time
}

// CheckReveal applies the checks of one reveal that need nothing beyond its own
// records: the commitment's form and signature, the opening, the signatures of
// reveal and submission, the windows (against the given first-seen readings)
// and the gate. Round-wide checks (double reveal, copy) need the whole round and
// are CheckRound's. Replay uses CheckReveal with the seen times a verdict records.
func CheckReveal(ctx context.Context, st cas.Store, round, commitment, reveal ocispec.Descriptor, commitSeen, revealSeen Seen, gateFn GateFunc) (Entry, error) {
	var r Round
	if _, err := LoadAs(ctx, st, round, KindRound, &r); err != nil {
		return Entry{}, fmt.Errorf("reading round: %w", err)
	}
	e, key := checkCommitment(ctx, st, commitment, round.Digest, r, commitSeen)
	if e.Status == StatusRejected || key == nil {
		e.Reveal, e.RevealSeen = reveal.Digest, &revealSeen
		return e, nil
	}
	var taskFS fs.FS
	loadTask := func() (fs.FS, error) {
		if taskFS == nil {
			fsys, err := LoadTaskFS(ctx, st, r.Task)
			if err != nil {
				return nil, err
			}
			taskFS = fsys
		}
		return taskFS, nil
	}
	e.Reveal, e.RevealSeen = reveal.Digest, &revealSeen
	checkReveal(ctx, st, &e, reveal, round.Digest, r, key, loadTask, gateFn, r.Protocol)
	return e, nil
}
