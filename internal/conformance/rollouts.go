package conformance

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/gate"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// conformanceSpec is task.json of a conformance task of items with auditRows
// audited rows.
func conformanceSpec(items []rollouts.Item, auditRows int) rollouts.Spec {
	return rollouts.Spec{Protocol: "rollouts", Rows: len(items), AuditRows: auditRows, MaxRowBytes: 65536,
		Checkers: rollouts.CurrentCheckers, MathFuel: rollouts.DefaultMathFuel}
}

// The conformance miners.
var (
	honest = miner{"miner-honest", honestRows, 0, nil}
	// format1 and format2 are honest miners whose directories pack in the
	// earlier submission formats (a tree without and with a claims file).
	format1 = miner{"miner-format1", honestRows, 1, nil}
	format2 = miner{"miner-format2", honestRows, 2, nil}
	// inflated claims 1 on every row.
	inflated = miner{"miner-inflated", func(items []rollouts.Item) []row {
		rows := honestRows(items)
		for i := range rows {
			rows[i].claimed = "1"
		}
		return rows
	}, 0, nil}
	// undetermined answers math-10 with a value the checker cannot decide.
	undetermined = miner{"miner-undetermined", func(items []rollouts.Item) []row {
		rows := honestRows(items)
		for i := range rows {
			if rows[i].taskID == "math-10" {
				rows[i].response, rows[i].claimed = `It is \boxed{\sin 1}`, "0"
			}
		}
		return rows
	}, 0, nil}
	// gate writes one reward unreduced, which the rollouts gate refuses.
	gateMiner = miner{"miner-gate", func(items []rollouts.Item) []row {
		rows := honestRows(items)
		rows[len(rows)-1].claimed = "4/6"
		return rows
	}, 0, nil}
)

