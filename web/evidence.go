package web

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Limits on what the evidence page reads from linked artifacts.
const (
	// maxLinked bounds the artifacts one verdict may link as traces,
	// receipts or checkpoints.
	maxLinked = 256
	// maxPayload bounds one JSON or JSONL payload read for cost entries.
	maxPayload = 8 << 20
	// maxMatchedShown bounds the matched audit rows an HTML page lists.
	maxMatchedShown = 500
)

// EvidencePage is everything one verdict records, arranged for checking it:
// the summary, the audit rows (mismatches first), the linked traces,
// receipts and checkpoints, the costs and losses they carry, who signed the
// verdict and the command that replays it.
type EvidencePage struct {
	Verdict    digest.Digest `json:"verdict"`
	Protocol   string        `json:"protocol"`
	Status     string        `json:"status"`
	Reason     string        `json:"reason,omitempty"`
	Submission string        `json:"submission,omitempty"`
	// Round is the round the verdict names among its inputs, when the store
	// holds it.
	Round    digest.Digest `json:"round,omitempty"`
	Sequence *uint64       `json:"sequence,omitempty"`
	// Rows is the number of rows the submission holds (rollouts).
	Rows *int64 `json:"rows,omitempty"`
	// ClaimedScore is the score the submission claims over all its rows.
	ClaimedScore string `json:"claimed_score,omitempty"`
	// Warnings qualify the status: no trusted signature, an unverified
	// beacon, an infra_error (see [Summarize]).
	Warnings []string `json:"warnings"`
	// Audit is the sampled recomputation, when the verdict has one.
	Audit *AuditView `json:"audit,omitempty"`
	// Scenarios and Optimizer are what a verdict of those protocols decided.
	Scenarios *ScenariosView `json:"scenarios,omitempty"`
	Optimizer *OptimizerView `json:"optimizer,omitempty"`
	// Inputs are the verdict's named inputs: digests link to their pages.
	Inputs []Input `json:"inputs"`
	// Violations are the gate findings, as recorded.
	Violations []json.RawMessage `json:"violations"`
	// RevealCheck is the recorded outcome of the reveal checks, as recorded.
	RevealCheck json.RawMessage `json:"reveal_check,omitempty"`
	// Traces, Receipts and Checkpoints are the artifacts the verdict names
	// under those fields.
	Traces      []Linked `json:"traces"`
	Receipts    []Linked `json:"receipts"`
	Checkpoints []Linked `json:"checkpoints"`
	// Costs is the metered cost per scenario and model found in the verdict
	// and its receipts and traces.
	Costs *CostChart `json:"costs,omitempty"`
	// Losses are the values in micro-nats the verdict and its checkpoints
	// record (held-out losses of optimizer verdicts), by field path.
	Losses []Loss `json:"losses"`
	// Signatures are the verdict's signature referrers checked against the
	// viewer's trusted keys; Trusted is set when one of them counts.
	Signatures  []bundle.SignatureCheck `json:"signatures"`
	Trusted     bool                    `json:"trusted"`
	TrustedKeys []string                `json:"trusted_keys"`
	// Replay is how to regenerate the verdict oneself.
	Replay ReplayCommand `json:"replay"`
}

// AuditView is a verdict's audit with the rows ordered for reading:
// mismatches, then undetermined rows, then matches, each in recorded order.
type AuditView struct {
	BeaconSource string     `json:"beacon_source"`
	BeaconValue  string     `json:"beacon_value"`
	Seed         string     `json:"seed"`
	Full         bool       `json:"full"`
	SampleSize   int        `json:"sample_size"`
	Mismatches   int        `json:"mismatches"`
	Undetermined int        `json:"undetermined"`
	Matches      int        `json:"matches"`
	Rows         []AuditRow `json:"rows"`
	// Shown are the rows the page lists: every mismatched and undetermined
	// row and at most maxMatchedShown matched ones; Hidden counts the rest
	// (the JSON has them all).
	Shown  []AuditRow `json:"-"`
	Hidden int        `json:"-"`
	// ClaimedOnSample and RecomputedOnSample are the mean claimed and
	// recomputed rewards over the audited rows that were decided, exactly.
	ClaimedOnSample    string `json:"claimed_on_sample,omitempty"`
	RecomputedOnSample string `json:"recomputed_on_sample,omitempty"`
}

