// Package replay re-derives a verdict from its recorded inputs and compares it
// byte for byte with the verdict it checks, which it never trusts: every input
// is fetched by digest, every signature is checked, the audit sample is drawn
// again from the recorded beacon and every reward is recomputed. No submission
// code runs in the replaying process.
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/protocol"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Outcomes of a replay.
const (
	Identical = "identical"
	Differs   = "differs"
	// Unchecked: the regenerated verdict is identical, but the driver took
	// some of the verdict's observations as recorded without re-deriving
	// them (Result.Unchecked says which, and how to check them).
	Unchecked = "unchecked"
)

// ErrUntrusted reports a verdict signed by none of the keys the auditor trusts.
var ErrUntrusted = errors.New("verdict is not signed by a trusted validator key")

// ErrNoTrustedKeys reports a replay asked to trust no key: a replay decides
// on the auditor's keys, never on whoever signed.
var ErrNoTrustedKeys = errors.New("no trusted keys given")

// Diff is one difference between the recorded and the regenerated verdict.
type Diff struct {
	Path       string `json:"path"`
	Recorded   string `json:"recorded"`
	Recomputed string `json:"recomputed"`
}

// Result is the outcome of a replay.
type Result struct {
	Verdict    digest.Digest `json:"verdict"`
	Outcome    string        `json:"outcome"`
	Recomputed digest.Digest `json:"recomputed"`
	Signers    []string      `json:"signers"`
	Status     string        `json:"status"` // the verdict's status, as regenerated
	Diffs      []Diff        `json:"diffs"`
	// Checks are what the driver re-derived outside the record and found
	// equal (for example retrained checkpoints).
	Checks []Diff `json:"checks"`
	// Unchecked are the observations the driver took as recorded (for
	// example a failed training run, without --retrain).
	Unchecked []Diff `json:"unchecked"`
	// Skipped lists the verdict's signatures that did not count (not by a
	// trusted key, or not readable as feval signatures).
	Skipped []bundle.SignatureCheck `json:"skipped"`
}

// Fetch copies a verdict and everything it depends on from src into l: the
// verdict with its signatures and subject, the reveal with its commitment,
// round and task, each with their signatures, the submission, and the evidence
// its protocol's driver names (checkpoints).
func Fetch(ctx context.Context, src cas.Store, l *cas.Layout, verdict ocispec.Descriptor) error {
	if _, err := cas.Copy(ctx, src, l, verdict, cas.CopyOptions{Subjects: true, Referrers: true, Siblings: true}); err != nil {
		return fmt.Errorf("fetching verdict: %w", err)
	}
	art, v, err := evaluate.LoadVerdict(ctx, l, verdict)
	if err != nil {
		return err
	}
	driver, err := evaluate.Options{}.Driver(v.Protocol)
	if err != nil {
		return err
	}
	evidence, err := driver.Evidence(art)
	if err != nil {
		return err
	}
	for _, d := range evidence {
		desc, err := src.Resolve(ctx, d.String())
		if err != nil {
			return fmt.Errorf("fetching evidence %s: %w", d, err)
		}
		if _, err := cas.Copy(ctx, src, l, desc, cas.CopyOptions{}); err != nil {
			return fmt.Errorf("fetching evidence %s: %w", d, err)
		}
		if err := copySignatures(ctx, src, l, desc); err != nil {
			return err
		}
	}
	for _, d := range []digest.Digest{v.Inputs.Reveal, v.Submission, v.Inputs.Task} {
		desc, err := src.Resolve(ctx, d.String())
		if err != nil {
			return fmt.Errorf("fetching input %s: %w", d, err)
		}
		if _, err := cas.Copy(ctx, src, l, desc, cas.CopyOptions{Subjects: true}); err != nil {
			return fmt.Errorf("fetching input %s: %w", d, err)
		}
		// Signatures only, not other referrers (a reveal's round holds every
		// other miner's commitments).
		if err := copySignatures(ctx, src, l, desc); err != nil {
			return err
		}
	}
	for _, d := range []digest.Digest{v.Inputs.Commitment, v.Inputs.Round} {
		desc, err := src.Resolve(ctx, d.String())
		if err != nil {
			return fmt.Errorf("fetching input %s: %w", d, err)
		}
		if err := copySignatures(ctx, src, l, desc); err != nil {
			return err
		}
	}
	return l.Flush()
}

