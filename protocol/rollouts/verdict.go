package rollouts

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"time"

	"github.com/feval/feval/beacon"
	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/gate"
	"github.com/feval/feval/model"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Verdict statuses (DESIGN: infrastructure failure is never a score).
const (
	StatusPassed       = "passed"
	StatusRejected     = "rejected"
	StatusUndetermined = "undetermined"
	StatusInfraError   = "infra_error"

	// ReasonRewardMismatch: an audited row's claimed reward differs from the
	// recomputed one.
	ReasonRewardMismatch = "reward_mismatch"
	// ReasonUndeterminedRows: some audited rows could not be decided.
	ReasonUndeterminedRows = "undetermined_rows"
	// ReasonChecker: a checker failed on the task itself (not the miner's fault).
	ReasonChecker = "checker_error"
)

// Row outcomes in an audit.
const (
	OutcomeMatch        = "match"
	OutcomeMismatch     = "mismatch"
	OutcomeUndetermined = "undetermined"
	// OutcomeMalformed: the audited row of an indexed submission (format 2)
	// is not a valid row or differs from its claims line; it counts as a
	// mismatch.
	OutcomeMalformed = "malformed"
)

// Beacon is the public randomness an audit sample is drawn from: a value that
// did not exist when commitments closed, and where it came from. A verified
// beacon is a drand round (Drand set): Source and Value are derived from it and
// Verified is true. The plain form (Source and Value as given, Verified false)
// is kept for tests and private runs; nothing shows that its value was not
// chosen, and verdicts and leaderboards say so.
type Beacon struct {
	Drand    *beacon.Drand `json:"drand,omitempty"`
	Source   string        `json:"source"`
	Value    string        `json:"value"`
	Verified bool          `json:"verified"`
}

// ErrBeacon reports a beacon that fails its checks: a drand signature that
// does not verify, an unknown chain, or a round other than the one the round's
// commit window fixes.
var ErrBeacon = errors.New("beacon rejected")

// ResolveBeacon checks b for a round and returns it with everything derived
// from it. For a drand beacon: the signature must verify with the chain's key;
// Source is "drand:<chain hash>:<round>", Value the lower-case hex of
// SHA-256(signature), Verified true (whatever b said); and the drand round must
// be the first one produced strictly after the round's commit window closed
// (for a height window, strictly after revealSeen's time, the validator's own
// reading of when the reveal, which needs commits closed, was first seen). A
// later round is refused too: a validator that could pick among later rounds
// could choose its sample. For a plain beacon Verified is false and Source and
// Value must be given.
func ResolveBeacon(b Beacon, r protocol.Round, revealSeen protocol.Seen) (Beacon, error) {
	if b.Drand == nil {
		if b.Source == "" || b.Value == "" {
			return b, fmt.Errorf("%w: a plain beacon needs a source and a value", ErrBeacon)
		}
		b.Verified = false
		return b, nil
	}
	d := *b.Drand
	chain, ok := beacon.Chains[d.Chain]
	if !ok {
		return b, fmt.Errorf("%w: %w: %q (known: quicknet %s)", ErrBeacon, beacon.ErrUnknownChain, d.Chain, beacon.Quicknet.Hash)
	}
	var after string
	switch r.CommitUntil.Kind {
	case "time":
		after = r.CommitUntil.Time
	default:
		after = revealSeen.Time
	}
	at, err := time.Parse(time.RFC3339, after)
	if err != nil {
		return b, fmt.Errorf("%w: no time to place the drand round after (%q)", ErrBeacon, after)
	}
	want := chain.FirstRoundAfter(at)
	if d.Round != want {
		why := "a later round could be chosen among several"
		if d.Round < want {
			why = beacon.ErrTooEarly.Error() + ": it existed before " + after
		}
		return b, fmt.Errorf("%w: %s round %d (%s): this round needs round %d, the first produced after %s (at %s)",
			ErrBeacon, chain.Name, d.Round, why, want, after, chain.RoundTime(want).Format(time.RFC3339))
	}
	return b.Derive()
}

// Text names a beacon and says whether it was verified.
func (b Beacon) Text() string {
	if b.Drand != nil && b.Verified {
		name := b.Drand.Chain
		if c, ok := beacon.Chains[b.Drand.Chain]; ok {
			name = c.Name
		}
		return fmt.Sprintf("drand %s round %d (verified), value %s", name, b.Drand.Round, b.Value)
	}
	return fmt.Sprintf("%s (unverified), value %s", b.Source, b.Value)
}

