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
)

// ErrUntrusted reports a verdict signed by none of the keys the auditor trusts.
var ErrUntrusted = errors.New("verdict is not signed by a trusted validator key")

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
}

// Fetch copies a verdict and everything it depends on from src into l: the
// verdict with its signatures and subject, the reveal with its commitment,
// round and task, each with their signatures, the submission, and the evidence
// its protocol's driver names (checkpoints).
func Fetch(ctx context.Context, src cas.Store, l *cas.Layout, verdict ocispec.Descriptor) error {
	if _, err := cas.Copy(ctx, src, l, verdict, cas.CopyOptions{Subjects: true, Referrers: true}); err != nil {
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
// configured by opts (for example an optimizer replay that retrains). trusted,
// when not empty, are the validator keys the auditor accepts; the verdict must
// be signed by one of them. Verification failures are errors wrapping
// bundle.ErrVerify; a verdict that verifies but regenerates differently, or
// whose driver reports findings, is a Result with Outcome Differs.
func RunWith(ctx context.Context, st cas.Store, verdict ocispec.Descriptor, trusted []*bundle.PublicKey, opts evaluate.Options) (Result, error) {
	res := Result{Verdict: verdict.Digest, Diffs: []Diff{}}
	art, recorded, err := evaluate.LoadVerdict(ctx, st, verdict)
	if err != nil {
		return res, fmt.Errorf("%w: %v", bundle.ErrVerify, err)
	}
	signers, err := bundle.Signers(ctx, st, art.Desc)
	if err != nil {
		return res, fmt.Errorf("verdict %s: %w: %v", verdict.Digest, bundle.ErrVerify, err)
	}
	res.Signers = signers
	if len(trusted) > 0 && !anyTrusted(signers, trusted) {
		return res, fmt.Errorf("%s: %w (signed by %v)", verdict.Digest, ErrUntrusted, short(signers))
	}
	for _, d := range []digest.Digest{recorded.Inputs.Task, recorded.Inputs.Round} {
		desc, err := st.Resolve(ctx, d.String())
		if err != nil {
			return res, fmt.Errorf("input %s: %w", d, err)
		}
		if rep := bundle.Verify(ctx, st, desc, nil); hasDigestProblem(rep) {
			return res, fmt.Errorf("input %s: %w", d, rep.Err())
		}
		if _, err := bundle.Signers(ctx, st, desc); err != nil {
			return res, fmt.Errorf("input %s: %w: %v", d, bundle.ErrVerify, err)
		}
	}
	reveal, err := st.Resolve(ctx, recorded.Inputs.Reveal.String())
	if err != nil {
		return res, fmt.Errorf("reveal %s: %w", recorded.Inputs.Reveal, err)
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
		res.Diffs = append(res.Diffs, Diff(f))
	}
	if enc.Desc.Digest == verdict.Digest && len(res.Diffs) == 0 {
		res.Outcome = Identical
		return res, nil
	}
	res.Outcome = Differs
	res.Diffs = append(res.Diffs, DiffJSON(art.Record, enc.Record)...)
	if len(res.Diffs) == 0 {
		res.Diffs = []Diff{{Path: "(manifest)", Recorded: verdict.Digest.String(), Recomputed: enc.Desc.Digest.String()}}
	}
	return res, nil
}

func hasDigestProblem(rep bundle.Report) bool {
	for _, p := range rep.Problems {
		if p.Role != "signature" && !errors.Is(p, bundle.ErrNoTrustedSignature) {
			return true
		}
	}
	return false
}

func anyTrusted(signers []string, trusted []*bundle.PublicKey) bool {
	for _, s := range signers {
		for _, k := range trusted {
			if k.Fingerprint == s {
				return true
			}
		}
	}
	return false
}

func short(fps []string) []string {
	out := make([]string, len(fps))
	for i, f := range fps {
		out[i] = f[:16]
	}
	return out
}

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