func copySignatures(ctx context.Context, src cas.Store, l *cas.Layout, desc ocispec.Descriptor) error {
	sigs, err := src.Referrers(ctx, desc, bundle.MediaTypeSigstoreBundle)
	if err != nil {
		return err
	}
	for _, s := range sigs {
		if _, err := cas.Copy(ctx, src, l, s, cas.CopyOptions{}); err != nil {
			return fmt.Errorf("fetching signature %s: %w", s.Digest, err)
		}
	}
	return nil
}

// Run replays the verdict held in st with the default driver options.
func Run(ctx context.Context, st cas.Store, verdict ocispec.Descriptor, trusted []*bundle.PublicKey) (Result, error) {
	return RunWith(ctx, st, verdict, trusted, evaluate.Options{})
}

// RunWith replays the verdict held in st through its protocol's driver,
// configured by opts (for example an optimizer replay that retrains). trusted
// are the validator keys the auditor accepts: the verdict must carry a
// signature by one of them, and signatures by other keys or in other formats
// are reported in Result.Skipped and otherwise ignored. With no trusted keys
// RunWith refuses (ErrNoTrustedKeys); a verdict no trusted key signed is an
// error wrapping ErrUntrusted and bundle.ErrVerify that names the keys that
// did sign. Verification failures are errors wrapping bundle.ErrVerify; a
// verdict that verifies but regenerates differently, or whose driver reports
// findings, is a Result with Outcome Differs.
func RunWith(ctx context.Context, st cas.Store, verdict ocispec.Descriptor, trusted []*bundle.PublicKey, opts evaluate.Options) (Result, error) {
	return NewSession(st, trusted, opts).Run(ctx, verdict)
}

// Session replays several verdicts held in one store, as RunWith replays
// each: the inputs verdicts share (the task and the round of a round's
// verdicts) are verified once, the first time one of its verdicts needs them,
// and a task's tree is read from the store once.
// It is not safe for concurrent use.
type Session struct {
	st       cas.Store
	trusted  []*bundle.PublicKey
	opts     evaluate.Options
	verified map[digest.Digest]bool // task and round artifacts found sound
	trees    *protocol.TaskTrees    // the task trees the reveal checks read
}

// NewSession returns a Session replaying verdicts held in st, with trusted
// and opts as RunWith takes them.
func NewSession(st cas.Store, trusted []*bundle.PublicKey, opts evaluate.Options) *Session {
	return &Session{st: st, trusted: trusted, opts: opts, verified: map[digest.Digest]bool{}, trees: protocol.NewTaskTrees()}
}