// rollouts generates the vectors of the rollouts protocol.
func (g *generator) rollouts() error {
	items := conformanceItems()
	f, err := g.newFamily("main", conformanceSpec(items, 5), items, timeWindows, []miner{honest, inflated, undetermined, gateMiner, format1, format2})
	if err != nil {
		return err
	}
	drand := drandBeacon(drandRound, drandSignature)
	plain := rollouts.Beacon{Source: "block:4200", Value: "0f1e2d3c4b5a6978"}

	type good struct {
		name, desc string
		miner      string
		beacon     rollouts.Beacon
		full       bool
		status     string
	}
	goods := []good{
		{"rollouts-passed-drand", "an honest submission audited with a verified drand beacon: passed", honest.name, drand, false, rollouts.StatusPassed},
		{"rollouts-passed-plain", "an honest submission audited with a plain (unverified) beacon: passed", honest.name, plain, false, rollouts.StatusPassed},
		{"rollouts-reward-mismatch", "a submission claiming 1 on every row, caught by the sample: rejected (reward_mismatch)", inflated.name, drand, false, rollouts.StatusRejected},
		{"rollouts-full-audit", "a full audit (every row, in task file order) of the inflated submission: rejected", inflated.name, drand, true, rollouts.StatusRejected},
		{"rollouts-undetermined", "a full audit with one row the math rules cannot decide: undetermined (the row has no recomputed reward)", undetermined.name, drand, true, rollouts.StatusUndetermined},
		{"rollouts-gate-failed", "a submission with an unreduced claimed reward: rejected by the gate, no audit", gateMiner.name, drand, false, rollouts.StatusRejected},
		{"rollouts-honest-full", "a full audit of the honest submission: passed", honest.name, drand, true, rollouts.StatusPassed},
		{"rollouts-format1-passed", "an honest submission in format 1 (a tree: its rows file's last line has no line feed, so it cannot be indexed), audited: passed", format1.name, drand, false, rollouts.StatusPassed},
		{"rollouts-format2-passed", "an honest submission in format 2 (a tree with a claims file), audited: passed", format2.name, drand, false, rollouts.StatusPassed},
	}
	outs := map[string]evaluate.Outcome{}
	for _, gd := range goods {
		out, err := f.evaluate(gd.miner, gd.beacon, gd.full)
		if err != nil {
			return err
		}
		if rv(out).Status != gd.status {
			return fmt.Errorf("%s: verdict is %s (%s), the vector needs %s", gd.name, rv(out).Status, rv(out).Reason, gd.status)
		}
		outs[gd.name] = out
		vs, err := f.extract(gd.name, out.Artifact.OCI(), true)
		if err != nil {
			return err
		}
		if err := g.finish(vs, Vector{Name: gd.name, Description: gd.desc, Verdict: out.Artifact.Digest, Expect: ExpectIdentical}); err != nil {
			return err
		}
	}

	for name, want := range map[string]int{"rollouts-passed-drand": 3, "rollouts-format1-passed": 1, "rollouts-format2-passed": 2} {
		if got, err := f.submissionFormat(rv(outs[name]).Submission); err != nil || got != want {
			return fmt.Errorf("%s: submission in format %d (%v), the vector needs format %d", name, got, err, want)
		}
	}
	passed := outs["rollouts-passed-drand"]
	full := outs["rollouts-honest-full"]
	type forged struct {
		name, desc string
		from       evaluate.Outcome
		mut        func(v *rollouts.Verdict)
		paths      []string
	}
	sampled := rv(passed).Audit.Rows
	last := len(sampled) - 1
	var outside rollouts.AuditRow
	for _, r := range rv(full).Audit.Rows {
		if !slices.ContainsFunc(sampled, func(s rollouts.AuditRow) bool { return s.TaskID == r.TaskID }) &&
			r.Claimed == sampled[last].Claimed && r.Recomputed == sampled[last].Recomputed {
			outside = r
			break
		}
	}
	if outside.TaskID == "" {
		return fmt.Errorf("no unsampled row matches the last sampled row")
	}
	undet := outs["rollouts-undetermined"]
	undetRow := slices.IndexFunc(rv(undet).Audit.Rows, func(r rollouts.AuditRow) bool { return r.Outcome == rollouts.OutcomeUndetermined })
	badReveal, err := f.revealWithSalt(honest.name, strings.Repeat("00", 32))
	if err != nil {
		return err
	}
	rejectedPaths := []string{"audit", "claimed_score", "reason", "reveal_check.reason", "reveal_check.status", "rows", "status"}
	forgeries := []forged{
		{"differs-reveal-not-opening", "a verdict that accepts a reveal (signed by the miner) whose salt does not open the commitment", passed,
			func(v *rollouts.Verdict) { v.Inputs.Reveal = badReveal.Digest }, rejectedPaths},
		{"differs-commit-late", "a verdict that accepts a commitment its own first-seen reading places after the commit window", passed,
			func(v *rollouts.Verdict) { v.RevealCheck.CommitSeen.Time = "2024-07-24T20:55:00Z" }, rejectedPaths},
		{"differs-claimed-score", "a verdict signed by the validator that states another claimed score", passed,
			func(v *rollouts.Verdict) { v.ClaimedScore = "1" }, []string{"claimed_score"}},
		{"differs-status", "a verdict that passes a submission its audit caught", outs["rollouts-reward-mismatch"],
			func(v *rollouts.Verdict) { v.Status, v.Reason = rollouts.StatusPassed, "" }, []string{"reason", "status"}},
		{"differs-recomputed", "a verdict that misstates one recomputed reward", passed,
			func(v *rollouts.Verdict) {
				if v.Audit.Rows[0].Recomputed == "1" {
					v.Audit.Rows[0].Recomputed = "0"
				} else {
					v.Audit.Rows[0].Recomputed = "1"
				}
			}, []string{"audit.rows[0].recomputed"}},
		{"differs-sample", "a verdict that audits a row the beacon did not select", passed,
			func(v *rollouts.Verdict) { v.Audit.Rows[last] = outside }, []string{fmt.Sprintf("audit.rows[%d].task_id", last)}},
		{"differs-seed", "a verdict that records another seed than its beacon and commitment give", passed,
			func(v *rollouts.Verdict) { v.Audit.Seed = flipHex(v.Audit.Seed) }, []string{"audit.seed"}},
		{"differs-beacon-value", "a verdict whose drand beacon value is not the SHA-256 of the round's signature", passed,
			func(v *rollouts.Verdict) { v.Audit.Beacon.Value = flipHex(v.Audit.Beacon.Value) }, []string{"audit.beacon.value"}},
		{"differs-beacon-verified", "a verdict that calls a plain beacon verified", outs["rollouts-passed-plain"],
			func(v *rollouts.Verdict) { v.Audit.Beacon.Verified = true }, []string{"audit.beacon.verified"}},
		{"differs-rows", "a verdict that misstates the number of rows", passed,
			func(v *rollouts.Verdict) { v.Rows++ }, []string{"rows"}},
		{"differs-commitment-value", "a verdict that records another commitment value than the commitment record holds", passed,
			func(v *rollouts.Verdict) {
				v.Inputs.CommitmentValue = "sha256:" + flipHex(strings.TrimPrefix(v.Inputs.CommitmentValue, "sha256:"))
			},
			[]string{"inputs.commitment_value"}},
		{"differs-mismatches", "a verdict that leaves its mismatching rows out of the mismatch list", outs["rollouts-reward-mismatch"],
			func(v *rollouts.Verdict) { v.Audit.Mismatches = []string{} }, []string{"audit.mismatches"}},
		{"differs-undetermined-row", "a verdict that decides a row the math rules leave undetermined", undet,
			func(v *rollouts.Verdict) {
				v.Audit.Rows[undetRow].Recomputed, v.Audit.Rows[undetRow].Outcome = "0", rollouts.OutcomeMatch
				v.Audit.Undetermined = []string{}
				v.Status, v.Reason = rollouts.StatusPassed, ""
			}, []string{fmt.Sprintf("audit.rows[%d].outcome", undetRow), fmt.Sprintf("audit.rows[%d].recomputed", undetRow),
				"audit.undetermined", "reason", "status"}},
		{"differs-sequence-kept", "a verdict whose sequence differs from the validator's counter replays identically: the sequence is the validator's own", passed,
			func(v *rollouts.Verdict) { v.Sequence = 99 }, nil},
	}
	// The record is right, but the manifest hangs it on another subject.
	{
		art, err := bundle.Load(g.ctx, f.work, passed.Artifact.OCI())
		if err != nil {
			return err
		}
		task := f.task
		desc, err := bundle.WriteSigned(g.ctx, f.work, g.keys["validator"], bundle.Artifact{Kind: protocol.KindVerdict,
			Record: passed.Verdict, Subject: &task, Created: art.Manifest.Annotations[ocispec.AnnotationCreated]})
		if err != nil {
			return err
		}
		vs, err := f.extract("differs-subject", desc, true)
		if err != nil {
			return err
		}
		if err := g.finish(vs, Vector{Name: "differs-subject", Description: "a right verdict record whose manifest names another subject (the task) than the submission",
			Verdict: desc.Digest, Expect: ExpectDiffersAt + " (subject)"}); err != nil {
			return err
		}
	}
	for _, fg := range forgeries {
		desc, err := f.forge(fg.from, fg.mut)
		if err != nil {
			return fmt.Errorf("%s: %w", fg.name, err)
		}
		vs, err := f.extract(fg.name, desc, true)
		if err != nil {
			return err
		}
		expect := ExpectIdentical
		if fg.paths != nil {
			expect = ExpectDiffersAt + " " + strings.Join(fg.paths, " ")
		}
		if err := g.finish(vs, Vector{Name: fg.name, Description: fg.desc, Verdict: desc.Digest, Expect: expect}); err != nil {
			return err
		}
	}

	// Beacons that fail their checks.
	for _, bv := range []struct {
		name, desc string
		b          rollouts.Beacon
	}{
		{"beacon-bad-signature", "a drand beacon whose signature is another round's: it does not verify", drandBeacon(drandRound,
			"b3fab6df720b68cc47175f2c777e86d84187caab5770906f515ff1099cb01e4deaa027075d860823e49477b93c72bd64")},
		{"beacon-later-round", "a drand beacon of a later round than the first after commits closed", drandBeacon(drandRound+1, drandSignature)},
	} {
		desc, err := f.forge(passed, func(v *rollouts.Verdict) { v.Audit.Beacon.Drand = bv.b.Drand })
		if err != nil {
			return err
		}
		vs, err := f.extract(bv.name, desc, true)
		if err != nil {
			return err
		}
		if err := g.finish(vs, Vector{Name: bv.name, Description: bv.desc, Verdict: desc.Digest, Expect: ExpectBeaconFailure}); err != nil {
			return err
		}
	}

	if err := g.signatureVectors(f, passed.Artifact.OCI()); err != nil {
		return err
	}
	if err := g.digestVectors(f, passed.Artifact.OCI(), full.Artifact.OCI()); err != nil {
		return err
	}

	// A task whose first row names an instruction no checker supports: the
	// audit stops there, infra_error, never a score.
	infraItems := append([]rollouts.Item{{TaskID: "if-lang", Kind: rollouts.KindIF, Prompt: "Answer in French.",
		InstructionIDs: []string{"language:response_language"}, Kwargs: []map[string]any{{"language": "fr"}}}}, items[:3]...)
	f3, err := g.newFamily("infra", conformanceSpec(infraItems, 2), infraItems, timeWindows, []miner{honest})
	if err != nil {
		return err
	}
	out, err := f3.evaluate(honest.name, drand, true)
	if err != nil {
		return err
	}
	if rv(out).Status != rollouts.StatusInfraError {
		return fmt.Errorf("rollouts-infra-error: verdict is %s", rv(out).Status)
	}
	vs, err := f3.extract("rollouts-infra-error", out.Artifact.OCI(), true)
	if err != nil {
		return err
	}
	if err := g.finish(vs, Vector{Name: "rollouts-infra-error", Description: "the first audited row names an instruction no checker supports: infra_error (checker_error), never a score",
		Verdict: out.Artifact.Digest, Expect: ExpectIdentical}); err != nil {
		return err
	}

	// Block-height windows: the drand round is the first after the reveal's
	// first-seen time, read at a height past the commit window.
	hw := windows{"height:100", "height:200", atHeight(commitSeen, 90), atHeight("2024-07-24T20:54:52Z", 150)}
	f4, err := g.newFamily("height", conformanceSpec(items, 5), items, hw, []miner{honest})
	if err != nil {
		return err
	}
	if out, err = f4.evaluate(honest.name, drand, false); err != nil {
		return err
	}
	if vs, err = f4.extract("rollouts-height-window", out.Artifact.OCI(), true); err != nil {
		return err
	}
	if err := g.finish(vs, Vector{Name: "rollouts-height-window", Description: "block-height windows: readings with heights, the drand round the first after the reveal was first seen",
		Verdict: out.Artifact.Digest, Expect: ExpectIdentical}); err != nil {
		return err
	}

	// Every row audited, in rank order, when the sample is the whole task.
	f2, err := g.newFamily("all", conformanceSpec(items, len(items)), items, timeWindows, []miner{honest})
	if err != nil {
		return err
	}
	out, err = f2.evaluate(honest.name, drand, false)
	if err != nil {
		return err
	}
	vs, err = f2.extract("sampling-all-rows", out.Artifact.OCI(), true)
	if err != nil {
		return err
	}
	return g.finish(vs, Vector{Name: "sampling-all-rows", Description: "audit_rows equals rows: every row audited, in rank order (not file order)",
		Verdict: out.Artifact.Digest, Expect: ExpectIdentical})
}

