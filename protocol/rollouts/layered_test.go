package rollouts_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/gate"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// packLayered stores the submission in dir/name in format 3.
func (e *indexedEnv) packLayered(t *testing.T, name string, write func(dir string) error) rollouts.Refs {
	t.Helper()
	dir := filepath.Join(e.dir, name)
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	sub, err := protocol.PackSubmission(e.ctx, e.l, e.s, dir, bundle.PackOptions{Kind: protocol.KindSubmission})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Content.Type != protocol.ContentTypeRollouts {
		t.Fatalf("%s packed as %q, not in format 3", name, sub.Content.Type)
	}
	return rollouts.Refs{Task: e.task, Submission: sub.Artifact.OCI(), Round: ocispec.Descriptor{Digest: digest.FromString("r")}}
}

// writeLayered stores a format-3 submission whose index and rows layer are
// given as they are, however they disagree.
func (e *indexedEnv) writeLayered(t *testing.T, index, rows []byte) rollouts.Refs {
	t.Helper()
	raw := func(mt, title string, b []byte) ocispec.Descriptor {
		d, err := bundle.PushBytes(e.ctx, e.l, mt, b)
		if err != nil {
			t.Fatal(err)
		}
		d.Annotations = map[string]string{bundle.AnnotationContentDigest: d.Digest.String(),
			bundle.AnnotationContentSize: strconv.Itoa(len(b)), ocispec.AnnotationTitle: title}
		return d
	}
	ix, rl := raw(bundle.MediaTypeRowsIndex, protocol.RowsIndexTitle, index), raw(bundle.MediaTypeRows, fx.RowsFile, rows)
	rec := bundle.ContentRecord{Content: bundle.Content{Type: protocol.ContentTypeRollouts, Digest: ix.Digest, Size: ix.Size}}
	desc, err := bundle.WriteSigned(e.ctx, e.l, e.s, bundle.Artifact{Kind: protocol.KindSubmission, Record: rec, Layers: []ocispec.Descriptor{ix, rl}})
	if err != nil {
		t.Fatal(err)
	}
	return rollouts.Refs{Task: e.task, Submission: desc, Round: ocispec.Descriptor{Digest: digest.FromString("r")}}
}

func (e *indexedEnv) honestFiles(t *testing.T, kind fx.MinerKind) (meta, rows []byte) {
	t.Helper()
	sub, err := fx.Miner(kind, e.g, []byte(fx.ReferenceMinerSeed))
	if err != nil {
		t.Fatal(err)
	}
	meta, rows, err = fx.EncodeSubmission(sub, e.g.Spec.MaxRowBytes)
	if err != nil {
		t.Fatal(err)
	}
	return meta, rows
}

// TestLayeredDecideMatchesRows: a submission in format 3 gets the verdict
// the same rows get in format 1, audited and in full.
func TestLayeredDecideMatchesRows(t *testing.T) {
	e := newIndexedEnv(t)
	for _, kind := range []fx.MinerKind{fx.Honest, fx.Inflated10} {
		rows := e.pack(t, string(kind)+"-rows", writer(kind, e.g, false), nil)
		layered := e.packLayered(t, string(kind)+"-layered", writer(kind, e.g, false))
		for _, full := range []bool{false, true} {
			want, got := e.decide(t, rows, full), e.decide(t, layered, full)
			want.Submission, got.Submission = "", ""
			if want.Audit != nil && got.Audit != nil {
				want.Audit.Seed, got.Audit.Seed = "", ""
			}
			if full && !reflect.DeepEqual(want, got) {
				t.Errorf("%s full: layered verdict %+v, rows verdict %+v", kind, got, want)
			}
			if got.ClaimedScore != want.ClaimedScore || got.Rows != 120 {
				t.Errorf("%s: layered claims %s over %d rows, rows claim %s", kind, got.ClaimedScore, got.Rows, want.ClaimedScore)
			}
			if wantStatus := map[fx.MinerKind]string{fx.Honest: rollouts.StatusPassed, fx.Inflated10: rollouts.StatusRejected}[kind]; full && got.Status != wantStatus {
				t.Errorf("%s full: status %s, want %s", kind, got.Status, wantStatus)
			}
		}
	}
}