// Derive verifies a drand beacon's signature and derives its Source, Value and
// Verified from it, without the round-window rule of ResolveBeacon (which
// needs the round). A plain beacon is returned as unverified.
func (b Beacon) Derive() (Beacon, error) {
	if b.Drand == nil {
		b.Verified = false
		return b, nil
	}
	d := *b.Drand
	_, randomness, err := d.Verify()
	if err != nil {
		return b, fmt.Errorf("%w: %w", ErrBeacon, err)
	}
	return Beacon{Drand: &d, Source: d.Source(), Value: hex.EncodeToString(randomness[:]), Verified: true}, nil
}

// Verdict is the record a validator signs about one rollouts submission. It holds
// nothing that varies between runs: no time of evaluation, host or path. The
// first-seen readings are the validator's observations, recorded as inputs.
type Verdict struct {
	Protocol     string        `json:"protocol"`
	Status       string        `json:"status"`
	Reason       string        `json:"reason,omitempty"`
	Submission   digest.Digest `json:"submission"`
	Inputs       Inputs        `json:"inputs"`
	RevealCheck  RevealCheck   `json:"reveal_check"`
	Checkers     Checkers      `json:"checkers"`
	Rows         int           `json:"rows"`
	ClaimedScore string        `json:"claimed_score,omitempty"`
	// Model is the check of the committed model, in a task that binds rows
	// to one (Spec.Model).
	ModelCheck *ModelCheck      `json:"model_check,omitempty"`
	Audit      *Audit           `json:"audit,omitempty"`
	Violations []gate.Violation `json:"violations,omitempty"`
	// Traces is reserved for replayed generations (digests of trace artifacts).
	Traces   []digest.Digest `json:"traces"`
	Sequence uint64          `json:"sequence"`
}

// Inputs are the digests of everything the verdict depends on.
type Inputs = protocol.Inputs

// RevealCheck is the outcome of the reveal checks and the clock readings used.
type RevealCheck = protocol.RevealCheck

// Audit is the sampled recomputation.
type Audit struct {
	Beacon       Beacon     `json:"beacon"`
	Seed         string     `json:"seed"`
	Full         bool       `json:"full"`
	SampleSize   int        `json:"sample_size"`
	Rows         []AuditRow `json:"rows"`
	Mismatches   []string   `json:"mismatches"`
	Undetermined []string   `json:"undetermined"`
	// ProvenanceFailures, in a model-bound task, are the audited rows whose
	// tokens failed the provenance check, in audit order.
	ProvenanceFailures []string `json:"provenance_failures,omitempty"`
}

// AuditRow is one recomputed row.
type AuditRow struct {
	TaskID     string `json:"task_id"`
	Claimed    string `json:"claimed"`
	Recomputed string `json:"recomputed,omitempty"`
	Outcome    string `json:"outcome"`
	// Provenance is the row's provenance check, in a model-bound task.
	Provenance *Provenance `json:"provenance,omitempty"`
}

// Refs are the artifacts one evaluation is about, resolved in a store.
type Refs = protocol.Refs

// ErrProtocol reports a reveal of a round of another protocol than rollouts.
var ErrProtocol = errors.New("round is not for the rollouts protocol")

// ResolveRefs is protocol.ResolveRefs for a round of the rollouts protocol
// (else the error wraps ErrProtocol and the references are still returned).
func ResolveRefs(ctx context.Context, st cas.Store, reveal ocispec.Descriptor) (Refs, error) {
	refs, err := protocol.ResolveRefs(ctx, st, reveal)
	if err != nil {
		return Refs{}, err
	}
	if refs.Protocol != "rollouts" {
		return refs, fmt.Errorf("round %s is for protocol %q: %w", refs.Round.Digest, refs.Protocol, ErrProtocol)
	}
	return refs, nil
}

// ResolveRound is protocol.ResolveRefs for a round of any protocol; it also
// returns the round record.
func ResolveRound(ctx context.Context, st cas.Store, reveal ocispec.Descriptor) (Refs, protocol.Round, error) {
	var r protocol.Round
	refs, err := protocol.ResolveRefs(ctx, st, reveal)
	if err != nil {
		return Refs{}, r, err
	}
	if _, err := protocol.LoadAs(ctx, st, refs.Round, protocol.KindRound, &r); err != nil {
		return Refs{}, r, fmt.Errorf("reading round: %w", err)
	}
	return refs, r, nil
}

// Params are the validator's choices for one evaluation; replay reads them back
// from the verdict.
type Params struct {
	Beacon   Beacon
	Full     bool
	Sequence uint64
}