// flipHex changes the first hex digit of s.
func flipHex(s string) string {
	if s[0] == '0' {
		return "1" + s[1:]
	}
	return "0" + s[1:]
}

// signatureVectors: the passed verdict with signature referrers of every
// kind that must not count, alone or beside a valid one.
func (g *generator) signatureVectors(f *family, verdict ocispec.Descriptor) error {
	type sigVec struct {
		name, desc string
		keepSigs   bool
		add        func(vs *vectorStore) error
		expect     string
	}
	other := func(vs *vectorStore) error {
		b, err := g.bundleBytes("other", verdict, nil)
		if err != nil {
			return err
		}
		return vs.attach(verdict, b)
	}
	corrupted := func(vs *vectorStore) error {
		b, err := g.bundleBytes("validator", verdict, func(s []byte) []byte { s[len(s)-1] ^= 0x01; return s })
		if err != nil {
			return err
		}
		return vs.attach(verdict, b)
	}
	vecs := []sigVec{
		{"signature-corrupted", "the verdict's only signature has one bit changed", false, corrupted, ExpectSignatureFailure},
		{"signature-untrusted", "the verdict is signed only by a key the auditor does not trust", false, other, ExpectSignatureFailure},
		{"signature-missing", "the verdict has no signature referrer", false, func(*vectorStore) error { return nil }, ExpectSignatureFailure},
		{"signature-wrong-subject", "the verdict's only signature is the validator's signature of another manifest (the task)", false,
			func(vs *vectorStore) error {
				b, err := g.bundleBytes("validator", vs.f.task, nil)
				if err != nil {
					return err
				}
				return vs.attach(verdict, b)
			}, ExpectSignatureFailure},
		{"signature-extra-referrers", "a valid signature beside an untrusted key's, a corrupted one and a referrer that is no bundle: identical", true,
			func(vs *vectorStore) error {
				if err := other(vs); err != nil {
					return err
				}
				if err := corrupted(vs); err != nil {
					return err
				}
				return vs.attach(verdict, []byte("not a Sigstore bundle\n"))
			}, ExpectIdentical},
		{"signature-task-unsigned", "the task's signature referrer is missing", true,
			func(vs *vectorStore) error { return vs.dropReferrers(vs.f.task) }, ExpectSignatureFailure},
	}
	for _, sv := range vecs {
		vs, err := f.extract(sv.name, verdict, sv.keepSigs)
		if err != nil {
			return err
		}
		if err := sv.add(vs); err != nil {
			return fmt.Errorf("%s: %w", sv.name, err)
		}
		if err := g.finish(vs, Vector{Name: sv.name, Description: sv.desc, Verdict: verdict.Digest, Expect: sv.expect}); err != nil {
			return err
		}
	}
	return nil
}