// TestLayeredRowsCheckedAgainstIndex: rows whose bytes differ from their
// SHA-256 in the index (same lengths, so the index still tiles the layer) are
// each a wrong claim: malformed, rejected, in an audit and in full.
func TestLayeredRowsCheckedAgainstIndex(t *testing.T) {
	e := newIndexedEnv(t)
	meta, rows := e.honestFiles(t, fx.Honest)
	index, err := gate.EncodeRowsIndex(meta, rows)
	if err != nil {
		t.Fatal(err)
	}
	// Each response gains a space in front and loses its last byte, and a
	// claim of 1 becomes 0 in the row (not in the index).
	lines := bytes.SplitAfter(bytes.TrimSuffix(rows, []byte("\n")), []byte("\n"))
	claims := map[string]string{} // the index's claim of each task id
	for i, l := range lines {
		var r struct {
			TaskID string `json:"task_id"`
			Reward string `json:"reward_claimed"`
		}
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		claims[r.TaskID] = r.Reward
		j := bytes.Index(l, []byte(`","reward_claimed"`))
		k := bytes.Index(l, []byte(`"response":"`)) + len(`"response":"`)
		lines[i] = bytes.Join([][]byte{l[:k], []byte(" "), l[k : j-1], l[j:]}, nil)
		lines[i] = bytes.Replace(lines[i], []byte(`"reward_claimed":"1"`), []byte(`"reward_claimed":"0"`), 1)
	}
	tampered := append(bytes.Join(lines, nil), '\n')
	if len(tampered) != len(rows) || bytes.Equal(tampered, rows) {
		t.Fatalf("tampering changed the length (%d, %d) or nothing", len(tampered), len(rows))
	}
	refs := e.writeLayered(t, index, tampered)
	for _, full := range []bool{false, true} {
		got := e.decide(t, refs, full)
		if got.Status != rollouts.StatusRejected || got.Reason != rollouts.ReasonRewardMismatch {
			t.Fatalf("full %v: status %s (%s), want rejected", full, got.Status, got.Reason)
		}
		ones := 0
		for _, r := range got.Audit.Rows {
			// A malformed row's claimed is its index entry's claim, never
			// what the row says (PROTOCOL.md §6, format 3).
			if r.Outcome != rollouts.OutcomeMalformed || r.Claimed != claims[r.TaskID] || r.Recomputed != "" {
				t.Fatalf("full %v: row %+v: want malformed, claimed %q", full, r, claims[r.TaskID])
			}
			if r.Claimed == "1" {
				ones++
			}
		}
		if ones == 0 {
			t.Fatalf("full %v: no audited row claims 1, so the test shows nothing", full)
		}
	}
}

// TestLayeredAuditReadsOnlyItsRows: an audit reads the sampled rows by
// range and does not hash the whole rows layer, so a damaged byte outside
// the sample goes unseen by it; a full evaluation verifies the layer and
// fails on the damage (as fsck and verify do).
func TestLayeredAuditReadsOnlyItsRows(t *testing.T) {
	e := newIndexedEnv(t)
	refs := e.packLayered(t, "honest", writer(fx.Honest, e.g, false))
	before := e.decide(t, refs, false)
	if before.Status != rollouts.StatusPassed {
		t.Fatalf("status %s", before.Status)
	}
	sampled := map[string]bool{}
	for _, r := range before.Audit.Rows {
		sampled[r.TaskID] = true
	}
	art, err := bundle.Load(e.ctx, e.l, refs.Submission)
	if err != nil {
		t.Fatal(err)
	}
	ixl, rl, _, err := protocol.RowsLayers(art)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := cas.ReadAll(e.ctx, e.l, ixl, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	x, err := gate.ParseRowsIndex(ib, gate.RowsIndexLimits{})
	if err != nil {
		t.Fatal(err)
	}
	victim := -1
	for i := 0; i < x.Len() && victim < 0; i++ {
		if !sampled[x.TaskID(i)] {
			victim = i
		}
	}
	off, _ := x.Span(victim)
	path := e.l.BlobPath(rl.Digest)
	blob, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blob[off+2] ^= 0x01
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	if after := e.decide(t, refs, false); !reflect.DeepEqual(after, before) {
		t.Errorf("audit verdict changed by a byte outside its sample:\n%+v\n%+v", after, before)
	}
	_, err = rollouts.Decide(e.ctx, e.l, refs, e.entry, rollouts.Params{Beacon: rollouts.Beacon{Source: "s", Value: "v"}, Full: true})
	if !errors.Is(err, cas.ErrDigestMismatch) {
		t.Errorf("full evaluation of a damaged rows layer: %v, want a digest mismatch", err)
	}
}

// TestLayeredHostileIndex: an index that does not describe the task or the
// rows layer is refused with ErrRowsIndex, before any row is read.
func TestLayeredHostileIndex(t *testing.T) {
	e := newIndexedEnv(t)
	meta, rows := e.honestFiles(t, fx.Honest)
	index, err := gate.EncodeRowsIndex(meta, rows)
	if err != nil {
		t.Fatal(err)
	}
	short := bytes.SplitAfterN(rows, []byte("\n"), 2)[1]
	shortIndex, err := gate.EncodeRowsIndex(meta, short)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ index, rows []byte }{
		"rows layer longer than the index says": {index, append(append([]byte(nil), rows...), rows[:10]...)},
		"a task id missing":                     {shortIndex, short},
		"not an index":                          {[]byte("FVRIDX01 and then nothing"), rows},
	} {
		t.Run(name, func(t *testing.T) {
			refs := e.writeLayered(t, c.index, c.rows)
			_, err := rollouts.Decide(e.ctx, e.l, refs, e.entry, rollouts.Params{Beacon: rollouts.Beacon{Source: "s", Value: "v"}})
			if !errors.Is(err, gate.ErrRowsIndex) || !errors.Is(err, protocol.ErrMalformed) {
				t.Fatalf("got %v, want ErrRowsIndex and ErrMalformed (a rejected input, exit 6)", err)
			}
		})
	}
}