// AuditRow is one audited row.
type AuditRow struct {
	TaskID     string `json:"task_id"`
	Claimed    string `json:"claimed"`
	Recomputed string `json:"recomputed,omitempty"`
	Outcome    string `json:"outcome"`
}

// Input is one named input of a verdict.
type Input struct {
	Name   string        `json:"name"`
	Value  string        `json:"value"`
	Digest digest.Digest `json:"digest,omitempty"` // set when Value is a digest the store holds
}

// Linked is an artifact a verdict names, as found in the store.
type Linked struct {
	Digest digest.Digest `json:"digest"`
	Kind   string        `json:"kind,omitempty"`
	// Error says why the artifact could not be read ("" when it was).
	Error string `json:"error,omitempty"`
	// Record is the artifact's record, indented (cut at 4 KiB).
	Record string `json:"-"`
}

// Loss is one value in micro-nats.
type Loss struct {
	Path      string `json:"path"`
	MicroNats int64  `json:"micro_nats"`
}

// ReplayCommand is the command that regenerates a verdict, and the key it
// trusts.
type ReplayCommand struct {
	Command string `json:"command"`
	// Signer is the fingerprint of the key the command trusts: the trusted
	// key that signed the verdict, else the first key that validly signed it.
	Signer string `json:"signer,omitempty"`
	// KeyFile is the name (not the path) of the viewer's file of that key,
	// when it has one.
	KeyFile string `json:"key_file,omitempty"`
}

func (s *Server) loadVerdict(ctx context.Context, l *cas.Layout, r *http.Request) (ocispec.Descriptor, *bundle.Loaded, error) {
	d, err := pathDigest(r, "verdict")
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	desc, err := s.resolve(ctx, l, d)
	if err != nil {
		return desc, nil, err
	}
	art, err := bundle.Load(ctx, l, desc)
	if err != nil {
		return desc, nil, err
	}
	if art.Kind != protocol.KindVerdict {
		return desc, nil, fmt.Errorf("%s is a %s, not a verdict: %w", d, art.Kind, ErrWrongKind)
	}
	return desc, art, nil
}