// dropReferrers removes target's signature manifests from the store.
func (vs *vectorStore) dropReferrers(target ocispec.Descriptor) error {
	refs, err := vs.l.Referrers(vs.f.g.ctx, target, bundle.MediaTypeSigstoreBundle)
	if err != nil {
		return err
	}
	for _, r := range refs {
		if err := vs.remove(r.Digest); err != nil {
			return err
		}
	}
	return vs.dropFromIndex(func(d ocispec.Descriptor) bool {
		return slices.ContainsFunc(refs, func(r ocispec.Descriptor) bool { return r.Digest == d.Digest })
	})
}

// digestVectors: the passed verdict's store with one blob damaged or gone,
// and the full verdict's with its rows layer damaged. The submission is in
// format 3: an audit reads its rows layer by range, checking each sampled
// row against the rows index, so damage outside the sample leaves the
// audit's replay identical, while a full audit verifies the whole layer.
func (g *generator) digestVectors(f *family, verdict, fullVerdict ocispec.Descriptor) error {
	ctx := g.ctx
	vart, err := bundle.Load(ctx, f.work, verdict)
	if err != nil {
		return err
	}
	_, v, err := evaluate.LoadVerdict(ctx, f.work, verdict)
	if err != nil {
		return err
	}
	sub, err := f.work.Resolve(ctx, v.Submission.String())
	if err != nil {
		return err
	}
	sart, err := bundle.Load(ctx, f.work, sub)
	if err != nil {
		return err
	}
	ixl, rl, _, err := protocol.RowsLayers(sart)
	if err != nil {
		return fmt.Errorf("the honest submission is not in format 3: %w", err)
	}
	index, err := cas.ReadAll(ctx, f.work, ixl, protocol.MaxRowsIndexBytes)
	if err != nil {
		return err
	}
	x, err := gate.ParseRowsIndex(index, gate.RowsIndexLimits{})
	if err != nil {
		return err
	}
	var rec rollouts.Verdict
	if err := vart.Decode(&rec); err != nil {
		return err
	}
	sampled := map[string]bool{}
	for _, r := range rec.Audit.Rows {
		sampled[r.TaskID] = true
	}
	outside := -1
	for i := 0; i < x.Len() && outside < 0; i++ {
		if !sampled[x.TaskID(i)] {
			outside = i
		}
	}
	off, n := x.Span(outside)
	sigs, err := f.work.Referrers(ctx, verdict, bundle.MediaTypeSigstoreBundle)
	if err != nil || len(sigs) != 1 {
		return fmt.Errorf("verdict signatures: %v (%d)", err, len(sigs))
	}
	var sigArt ocispec.Manifest
	if err := readJSON(ctx, f.work, sigs[0], &sigArt); err != nil {
		return err
	}
	for _, dv := range []struct {
		name, desc string
		verdict    ocispec.Descriptor
		damage     func(vs *vectorStore) error
		expect     string
	}{
		{"digest-verdict-record", "the verdict's record blob has one bit changed", verdict, func(vs *vectorStore) error { return vs.corrupt(vart.Manifest.Layers[0].Digest) }, ExpectDigestMismatch},
		{"digest-verdict-manifest", "the verdict's manifest blob has one bit changed", verdict, func(vs *vectorStore) error { return vs.corrupt(verdict.Digest) }, ExpectDigestMismatch},
		{"digest-submission-index", "the submission's rows index blob has one bit changed", verdict, func(vs *vectorStore) error { return vs.corrupt(ixl.Digest) }, ExpectDigestMismatch},
		{"digest-signature-bundle", "the verdict's only signature bundle blob has one bit changed: no valid signature remains", verdict, func(vs *vectorStore) error { return vs.corrupt(sigArt.Layers[0].Digest) }, ExpectSignatureFailure},
		{"missing-submission-index", "the submission's rows index blob is missing", verdict, func(vs *vectorStore) error { return vs.remove(ixl.Digest) }, ExpectMissingBlob},
		{"missing-submission-rows", "the submission's rows blob is missing", verdict, func(vs *vectorStore) error { return vs.remove(rl.Digest) }, ExpectMissingBlob},
		{"rows-damaged-outside-sample", "the submission's rows blob has one bit changed in a row the audit did not sample: the audit reads rows by range, its replay is identical", verdict,
			func(vs *vectorStore) error { return vs.corruptAt(rl.Digest, off+int64(n)/2) }, ExpectIdentical},
		{"digest-submission-rows-full", "a full audit's submission rows blob has one bit changed: a full audit verifies the whole layer", fullVerdict,
			func(vs *vectorStore) error { return vs.corrupt(rl.Digest) }, ExpectDigestMismatch},
	} {
		vs, err := f.extract(dv.name, dv.verdict, true)
		if err != nil {
			return err
		}
		if err := dv.damage(vs); err != nil {
			return fmt.Errorf("%s: %w", dv.name, err)
		}
		if err := g.finish(vs, Vector{Name: dv.name, Description: dv.desc, Verdict: dv.verdict.Digest, Expect: dv.expect}); err != nil {
			return err
		}
	}
	return nil
}