// Decide computes the verdict for a reveal whose checks gave entry. It is the
// deterministic core shared by evaluate and replay: the same store content,
// entry and params give the same verdict.
func Decide(ctx context.Context, st cas.Store, refs Refs, entry protocol.Entry, p Params) (Verdict, error) {
	v := Verdict{
		Protocol:   "rollouts",
		Submission: refs.Submission.Digest,
		Inputs: Inputs{Task: refs.Task, Round: refs.Round.Digest, Commitment: refs.Commitment.Digest,
			CommitmentValue: entry.Commitment, Reveal: refs.Reveal.Digest, Miner: entry.Miner},
		RevealCheck: RevealCheck{Status: entry.Status, Reason: entry.Reason, CommitSeen: entry.CommitSeen},
		Checkers:    CurrentCheckers,
		Traces:      []digest.Digest{},
		Sequence:    p.Sequence,
	}
	if entry.RevealSeen != nil {
		v.RevealCheck.RevealSeen = *entry.RevealSeen
	}
	if entry.Status != protocol.StatusAccepted {
		v.Status, v.Reason, v.Violations = StatusRejected, entry.Reason, entry.Violations
		return v, nil
	}
	task, err := loadTaskArtifact(ctx, st, refs.Task)
	if err != nil {
		return v, err
	}
	rows, err := loadRows(ctx, st, refs.Submission, task, p.Full)
	if err != nil {
		return v, err
	}
	if rows.close != nil {
		defer rows.close()
	}
	v.Rows = rows.n
	v.ClaimedScore = FormatReward(rows.score)
	var m *model.Model
	spec := task.Spec.Model
	if spec != nil {
		mc, cm, err := checkModel(ctx, st, rows.subject, rows.revision, spec)
		if err != nil {
			return v, err
		}
		m = cm
		v.ModelCheck = &mc
		if mc.Status != ModelAccepted {
			v.Status, v.Reason = StatusRejected, ReasonModel
			return v, nil
		}
	}
	seed := scoring.AuditSeed(p.Beacon.Source, p.Beacon.Value, entry.Commitment, refs.Submission.Digest.String())
	a := &Audit{Beacon: p.Beacon, Seed: scoring.SeedHex(seed), Full: p.Full, Rows: []AuditRow{}, Mismatches: []string{}, Undetermined: []string{}}
	ids := task.idList() // shared: read only
	if !p.Full {
		ids = scoring.SampleRows(seed, ids, task.Spec.AuditRows)
	}
	a.SampleSize = len(ids)
	var checked []checkedRow
	if spec != nil {
		// The provenance checks, one pass of the model per row, run on
		// every CPU; their results do not depend on the order.
		if checked, err = checkSampled(m, spec.Sampling, task, rows, ids, refs.Round.Digest.String(), entry.Miner); err != nil {
			return v, err
		}
	}
	fetch := func(i int, id string) (row, *gate.RowError, error) {
		if checked != nil {
			return checked[i].row, checked[i].rerr, nil
		}
		return rows.get(id)
	}
	for i, id := range ids {
		it, _ := task.Item(id)
		row, rerr, err := fetch(i, id)
		if err != nil {
			return v, err
		}
		ar := AuditRow{TaskID: id, Claimed: row.claimedText}
		if rerr == nil && spec == nil && row.prompt != nil {
			// A token row where the task takes text: not a row of this task.
			rerr = &gate.RowError{Rule: gate.RuleRowSchema, Detail: "a token row in a task without a model"}
		}
		if rerr != nil {
			// Only an indexed submission gets here: its rows are decoded
			// when audited, and a row that is not the row its claims line
			// describes is a wrong claim.
			ar.Outcome = OutcomeMalformed
			a.Mismatches = append(a.Mismatches, id)
			a.Rows = append(a.Rows, ar)
			continue
		}
		response := row.response
		if spec != nil {
			pc, text := checked[i].provenance, checked[i].text
			ar.Provenance = &pc
			if pc.Outcome != model.CheckOK {
				ar.Outcome = OutcomeProvenance
				a.ProvenanceFailures = append(a.ProvenanceFailures, id)
				a.Rows = append(a.Rows, ar)
				continue
			}
			response = text
		}
		got, undetermined, err := RowReward(it, response, task.Spec.MathFuel)
		switch {
		case err != nil:
			v.Status, v.Reason = StatusInfraError, ReasonChecker
			v.Audit = a
			return v, nil
		case undetermined:
			ar.Outcome = OutcomeUndetermined
			a.Undetermined = append(a.Undetermined, id)
		case got.Cmp(row.claimed) == 0:
			ar.Recomputed, ar.Outcome = FormatReward(got), OutcomeMatch
		default:
			ar.Recomputed, ar.Outcome = FormatReward(got), OutcomeMismatch
			a.Mismatches = append(a.Mismatches, id)
		}
		a.Rows = append(a.Rows, ar)
	}
	v.Audit = a
	switch {
	case len(a.ProvenanceFailures) > 0:
		v.Status, v.Reason = StatusRejected, ReasonProvenance
	case len(a.Mismatches) > 0:
		v.Status, v.Reason = StatusRejected, ReasonRewardMismatch
	case len(a.Undetermined) > 0:
		v.Status, v.Reason = StatusUndetermined, ReasonUndeterminedRows
	default:
		v.Status = StatusPassed
	}
	return v, nil
}