func (s *Server) evidencePage(ctx context.Context, l *cas.Layout, r *http.Request) (string, any, error) {
	desc, art, err := s.loadVerdict(ctx, l, r)
	if err != nil {
		return "", nil, err
	}
	p, rec, err := recordEvidence(art.Record)
	if err != nil {
		return "", nil, err
	}
	p.Verdict = desc.Digest
	for i, in := range p.Inputs {
		d, err := digest.Parse(in.Value)
		if err != nil {
			continue
		}
		if desc, err := l.Resolve(ctx, d.String()); err == nil {
			p.Inputs[i].Digest = d
			if in.Name == "round" && desc.ArtifactType == bundle.ArtifactType(protocol.KindRound) {
				p.Round = d
			}
		}
	}
	top, _ := rec.(map[string]any)

	costs := newCostTable()
	costs.walk(rec)
	losses := map[string]int64{}
	collectLosses(rec, "", losses)
	// The linked artifacts: under the generic names, and where a protocol's
	// verdict names them.
	named := map[string][]digest.Digest{}
	for _, name := range []string{"traces", "trace", "receipts", "checkpoints", "checkpoint"} {
		named[name] = digestsIn(top[name])
	}
	if v := p.Scenarios; v != nil {
		traces, receipts := v.linkedDigests()
		named["trace"] = append(named["trace"], traces...)
		named["receipts"] = append(named["receipts"], receipts...)
	}
	if v := p.Optimizer; v != nil {
		named["checkpoint"] = append(named["checkpoint"], v.checkpoints()...)
	}
	seen := map[digest.Digest]bool{}
	for _, f := range []struct {
		names []string
		into  *[]Linked
	}{{[]string{"traces", "trace"}, &p.Traces}, {[]string{"receipts"}, &p.Receipts}, {[]string{"checkpoints", "checkpoint"}, &p.Checkpoints}} {
		for _, name := range f.names {
			for _, d := range named[name] {
				if len(*f.into) >= maxLinked || seen[d] {
					continue
				}
				seen[d] = true
				lk, linkedRec, payloads := s.linked(ctx, l, d)
				*f.into = append(*f.into, lk)
				if linkedRec != nil {
					costs.walk(linkedRec)
					collectLosses(linkedRec, name+"/"+shortD(d), losses)
				}
				for _, pl := range payloads {
					costs.walk(pl)
				}
			}
		}
	}
	p.Costs = costs.chart()
	if v := p.Scenarios; v != nil {
		if ch := v.costChart(); ch != nil {
			p.Costs = ch // the verdict's own per-scenario costs: what it signed
		}
	}
	for _, k := range sortedKeys(losses) {
		p.Losses = append(p.Losses, Loss{Path: k, MicroNats: losses[k]})
	}

	if p.Signatures, err = bundle.CheckSignatures(ctx, l, desc, s.trustedKeys()); err != nil {
		return "", nil, err
	}
	for _, k := range s.opts.Trusted {
		p.TrustedKeys = append(p.TrustedKeys, k.Key.Fingerprint)
	}
	p.Trusted = len(bundle.TrustedSigners(p.Signatures)) > 0
	if !p.Trusted {
		p.Warnings = append([]string{"untrusted: no key this viewer trusts signed this verdict, so what it says is only a claim"}, p.Warnings...)
	}
	p.Replay = s.replayCommand(desc.Digest, p.Signatures)
	return "Evidence for verdict " + shortD(desc.Digest), p, nil
}

// recordEvidence is the part of the evidence page that a verdict record
// alone decides (no store): its summary fields, audit, violations, reveal
// check and inputs (not yet linked). It also returns the decoded record.
func recordEvidence(record []byte) (EvidencePage, any, error) {
	rec, err := decodeJSON(record)
	if err != nil {
		return EvidencePage{}, nil, err
	}
	top, _ := rec.(map[string]any)
	p := EvidencePage{Protocol: str(top, "protocol"), Status: str(top, "status"),
		Reason: str(top, "reason"), Submission: str(top, "submission"), ClaimedScore: str(top, "claimed_score"),
		Inputs: []Input{}, Violations: []json.RawMessage{}, Traces: []Linked{}, Receipts: []Linked{},
		Checkpoints: []Linked{}, Losses: []Loss{}, TrustedKeys: []string{}, Warnings: verdictWarnings(record)}
	switch p.Protocol {
	case "scenarios":
		p.Scenarios = scenariosView(record)
	case "optimizer":
		p.Optimizer = optimizerView(record)
	}
	if p.Warnings == nil {
		p.Warnings = []string{}
	}
	if n, ok := integer(top["sequence"]); ok && n >= 0 {
		u := uint64(n)
		p.Sequence = &u
	}
	if n, ok := integer(top["rows"]); ok {
		p.Rows = &n
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(record, &raw)
	if rc, ok := raw["reveal_check"]; ok {
		p.RevealCheck = json.RawMessage(indent(rc))
	}
	var vs []json.RawMessage
	if json.Unmarshal(raw["violations"], &vs) == nil {
		p.Violations = append(p.Violations, vs...)
	}
	p.Audit = auditView(raw["audit"])
	if in, ok := top["inputs"].(map[string]any); ok {
		for _, k := range sortedKeys(in) {
			if v, ok := in[k].(string); ok {
				p.Inputs = append(p.Inputs, Input{Name: k, Value: v})
			}
		}
	}
	return p, rec, nil
}

// linked reads an artifact a verdict names: its summary, its decoded record,
// and the decoded JSON or JSONL payloads it carries (for costs).
func (s *Server) linked(ctx context.Context, l *cas.Layout, d digest.Digest) (Linked, any, []any) {
	lk := Linked{Digest: d}
	desc, err := s.resolve(ctx, l, d)
	if err != nil {
		lk.Error = err.Error()
		return lk, nil, nil
	}
	art, err := bundle.Load(ctx, l, desc)
	if err != nil {
		lk.Error = err.Error()
		return lk, nil, nil
	}
	lk.Kind = art.Kind
	lk.Record = indent(art.Record)
	if len(lk.Record) > 4096 {
		lk.Record = lk.Record[:4096] + "\n…"
	}
	rec, _ := decodeJSON(art.Record)
	var payloads []any
	for _, layer := range art.Payloads {
		title := layer.Annotations[ocispec.AnnotationTitle]
		if layer.MediaType != bundle.MediaTypeFile || !(strings.HasSuffix(title, ".json") || strings.HasSuffix(title, ".jsonl")) {
			continue
		}
		b, err := bundle.ReadPayload(ctx, l, layer, maxPayload)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 0, 64<<10), maxPayload)
		if strings.HasSuffix(title, ".json") {
			sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
				if !atEOF {
					return 0, nil, nil
				}
				return len(data), data, nil
			})
		}
		for sc.Scan() {
			if v, err := decodeJSON(sc.Bytes()); err == nil {
				payloads = append(payloads, v)
			}
		}
	}
	return lk, rec, payloads
}