// Run replays one verdict: RunWith's result and error for it.
func (s *Session) Run(ctx context.Context, verdict ocispec.Descriptor) (Result, error) {
	st, trusted, opts := s.st, s.trusted, s.opts
	ctx = protocol.WithTaskTrees(ctx, s.trees)
	res := Result{Verdict: verdict.Digest, Diffs: []Diff{}, Checks: []Diff{}, Unchecked: []Diff{}, Skipped: []bundle.SignatureCheck{}}
	if len(trusted) == 0 {
		return res, ErrNoTrustedKeys
	}
	art, recorded, err := evaluate.LoadVerdict(ctx, st, verdict)
	if err != nil {
		if isDamage(err) {
			return res, fmt.Errorf("%w: %w", bundle.ErrVerify, err)
		}
		return res, fmt.Errorf("%w: %v", bundle.ErrVerify, err)
	}
	signers, skipped, err := TrustedSignatures(ctx, st, art.Desc, trusted)
	res.Signers, res.Skipped = signers, skipped
	if err != nil {
		return res, fmt.Errorf("verdict %s: %w", verdict.Digest, err)
	}
	for _, d := range []digest.Digest{recorded.Inputs.Task, recorded.Inputs.Round} {
		desc, err := st.Resolve(ctx, d.String())
		if err != nil {
			return res, fmt.Errorf("input %s: %w", d, err)
		}
		if s.verified[d] {
			continue
		}
		if rep := bundle.Verify(ctx, st, desc, nil); hasDigestProblem(rep) {
			return res, fmt.Errorf("input %s: %w", d, rep.Err())
		}
		if _, err := bundle.Signers(ctx, st, desc); err != nil {
			return res, fmt.Errorf("input %s: %w: %v", d, bundle.ErrVerify, err)
		}
		s.verified[d] = true
	}
	reveal, err := st.Resolve(ctx, recorded.Inputs.Reveal.String())
	if err != nil {
		return res, fmt.Errorf("reveal %s: %w", recorded.Inputs.Reveal, err)
	}
	// A damaged or incomplete copy of the reveal or the submission is the
	// auditor's store failing verification, not a verdict that differs (an
	// absent submission manifest is left to the reveal checks, which record
	// it as submission_missing).
	inputs := []ocispec.Descriptor{reveal}
	if sub, err := st.Resolve(ctx, recorded.Submission.String()); err == nil {
		inputs = append(inputs, sub)
	} else if !errors.Is(err, cas.ErrNotFound) {
		return res, fmt.Errorf("submission %s: %w", recorded.Submission, err)
	}
	for _, desc := range inputs {
		// A submission's rows layer (format 3) is read by range: the audit
		// checks each row it reads against the rows index.
		// The task and round above it were verified above.
		rep := bundle.VerifyRangedBeyond(ctx, st, desc, nil, s.verified)
		for _, p := range rep.Problems {
			if isDamage(p) {
				return res, fmt.Errorf("input %s: %w: %w", desc.Digest, bundle.ErrVerify, p)
			}
		}
	}
	refs, err := protocol.ResolveRefs(ctx, st, reveal)
	if err != nil {
		return res, err
	}
	if refs.Protocol != recorded.Protocol {
		return res, fmt.Errorf("verdict %s: %w: a %s verdict about a %s round", verdict.Digest, protocol.ErrMalformed, recorded.Protocol, refs.Protocol)
	}
	driver, err := opts.Driver(refs.Protocol)
	if err != nil {
		return res, err
	}
	entry, err := protocol.CheckReveal(ctx, st, refs.Round, refs.Commitment, refs.Reveal,
		recorded.RevealCheck.CommitSeen, recorded.RevealCheck.RevealSeen, evaluate.Gate)
	if err != nil {
		return res, err
	}
	// Copies and double reveals are round-wide facts the validator observed; a
	// single reveal cannot show them, so replay takes them as recorded.
	if entry.Status == protocol.StatusAccepted && (recorded.RevealCheck.Reason == protocol.ReasonCopy || recorded.RevealCheck.Reason == protocol.ReasonDoubleReveal) {
		entry.Status, entry.Reason = protocol.StatusRejected, recorded.RevealCheck.Reason
		entry.Violations = nil
	}
	regen, findings, err := driver.Redecide(ctx, protocol.Case{Store: st, Refs: refs, Entry: entry, Sequence: recorded.Sequence}, art)
	if err != nil {
		return res, err
	}
	res.Status = regen.Head().Status
	enc, err := bundle.Encode(bundle.Artifact{Kind: protocol.KindVerdict, Record: regen, Subject: art.Manifest.Subject,
		Created: art.Manifest.Annotations[ocispec.AnnotationCreated]})
	if err != nil {
		return res, err
	}
	res.Recomputed = enc.Desc.Digest
	for _, f := range findings {
		d := Diff{Path: f.Path, Recorded: f.Recorded, Recomputed: f.Recomputed}
		switch {
		case f.Equal:
			res.Checks = append(res.Checks, d)
		case f.Unchecked:
			res.Unchecked = append(res.Unchecked, d)
		default:
			res.Diffs = append(res.Diffs, d)
		}
	}
	// The verdict is about the submission (the reveal when the submission
	// never arrived), whatever its manifest says: a verdict hung on another
	// subject would be listed as evidence about that one.
	want := refs.Submission.Digest
	if refs.Submission.MediaType == "" {
		want = refs.Reveal.Digest
	}
	if got := art.Manifest.Subject; got == nil || got.Digest != want {
		recorded := "(absent)"
		if got != nil {
			recorded = got.Digest.String()
		}
		res.Diffs = append(res.Diffs, Diff{Path: "(subject)", Recorded: recorded, Recomputed: want.String()})
	}
	if enc.Desc.Digest == verdict.Digest && len(res.Diffs) == 0 {
		res.Outcome = Identical
		if len(res.Unchecked) > 0 {
			res.Outcome = Unchecked
		}
		return res, nil
	}
	res.Outcome = Differs
	n := len(res.Diffs)
	res.Diffs = append(res.Diffs, DiffJSON(art.Record, enc.Record)...)
	if enc.Desc.Digest != verdict.Digest && len(res.Diffs) == n {
		res.Diffs = append(res.Diffs, Diff{Path: "(manifest)", Recorded: verdict.Digest.String(), Recomputed: enc.Desc.Digest.String()})
	}
	return res, nil
}

