package meter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Artifact kinds and record formats.
const (
	KindTrace      = "trace"
	KindReceipts   = "receipts"
	TraceFormat    = "feval.trace.v1"
	ReceiptsFormat = "feval.receipts.v1"
	// TraceFile is the title of the trace's payload layer.
	TraceFile = "trace.jsonl"
)

// Limits on what LoadTrace reads.
const (
	MaxTraceBytes     = 1 << 30
	MaxTraceLineBytes = 256 << 20
)

// ErrTrace reports a trace artifact that does not have the documented form.
var ErrTrace = errors.New("malformed trace")

// TraceRecord is the record of a trace artifact; the entries are its payload
// layer (TraceFile), one canonical-JSON TraceEntry per line.
type TraceRecord struct {
	Format     string          `json:"format"`
	Submission digest.Digest   `json:"submission"`
	Scenarios  []ScenarioCount `json:"scenarios"`
	Entries    int64           `json:"entries"`
	Content    bundle.Content  `json:"content"`
}

// ScenarioCount is how many entries one scenario has.
type ScenarioCount struct {
	Scenario string `json:"scenario"`
	Entries  int64  `json:"entries"`
}

// ReceiptsRecord is the record of a receipts artifact.
type ReceiptsRecord struct {
	Format     string        `json:"format"`
	Submission digest.Digest `json:"submission"`
	// Config is the digest of the canonical meter configuration the calls ran
	// under; Trace the digest of the trace artifact of the same calls.
	Config    digest.Digest `json:"config"`
	Trace     digest.Digest `json:"trace"`
	Summaries []Summary     `json:"summaries"`
	Receipts  []Receipt     `json:"receipts"`
}

// Artifacts names the signed trace and receipts of one evaluation.
type Artifacts struct {
	Trace    ocispec.Descriptor `json:"trace"`
	Receipts ocispec.Descriptor `json:"receipts"`
}

// ConfigDigest is the digest of a configuration's canonical JSON.
func ConfigDigest(c Config) (digest.Digest, error) {
	b, err := bundle.Canonical(c)
	if err != nil {
		return "", err
	}
	return digest.FromBytes(b), nil
}