func auditView(raw json.RawMessage) *AuditView {
	if len(raw) == 0 {
		return nil
	}
	var a struct {
		Beacon struct {
			Source string `json:"source"`
			Value  string `json:"value"`
		} `json:"beacon"`
		Seed       string     `json:"seed"`
		Full       bool       `json:"full"`
		SampleSize int        `json:"sample_size"`
		Rows       []AuditRow `json:"rows"`
	}
	if json.Unmarshal(raw, &a) != nil {
		return nil
	}
	v := &AuditView{BeaconSource: a.Beacon.Source, BeaconValue: a.Beacon.Value, Seed: a.Seed, Full: a.Full,
		SampleSize: a.SampleSize, Rows: []AuditRow{}}
	rank := func(o string) int {
		switch o {
		case "mismatch":
			return 0
		case "undetermined":
			return 1
		}
		return 2
	}
	claimed, recomputed, n := new(big.Rat), new(big.Rat), 0
	for _, r := range a.Rows {
		switch rank(r.Outcome) {
		case 0:
			v.Mismatches++
		case 1:
			v.Undetermined++
		default:
			v.Matches++
		}
		c, err1 := scoring.ParseRatio(r.Claimed)
		g, err2 := scoring.ParseRatio(r.Recomputed)
		if err1 == nil && err2 == nil {
			claimed.Add(claimed, c.Rat())
			recomputed.Add(recomputed, g.Rat())
			n++
		}
	}
	v.Rows = append(v.Rows, a.Rows...)
	slices.SortStableFunc(v.Rows, func(x, y AuditRow) int { return cmp.Compare(rank(x.Outcome), rank(y.Outcome)) })
	v.Shown = v.Rows
	if keep := v.Mismatches + v.Undetermined + maxMatchedShown; len(v.Rows) > keep {
		v.Shown, v.Hidden = v.Rows[:keep], len(v.Rows)-keep
	}
	if n > 0 {
		d := big.NewRat(int64(n), 1)
		v.ClaimedOnSample = scoring.RatioOf(claimed.Quo(claimed, d)).String()
		v.RecomputedOnSample = scoring.RatioOf(recomputed.Quo(recomputed, d)).String()
	}
	return v
}