// revealWithSalt writes a reveal of the miner's commitment, signed by the
// miner, with another salt: it does not open the commitment.
func (f *family) revealWithSalt(minerName, salt string) (ocispec.Descriptor, error) {
	ctx := f.g.ctx
	good := f.reveals[minerName]
	var rv protocol.Reveal
	art, err := protocol.LoadAs(ctx, f.work, good, protocol.KindReveal, &rv)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	rv.Salt = salt
	return bundle.WriteSigned(ctx, f.work, f.g.keys[minerName], bundle.Artifact{Kind: protocol.KindReveal, Record: rv,
		Subject: art.Manifest.Subject, Created: art.Manifest.Annotations[ocispec.AnnotationCreated]})
}

// rv is the rollouts verdict of an evaluation's outcome.
func rv(o evaluate.Outcome) rollouts.Verdict { return o.Verdict.(rollouts.Verdict) }

// submissionFormat tells the rollouts submission format of a stored
// submission: 3 (rows index and rows layer), 2 (a tree with a claims file)
// or 1 (a tree).
func (f *family) submissionFormat(sub digest.Digest) (int, error) {
	desc, err := f.work.Resolve(f.g.ctx, sub.String())
	if err != nil {
		return 0, err
	}
	art, err := bundle.Load(f.g.ctx, f.work, desc)
	if err != nil {
		return 0, err
	}
	if protocol.IsRowsIndexed(art) {
		return 3, nil
	}
	fsys, err := protocol.LoadSubmissionFS(f.g.ctx, f.work, art)
	if err != nil {
		return 0, err
	}
	meta, err := fs.ReadFile(fsys, "submission.json")
	if err != nil {
		return 0, err
	}
	if sub, vs := gate.ParseRolloutSubmission(meta); len(vs) == 0 && sub.Claims != "" {
		return 2, nil
	}
	return 1, nil
}