type row struct {
	response string
	// prompt and completion are a token row's ids (nil in a text row).
	prompt, completion []int
	claimed            *big.Rat
	claimedText        string
}

// submissionRows are a submission's rows as Decide reads them: how many, the
// claimed score (the mean of every row's claim) and the row of a task id.
type submissionRows struct {
	n     int
	score *big.Rat
	// revision is submission.json's model_revision, subject the
	// submission manifest's subject (a model-bound submission's model).
	revision string
	subject  *ocispec.Descriptor
	// get returns the row of a task id of the task. A non-nil *RowError
	// means the row is not the row the submission claims (indexed forms
	// only); claimedText is still the claim. An error is a failure to read.
	get func(id string) (row, *gate.RowError, error)
	// close, when set, releases what get reads from.
	close func() error
}

// meanClaim is the mean of claims given as canonical reward strings. Equal
// rewards are equal strings (gate.ParseReward), so it sums each distinct value
// once, times its count.
func meanClaim(counts map[string]int64, n int) (*big.Rat, error) {
	sum := new(big.Rat)
	for s, k := range counts {
		r, err := gate.ParseReward(s)
		if err != nil {
			return nil, err
		}
		sum.Add(sum, r.Mul(r, new(big.Rat).SetInt64(k)))
	}
	return sum.Quo(sum, big.NewRat(int64(n), 1)), nil
}

// loadRows reads a gate-checked submission's rows. A submission with a claims
// file (format 2) is read through it: the score comes from the claims column
// and only the rows asked for are decoded, each checked against its claims
// line (gate.OpenIndexedRows). Without one, every row is decoded.
func loadRows(ctx context.Context, st cas.Store, sub ocispec.Descriptor, task *LoadedTask, full bool) (submissionRows, error) {
	art, err := bundle.Load(ctx, st, sub)
	if err != nil {
		return submissionRows{}, err
	}
	rows, err := loadRowsOf(ctx, st, art, task, full)
	rows.subject = art.Manifest.Subject
	return rows, err
}

// loadRowsOf is loadRows of a loaded submission artifact.
func loadRowsOf(ctx context.Context, st cas.Store, art *bundle.Loaded, task *LoadedTask, full bool) (submissionRows, error) {
	if protocol.IsRowsIndexed(art) {
		return layeredRows(ctx, st, art, task, full)
	}
	files, err := bundle.LoadTree(ctx, st, art, bundle.DefaultLimits)
	if err != nil {
		return submissionRows{}, err
	}
	fsys := bundle.TreeFS(files)
	b, err := fs.ReadFile(fsys, gate.RolloutSubmissionFile)
	if err != nil {
		return submissionRows{}, err
	}
	meta, vs := gate.ParseRolloutSubmission(b)
	if len(vs) > 0 {
		return submissionRows{}, fmt.Errorf("submission.json: %s", vs[0])
	}
	lim := gate.DefaultRolloutLimits()
	lim.MaxRowBytes = task.Spec.MaxRowBytes
	if meta.Claims != "" {
		return indexedRows(fsys, meta, task, lim)
	}
	f, err := fsys.Open(meta.Rows)
	if err != nil {
		return submissionRows{}, err
	}
	defer f.Close()
	out := make(map[string]row, task.Spec.Rows)
	counts := map[string]int64{}
	err = gate.ReadRows(f, lim, func(_ int, r gate.Row) error {
		c, err := gate.ParseReward(r.RewardClaimed)
		if err != nil {
			return err
		}
		out[r.TaskID] = row{response: r.Response, prompt: r.PromptTokens, completion: r.CompletionTokens, claimed: c, claimedText: r.RewardClaimed}
		counts[r.RewardClaimed]++
		return nil
	})
	if err != nil {
		return submissionRows{}, err
	}
	if len(out) != task.Spec.Rows {
		return submissionRows{}, fmt.Errorf("submission has %d rows, task has %d", len(out), task.Spec.Rows)
	}
	score, err := meanClaim(counts, len(out))
	if err != nil {
		return submissionRows{}, err
	}
	return submissionRows{n: len(out), score: score, revision: meta.ModelRevision, get: func(id string) (row, *gate.RowError, error) { return out[id], nil, nil }}, nil
}