func (s *Server) replayCommand(d digest.Digest, checks []bundle.SignatureCheck) ReplayCommand {
	rc := ReplayCommand{}
	for _, c := range checks {
		if c.Trusted {
			rc.Signer = c.Signer
			break
		}
	}
	if rc.Signer == "" {
		for _, c := range checks {
			if c.Signer != "" && !c.Malformed {
				rc.Signer = c.Signer
				break
			}
		}
	}
	for _, k := range s.opts.Trusted {
		if k.Key.Fingerprint == rc.Signer && k.Path != "" {
			rc.KeyFile = filepath.Base(k.Path) // its name, never where the server keeps it
		}
	}
	// A reader pastes the command on another machine: it names the registry
	// the verdict was gathered from, never the server's own store.
	parts := []string{"feval", "replay"}
	if s.opts.SourceName != "" {
		parts = append(parts, "--from", shellQuote(s.opts.SourceName))
	}
	key := "VALIDATOR.pub"
	if rc.KeyFile != "" {
		key = shellQuote(rc.KeyFile)
	}
	parts = append(parts, "--pub", key, d.String())
	rc.Command = strings.Join(parts, " ")
	return rc
}

// shellQuote quotes s for a POSIX shell unless it is made of safe characters.
func shellQuote(s string) string {
	safe := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./:@+=,", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ReplayPage explains how to check a verdict oneself.
type ReplayPage struct {
	Verdict digest.Digest `json:"verdict"`
	Replay  ReplayCommand `json:"replay"`
	// Inputs are what replay fetches besides the verdict: its subject and
	// named inputs.
	Inputs []Input `json:"inputs"`
}

func (s *Server) replayPage(ctx context.Context, l *cas.Layout, r *http.Request) (string, any, error) {
	desc, art, err := s.loadVerdict(ctx, l, r)
	if err != nil {
		return "", nil, err
	}
	checks, err := bundle.CheckSignatures(ctx, l, desc, s.trustedKeys())
	if err != nil {
		return "", nil, err
	}
	p := ReplayPage{Verdict: desc.Digest, Replay: s.replayCommand(desc.Digest, checks), Inputs: []Input{}}
	if sub := art.Manifest.Subject; sub != nil {
		p.Inputs = append(p.Inputs, Input{Name: "subject", Value: sub.Digest.String(), Digest: sub.Digest})
	}
	var v struct {
		Inputs map[string]any `json:"inputs"`
	}
	_ = json.Unmarshal(art.Record, &v)
	for _, k := range sortedKeys(v.Inputs) {
		if sv, ok := v.Inputs[k].(string); ok {
			in := Input{Name: k, Value: sv}
			if d, err := digest.Parse(sv); err == nil {
				in.Digest = d
			}
			p.Inputs = append(p.Inputs, in)
		}
	}
	return "Replay verdict " + shortD(desc.Digest), p, nil
}

// decodeJSON decodes b keeping numbers exact.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func integer(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// digestsIn returns the digests a field names: a digest string, a list of
// them, or objects (or a list of objects) with a "digest" or "artifact"
// member.
func digestsIn(v any) []digest.Digest {
	var out []digest.Digest
	add := func(x any) {
		switch t := x.(type) {
		case string:
			if d, err := digest.Parse(t); err == nil {
				out = append(out, d)
			}
		case map[string]any:
			for _, k := range []string{"digest", "artifact"} {
				if s, ok := t[k].(string); ok {
					if d, err := digest.Parse(s); err == nil {
						out = append(out, d)
						break
					}
				}
			}
		}
	}
	if list, ok := v.([]any); ok {
		for _, x := range list {
			add(x)
		}
	} else {
		add(v)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// collectLosses records every integer member whose name ends in
// "_micro_nats", by its path.
func collectLosses(v any, path string, out map[string]int64) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if strings.HasSuffix(k, "_micro_nats") {
				if n, ok := integer(x); ok && len(out) < 4096 {
					out[p] = n
					continue
				}
			}
			collectLosses(x, p, out)
		}
	case []any:
		for i, x := range t {
			collectLosses(x, fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}