// isDamage reports a store that fails to deliver what it names: bytes that
// do not match their digest or size, or a blob that is absent. A record of
// the wrong form is not damage: the reveal checks decide on it.
func isDamage(err error) bool {
	return errors.Is(err, cas.ErrDigestMismatch) || errors.Is(err, cas.ErrSizeMismatch) || errors.Is(err, cas.ErrNotFound)
}

func hasDigestProblem(rep bundle.Report) bool {
	for _, p := range rep.Problems {
		if p.Role != "signature" && !errors.Is(p, bundle.ErrNoTrustedSignature) {
			return true
		}
	}
	return false
}

// TrustedSignatures checks the signatures of target against trusted and
// returns the trusted signers and the signatures that did not count. When no
// trusted key signed, the error wraps ErrUntrusted and bundle.ErrVerify and
// names the trusted keys and the keys that did sign (or claim to have).
func TrustedSignatures(ctx context.Context, st cas.Store, target ocispec.Descriptor, trusted []*bundle.PublicKey) ([]string, []bundle.SignatureCheck, error) {
	checks, err := bundle.CheckSignatures(ctx, st, target, trusted)
	if err != nil {
		return nil, nil, fmt.Errorf("listing signatures: %w", err)
	}
	skipped := []bundle.SignatureCheck{}
	for _, c := range checks {
		if !c.Trusted {
			skipped = append(skipped, c)
		}
	}
	signers := bundle.TrustedSigners(checks)
	if len(signers) == 0 {
		fps := make([]string, len(trusted))
		for i, k := range trusted {
			fps[i] = k.Fingerprint[:16]
		}
		return signers, skipped, &untrustedError{trusted: fps, found: &bundle.UntrustedError{Target: target.Digest, Checks: checks}}
	}
	return signers, skipped, nil
}

// untrustedError is a record no trusted key signed: it names the keys trusted
// and the keys that did sign.
type untrustedError struct {
	trusted []string
	found   *bundle.UntrustedError
}

func (e *untrustedError) Error() string {
	return fmt.Sprintf("%v (trusted: %s; %s)", ErrUntrusted, strings.Join(e.trusted, ", "), e.found.Summary())
}

func (e *untrustedError) Unwrap() []error { return []error{ErrUntrusted, bundle.ErrVerify, e.found} }

// DiffJSON lists the leaves where two JSON documents differ, with their paths
// ("audit.rows[3].claimed"), sorted by path.
func DiffJSON(recorded, recomputed []byte) []Diff {
	var a, b any
	da := json.NewDecoder(bytes.NewReader(recorded))
	da.UseNumber()
	db := json.NewDecoder(bytes.NewReader(recomputed))
	db.UseNumber()
	if da.Decode(&a) != nil || db.Decode(&b) != nil {
		return []Diff{{Path: "(record)", Recorded: string(recorded), Recomputed: string(recomputed)}}
	}
	var out []Diff
	diffValue("", a, b, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func diffValue(path string, a, b any, out *[]Diff) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		for k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			diffValue(p, av[k], bv[k], out)
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			break
		}
		for i := range av {
			diffValue(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], out)
		}
		return
	}
	ra, rb := render(a), render(b)
	if ra != rb {
		*out = append(*out, Diff{Path: path, Recorded: ra, Recomputed: rb})
	}
}

func render(v any) string {
	if v == nil {
		return "(absent)"
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := bundle.Canonical(v)
	return string(b)
}