// indexedRows reads a format-2 submission through its claims file.
func indexedRows(fsys fs.FS, meta gate.RolloutSubmission, task *LoadedTask, lim gate.RolloutLimits) (submissionRows, error) {
	rowsData, err := fs.ReadFile(fsys, meta.Rows)
	if err != nil {
		return submissionRows{}, err
	}
	claims, err := fs.ReadFile(fsys, meta.Claims)
	if err != nil {
		return submissionRows{}, err
	}
	x, vs := gate.OpenIndexedRows(rowsData, claims, meta.Rows, meta.Claims, task.IDs(), lim)
	if len(vs) > 0 {
		return submissionRows{}, fmt.Errorf("submission claims: %s", vs[0])
	}
	counts := map[string]int64{}
	for _, c := range x.Claims {
		counts[c.Reward]++
	}
	score, err := meanClaim(counts, x.Len())
	if err != nil {
		return submissionRows{}, err
	}
	get := func(id string) (row, *gate.RowError, error) {
		r, c, rerr, _ := x.Row(id)
		if rerr != nil {
			return row{claimedText: c.Reward}, rerr, nil
		}
		claimed, err := gate.ParseReward(c.Reward)
		if err != nil { // ParseClaims accepted it: cannot happen
			return row{claimedText: c.Reward}, &gate.RowError{Rule: gate.RuleBadReward, Detail: err.Error()}, nil
		}
		return row{response: r.Response, prompt: r.PromptTokens, completion: r.CompletionTokens, claimed: claimed, claimedText: c.Reward}, nil, nil
	}
	return submissionRows{n: x.Len(), score: score, revision: meta.ModelRevision, get: get}, nil
}

// maxDetailRows bounds the failing rows Details lists one by one.
const maxDetailRows = 10

// Head returns the fields every protocol's verdict shares.
func (v Verdict) Head() protocol.VerdictHead {
	return protocol.VerdictHead{Protocol: v.Protocol, Status: v.Status, Reason: v.Reason, Submission: v.Submission,
		Inputs: v.Inputs, RevealCheck: v.RevealCheck, Sequence: v.Sequence}
}

// Details renders the audit for text output.
func (v Verdict) Details() []protocol.Detail {
	var out []protocol.Detail
	if v.ClaimedScore != "" {
		out = append(out, protocol.Detail{Label: "claimed score", Value: v.ClaimedScore})
	}
	if m := v.ModelCheck; m != nil {
		text := m.Status + " " + m.Revision
		if m.Detail != "" {
			text += ": " + m.Detail
		}
		out = append(out, protocol.Detail{Label: "model", Value: text})
	}
	if v.Audit != nil {
		out = append(out, protocol.Detail{Label: "beacon", Value: v.Audit.Beacon.Text()})
		counts := fmt.Sprintf("%d mismatches, %d undetermined", len(v.Audit.Mismatches), len(v.Audit.Undetermined))
		if v.ModelCheck != nil {
			counts = fmt.Sprintf("%d failing provenance, ", len(v.Audit.ProvenanceFailures)) + counts
		}
		out = append(out, protocol.Detail{Label: "audited rows", Value: fmt.Sprintf("%d (%s)", v.Audit.SampleSize, counts)})
		// The first failing rows, each at its first failing position; the
		// record lists them all.
		shown := 0
		for _, r := range v.Audit.Rows {
			if p := r.Provenance; p != nil && p.Outcome != model.CheckOK {
				if shown == maxDetailRows {
					out = append(out, protocol.Detail{Label: "provenance", Value: fmt.Sprintf("and %d more rows", len(v.Audit.ProvenanceFailures)-shown)})
					break
				}
				out = append(out, protocol.Detail{Label: "provenance", Value: r.TaskID + ": " + p.Text()})
				shown++
			}
		}
		for _, id := range v.Audit.Mismatches {
			out = append(out, protocol.Detail{Label: "mismatch", Value: id})
		}
	}
	for _, vi := range v.Violations {
		out = append(out, protocol.Detail{Label: "violation", Value: vi.String()})
	}
	return out
}
