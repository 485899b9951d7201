package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/meter"
	"github.com/feval/feval/protocol"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// ReplayOptions choose what a replay re-runs.
type ReplayOptions struct {
	// VerifyOnly re-runs only the verifiers, on the recorded final workspaces;
	// everything else is taken from the recorded run and receipts.
	VerifyOnly bool
}

// Parse reads a scenarios verdict record.
func Parse(recorded *bundle.Loaded) (Verdict, error) {
	var v Verdict
	if err := recorded.Decode(&v); err != nil {
		return v, fmt.Errorf("%w: %v", protocol.ErrMalformed, err)
	}
	if v.Protocol != "scenarios" {
		return v, fmt.Errorf("%w: a %s verdict", protocol.ErrMalformed, v.Protocol)
	}
	return v, nil
}

// Evidence lists the artifacts a recorded verdict depends on beyond the
// shared inputs: the hidden tests, the meter's trace and receipts and the
// scenario-run record.
func Evidence(v Verdict) []digest.Digest {
	var out []digest.Digest
	for _, d := range []digest.Digest{v.Digests.Hidden, v.Digests.Trace, v.Digests.Receipts, v.Digests.Run} {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

// recordedRun is what a verdict's evidence holds.
type recordedRun struct {
	trace      []meter.TraceEntry
	traceRec   meter.TraceRecord
	receipts   meter.ReceiptsRecord
	receiptsB  []byte
	run        RunRecord
	runB       []byte
	workspaces map[digest.Digest][]byte
}

func loadRecorded(ctx context.Context, c Case, v Verdict) (*recordedRun, error) {
	st := c.Store
	r := &recordedRun{workspaces: map[digest.Digest][]byte{}}
	resolve := func(d digest.Digest) (ocispec.Descriptor, error) {
		desc, err := st.Resolve(ctx, d.String())
		if err != nil {
			return desc, fmt.Errorf("evidence %s: %w", d, err)
		}
		return desc, nil
	}
	desc, err := resolve(v.Digests.Trace)
	if err != nil {
		return nil, err
	}
	if r.traceRec, r.trace, err = meter.LoadTrace(ctx, st, desc); err != nil {
		return nil, err
	}
	if desc, err = resolve(v.Digests.Receipts); err != nil {
		return nil, err
	}
	art, err := bundle.Load(ctx, st, desc)
	if err != nil {
		return nil, err
	}
	if art.Kind != meter.KindReceipts {
		return nil, fmt.Errorf("%w: evidence %s is a %s, not receipts", protocol.ErrMalformed, v.Digests.Receipts, art.Kind)
	}
	if err := art.Decode(&r.receipts); err != nil {
		return nil, err
	}
	r.receiptsB = art.Record
	if desc, err = resolve(v.Digests.Run); err != nil {
		return nil, err
	}
	if art, err = bundle.Load(ctx, st, desc); err != nil {
		return nil, err
	}
	if art.Kind != KindRun {
		return nil, fmt.Errorf("%w: evidence %s is a %s, not a scenario run", protocol.ErrMalformed, v.Digests.Run, art.Kind)
	}
	if err := art.Decode(&r.run); err != nil {
		return nil, err
	}
	r.runB = art.Record
	for _, l := range art.Payloads {
		b, err := bundle.ReadPayload(ctx, st, l, 64<<20)
		if err != nil {
			return nil, err
		}
		r.workspaces[digest.FromBytes(b)] = b
	}
	return r, nil
}

// Redecide re-derives a recorded verdict: the harness, the policy and the
// verifier run again with the meter answering from the recorded trace (no
// upstream), and the trace, receipts and run records are rebuilt and compared
// with the recorded ones. Findings name what differs: a request the trace
// lacks (scenario, request and first differing field), a receipt, a
// workspace or a verifier report.
func Redecide(ctx context.Context, c Case, rv Verdict, p Params, o ReplayOptions) (Verdict, []protocol.Finding, error) {
	if c.Entry.Status != protocol.StatusAccepted {
		return rejected(c), nil, nil
	}
	e, err := open(ctx, c, !o.VerifyOnly, rv.Digests.Hidden)
	if err != nil {
		return Verdict{}, nil, err
	}
	defer e.close()
	rec, err := loadRecorded(ctx, c, rv)
	if err != nil {
		return Verdict{}, nil, err
	}
	if o.VerifyOnly {
		return verifyOnly(ctx, c, e, rv, rec)
	}
	mr := meter.NewRecorder()
	outs, err := p.runAll(ctx, e, mr, rec.trace)
	if err != nil {
		return Verdict{}, nil, err
	}
	var findings []protocol.Finding
	for _, d := range mr.Divergences() {
		findings = append(findings, divergence(d, mr.Trace(), rec.trace))
	}
	traceDigest, receiptsDigest := rv.Digests.Trace, rv.Digests.Receipts
	tr, _, receipts, err := meter.BuildRecords(mr, e.cfg, c.Refs.Submission.Digest)
	if err != nil {
		return Verdict{}, nil, err
	}
	if tr.Content.Digest != rec.traceRec.Content.Digest {
		findings = append(findings, protocol.Finding{Path: "trace", Recorded: rec.traceRec.Content.Digest.String(), Recomputed: tr.Content.Digest.String()})
		traceDigest = "" // a different trace is a different artifact
	}
	cd, err := meter.ConfigDigest(e.cfg)
	if err != nil {
		return Verdict{}, nil, err
	}
	rr := meter.ReceiptsRecord{Format: meter.ReceiptsFormat, Submission: c.Refs.Submission.Digest, Config: cd, Trace: rv.Digests.Trace,
		Summaries: meter.Summarize(receipts), Receipts: receipts}
	if rr.Receipts == nil {
		rr.Receipts = []meter.Receipt{}
	}
	if b, err := bundle.Canonical(rr); err != nil || !bytes.Equal(b, rec.receiptsB) {
		findings = append(findings, compareReceipts(rec.receipts.Receipts, receipts)...)
		receiptsDigest = ""
	}
	runDigest := rv.Digests.Run
	findings = append(findings, compareRun(c, rec, outs)...)
	if b, err := bundle.Canonical(runRecord(c, outs)); err != nil || !bytes.Equal(b, rec.runB) {
		runDigest = ""
	}
	v := p.start(c, e.spec)
	v.Digests = digests(c, e, traceDigest, receiptsDigest, runDigest)
	settle(&v, e.spec, outs, receipts)
	return v, findings, nil
}

func runRecord(c Case, outs []outcome) RunRecord {
	rr := RunRecord{Format: RunFormat, Submission: c.Refs.Submission.Digest, Task: c.Refs.Task}
	for _, o := range outs {
		rr.Scenarios = append(rr.Scenarios, o.run)
	}
	return rr
}

// verifyOnly re-runs the verifiers on the recorded workspaces.
func verifyOnly(ctx context.Context, c Case, e *evaluation, rv Verdict, rec *recordedRun) (Verdict, []protocol.Finding, error) {
	if len(rec.run.Scenarios) != len(e.spec.Scenarios) {
		return Verdict{}, nil, fmt.Errorf("%w: the run record has %d scenarios, the task %d", protocol.ErrMalformed, len(rec.run.Scenarios), len(e.spec.Scenarios))
	}
	outs := make([]outcome, len(rec.run.Scenarios))
	for i, rs := range rec.run.Scenarios {
		sc := e.spec.Scenarios[i]
		if rs.Name != sc.Name {
			return Verdict{}, nil, fmt.Errorf("%w: run record scenario %d is %q, the task's is %q", protocol.ErrMalformed, i, rs.Name, sc.Name)
		}
		o := outcome{run: rs}
		if rs.Workspace != "" {
			tarb, ok := rec.workspaces[rs.Workspace]
			if !ok {
				return Verdict{}, nil, fmt.Errorf("%w: the run record lacks the workspace of %s", protocol.ErrMalformed, rs.Name)
			}
			dir, err := os.MkdirTemp("", "feval-ws-")
			if err != nil {
				return Verdict{}, nil, err
			}
			ws := filepath.Join(dir, "workspace")
			err = bundle.Unpack(bytes.NewReader(tarb), ws, bundle.Limits{MaxFiles: 4096, MaxBytes: 64 << 20, MaxFile: 16 << 20})
			if err == nil {
				err = readable(dir)
			}
			if err != nil {
				os.RemoveAll(dir)
				return Verdict{}, nil, fmt.Errorf("scenario %s: unpacking the recorded workspace: %w", rs.Name, err)
			}
			o.run.Report, o.run.Infra, o.run.Control = verify(ctx, e.spec, e.taskDir, sc, ws)
			os.RemoveAll(dir)
		}
		outs[i] = o
	}
	findings := compareRun(c, rec, outs)
	runDigest := rv.Digests.Run
	if b, err := bundle.Canonical(runRecord(c, outs)); err != nil || !bytes.Equal(b, rec.runB) {
		runDigest = ""
	}
	v := Params{}.start(c, e.spec)
	v.Digests = digests(c, e, rv.Digests.Trace, rv.Digests.Receipts, runDigest)
	settle(&v, e.spec, outs, rec.receipts.Receipts)
	return v, findings, nil
}

// compareRun names the scenarios whose workspace or verifier report differ.
func compareRun(c Case, rec *recordedRun, outs []outcome) []protocol.Finding {
	var out []protocol.Finding
	byName := map[string]RunScenario{}
	for _, rs := range rec.run.Scenarios {
		byName[rs.Name] = rs
	}
	for _, o := range outs {
		was := byName[o.run.Name]
		p := "scenarios/" + o.run.Name
		if was.Workspace != o.run.Workspace {
			out = append(out, protocol.Finding{Path: p + "/workspace", Recorded: was.Workspace.String(), Recomputed: o.run.Workspace.String()})
		}
		a, _ := json.Marshal(was.Report)
		b, _ := json.Marshal(o.run.Report)
		if !bytes.Equal(a, b) {
			out = append(out, protocol.Finding{Path: p + "/report", Recorded: string(a), Recomputed: string(b)})
		}
		if was.Infra != o.run.Infra {
			out = append(out, protocol.Finding{Path: p + "/infra", Recorded: was.Infra, Recomputed: o.run.Infra})
		}
		if was.Agent.Turns != o.run.Agent.Turns || was.Agent.Stop != o.run.Agent.Stop || was.Agent.Detail != o.run.Agent.Detail {
			out = append(out, protocol.Finding{Path: p + "/agent", Recorded: fmt.Sprintf("%d turns, %s", was.Agent.Turns, was.Agent.Stop),
				Recomputed: fmt.Sprintf("%d turns, %s", o.run.Agent.Turns, o.run.Agent.Stop)})
		}
	}
	return out
}

// compareReceipts names the first differing field of each differing receipt.
func compareReceipts(was, now []meter.Receipt) []protocol.Finding {
	var out []protocol.Finding
	for i := 0; i < max(len(was), len(now)); i++ {
		var a, b []byte
		p := fmt.Sprintf("receipts[%d]", i)
		if i < len(was) {
			a, _ = json.Marshal(was[i])
			p = fmt.Sprintf("scenarios/%s/requests/%d", was[i].Scenario, was[i].Seq)
		}
		if i < len(now) {
			b, _ = json.Marshal(now[i])
			p = fmt.Sprintf("scenarios/%s/requests/%d", now[i].Scenario, now[i].Seq)
		}
		if f, ok := firstDiff(a, b); ok {
			out = append(out, protocol.Finding{Path: p + "/receipt/" + f.Path, Recorded: f.Recorded, Recomputed: f.Recomputed})
		}
	}
	return out
}

// divergence names a replayed request that the trace does not answer: its
// scenario, its sequence number, and the first field in which it differs
// from the recorded request of the same scenario and sequence number.
func divergence(d meter.Divergence, now, was []meter.TraceEntry) protocol.Finding {
	p := fmt.Sprintf("scenarios/%s/requests/%d", d.Scenario, d.Seq)
	var a, b []byte
	for _, te := range was {
		if te.Scenario == d.Scenario && te.Seq == d.Seq {
			a = []byte(te.Request)
		}
	}
	for _, te := range now {
		if te.Scenario == d.Scenario && te.Seq == d.Seq {
			b = []byte(te.Request)
		}
	}
	if a == nil {
		return protocol.Finding{Path: p, Recorded: "(no such request)", Recomputed: d.RequestDigest.String()}
	}
	if f, ok := firstDiff(a, b); ok {
		return protocol.Finding{Path: p + "/request/" + f.Path, Recorded: f.Recorded, Recomputed: f.Recomputed}
	}
	return protocol.Finding{Path: p + "/request", Recorded: digest.FromBytes(a).String(), Recomputed: d.RequestDigest.String()}
}

// firstDiff returns the first leaf (in key order) where two JSON documents
// differ, with its path ("messages[3].content").
func firstDiff(a, b []byte) (protocol.Finding, bool) {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		if bytes.Equal(a, b) {
			return protocol.Finding{}, false
		}
		return protocol.Finding{Path: "(body)", Recorded: clip(string(a)), Recomputed: clip(string(b))}, true
	}
	return diff("", x, y)
}

func diff(path string, x, y any) (protocol.Finding, bool) {
	switch xv := x.(type) {
	case map[string]any:
		if yv, ok := y.(map[string]any); ok {
			keys := map[string]bool{}
			for k := range xv {
				keys[k] = true
			}
			for k := range yv {
				keys[k] = true
			}
			for _, k := range sortedNames(keys) {
				if f, ok := diff(join(path, k), xv[k], yv[k]); ok {
					return f, true
				}
			}
			return protocol.Finding{}, false
		}
	case []any:
		if yv, ok := y.([]any); ok {
			for i := 0; i < min(len(xv), len(yv)); i++ {
				if f, ok := diff(fmt.Sprintf("%s[%d]", path, i), xv[i], yv[i]); ok {
					return f, true
				}
			}
			if len(xv) == len(yv) {
				return protocol.Finding{}, false
			}
			return protocol.Finding{Path: path + ".length", Recorded: fmt.Sprint(len(xv)), Recomputed: fmt.Sprint(len(yv))}, true
		}
	}
	a, _ := json.Marshal(x)
	b, _ := json.Marshal(y)
	if bytes.Equal(a, b) {
		return protocol.Finding{}, false
	}
	if path == "" {
		path = "(value)"
	}
	return protocol.Finding{Path: path, Recorded: clip(string(a)), Recomputed: clip(string(b))}, true
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