// EncodeTrace returns the trace payload: one canonical-JSON entry per line, each
// line ending in "\n", in the order given.
func EncodeTrace(entries []TraceEntry) ([]byte, error) {
	var buf bytes.Buffer
	for _, te := range entries {
		raw, err := json.Marshal(te)
		if err != nil {
			return nil, err
		}
		line, err := CanonicalRequest(raw)
		if err != nil {
			return nil, err
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// BuildRecords derives the two records from a recorder's content without
// storing anything; trace is the trace artifact's digest (named by receipts).
func BuildRecords(rec *Recorder, cfg Config, submission digest.Digest) (TraceRecord, []byte, []Receipt, error) {
	entries := rec.Trace()
	payload, err := EncodeTrace(entries)
	if err != nil {
		return TraceRecord{}, nil, nil, err
	}
	tr := TraceRecord{Format: TraceFormat, Submission: submission, Scenarios: []ScenarioCount{}, Entries: int64(len(entries)),
		Content: bundle.Content{Type: "file", Name: TraceFile, Digest: digest.FromBytes(payload), Size: int64(len(payload))}}
	for _, te := range entries {
		if n := len(tr.Scenarios); n == 0 || tr.Scenarios[n-1].Scenario != te.Scenario {
			tr.Scenarios = append(tr.Scenarios, ScenarioCount{Scenario: te.Scenario})
		}
		tr.Scenarios[len(tr.Scenarios)-1].Entries++
	}
	return tr, payload, rec.Receipts(), nil
}

// WriteArtifacts stores the recorder's trace and receipts as signed artifacts
// whose subject is the evaluated submission. created fixes the artifacts'
// creation annotation ("" for the epoch). Equal recordings give equal digests.
func WriteArtifacts(ctx context.Context, st cas.Store, s *bundle.Signer, rec *Recorder, cfg Config, subject ocispec.Descriptor, created string) (Artifacts, error) {
	tr, payload, receipts, err := BuildRecords(rec, cfg, subject.Digest)
	if err != nil {
		return Artifacts{}, fmt.Errorf("encoding the trace: %w", err)
	}
	layer, err := bundle.PushData(ctx, st, TraceFile, payload)
	if err != nil {
		return Artifacts{}, fmt.Errorf("storing the trace: %w", err)
	}
	td, err := bundle.WriteSigned(ctx, st, s, bundle.Artifact{Kind: KindTrace, Record: tr, Layers: []ocispec.Descriptor{layer}, Subject: &subject, Created: created})
	if err != nil {
		return Artifacts{}, fmt.Errorf("writing the trace: %w", err)
	}
	cd, err := ConfigDigest(cfg)
	if err != nil {
		return Artifacts{}, err
	}
	rr := ReceiptsRecord{Format: ReceiptsFormat, Submission: subject.Digest, Config: cd, Trace: td.Digest,
		Summaries: Summarize(receipts), Receipts: receipts}
	if rr.Receipts == nil {
		rr.Receipts = []Receipt{}
	}
	rd, err := bundle.WriteSigned(ctx, st, s, bundle.Artifact{Kind: KindReceipts, Record: rr, Subject: &subject, Created: created})
	if err != nil {
		return Artifacts{}, fmt.Errorf("writing the receipts: %w", err)
	}
	return Artifacts{Trace: td, Receipts: rd}, nil
}

// LoadTrace reads a trace artifact and its entries, verifying the payload's
// digest and that every line is the canonical encoding of a TraceEntry.
func LoadTrace(ctx context.Context, st cas.Store, desc ocispec.Descriptor) (TraceRecord, []TraceEntry, error) {
	var tr TraceRecord
	art, err := bundle.Load(ctx, st, desc)
	if err != nil {
		return tr, nil, err
	}
	if art.Kind != KindTrace {
		return tr, nil, fmt.Errorf("%s is a %s artifact, not a trace: %w", desc.Digest, art.Kind, ErrTrace)
	}
	if err := art.Decode(&tr); err != nil {
		return tr, nil, err
	}
	if tr.Format != TraceFormat || len(art.Payloads) != 1 {
		return tr, nil, fmt.Errorf("trace %s: format %q with %d payloads: %w", desc.Digest, tr.Format, len(art.Payloads), ErrTrace)
	}
	if d := art.Payloads[0].Annotations[bundle.AnnotationContentDigest]; d != tr.Content.Digest.String() {
		return tr, nil, fmt.Errorf("trace %s: payload %s is not the recorded content %s: %w", desc.Digest, d, tr.Content.Digest, ErrTrace)
	}
	rc, err := bundle.OpenPayload(ctx, st, art.Payloads[0])
	if err != nil {
		return tr, nil, err
	}
	defer rc.Close()
	entries, err := DecodeTrace(io.LimitReader(rc, MaxTraceBytes))
	if err != nil {
		return tr, nil, fmt.Errorf("trace %s: %w", desc.Digest, err)
	}
	if int64(len(entries)) != tr.Entries {
		return tr, nil, fmt.Errorf("trace %s: %d entries, record says %d: %w", desc.Digest, len(entries), tr.Entries, ErrTrace)
	}
	return tr, entries, nil
}

// DecodeTrace parses a trace payload strictly.
func DecodeTrace(r io.Reader) ([]TraceEntry, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []TraceEntry
	for n := 1; ; n++ {
		line, err := readLine(br, MaxTraceLineBytes)
		if err == io.EOF && len(line) == 0 {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w: %v", n, ErrTrace, err)
		}
		c, err := CanonicalRequest(line)
		if err != nil || !bytes.Equal(c, line) {
			return nil, fmt.Errorf("line %d is not canonical JSON: %w", n, ErrTrace)
		}
		var te TraceEntry
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&te); err != nil {
			return nil, fmt.Errorf("line %d: %w: %v", n, ErrTrace, err)
		}
		// Exactly the encoding of what was decoded: encoding/json matches field
		// names case-insensitively, so a differently cased key must not pass.
		if again, err := EncodeTrace([]TraceEntry{te}); err != nil || !bytes.Equal(again[:len(again)-1], line) {
			return nil, fmt.Errorf("line %d is not the encoding of a trace entry: %w", n, ErrTrace)
		}
		out = append(out, te)
	}
}

func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if len(buf) > limit {
			return nil, fmt.Errorf("line longer than %d bytes", limit)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(buf) > 0:
			return nil, errors.New("last line does not end in a newline")
		case err != nil:
			return buf, err
		}
		return buf[:len(buf)-1], nil
	}
}

// LoadReceipts reads a receipts artifact's record.
func LoadReceipts(ctx context.Context, st cas.Store, desc ocispec.Descriptor) (ReceiptsRecord, error) {
	var rr ReceiptsRecord
	art, err := bundle.Load(ctx, st, desc)
	if err != nil {
		return rr, err
	}
	if art.Kind != KindReceipts {
		return rr, fmt.Errorf("%s is a %s artifact, not receipts: %w", desc.Digest, art.Kind, bundle.ErrNotArtifact)
	}
	if err := art.Decode(&rr); err != nil {
		return rr, err
	}
	if rr.Format != ReceiptsFormat {
		return rr, fmt.Errorf("receipts %s: format %q: %w", desc.Digest, rr.Format, bundle.ErrNotArtifact)
	}
	return rr, nil
}
