package consensus

import (
	"bytes"
	"errors"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestRecordPayload: the bulk of a record (verdicts, counted and excluded
// votes) is in the votes payload, the signed record layer names it, and
// LoadRecord gives back the whole record.
func TestRecordPayload(t *testing.T) {
	k := newKeys(t, 2, 3)
	w := newWorld(t, k, []string{"a", "b"}, []uint64{10, 10, 10})
	var verdicts []digest.Digest
	for v := range 3 {
		for m := range 2 {
			verdicts = append(verdicts, w.verdict(k.vals[v], m, rollouts.StatusPassed, "1/2", uint64(m+1), nil))
		}
	}
	verdicts = append(verdicts, w.verdict(k.rogue, 0, rollouts.StatusPassed, "1", 9, nil)) // excluded
	rec := w.compute(nil)
	if len(rec.Counted) != 6 || len(rec.Excluded) != 1 {
		t.Fatalf("%d counted, %d excluded", len(rec.Counted), len(rec.Excluded))
	}
	round, err := loadRound(w.ctx, w.st, w.round.Digest)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := writeRecord(w.ctx, w.st, k.owner, rec, round.desc, "")
	if err != nil {
		t.Fatal(err)
	}
	art, got, err := LoadRecord(w.ctx, w.st, desc)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := encode(t, got), encode(t, rec); !bytes.Equal(a, b) {
		t.Errorf("loaded record differs:\n%s\nwant\n%s", a, b)
	}
	for _, v := range verdicts {
		if bytes.Contains(art.Record, []byte(v.String())) {
			t.Errorf("verdict %s is in the record layer", v)
		}
	}
	enc, err := encodeRecord(rec, round.desc, "")
	if err != nil || enc.Desc.Digest != desc.Digest {
		t.Errorf("encodeRecord gives %s, writeRecord stored %s (%v)", enc.Desc.Digest, desc.Digest, err)
	}

	// A record layer whose votes are not the payload it names, or a payload
	// other than the votes, is refused.
	head, votes, err := split(rec)
	if err != nil {
		t.Fatal(err)
	}
	other := bytes.Replace(votes, []byte(`"sequence":1`), []byte(`"sequence":7`), 1)
	if bytes.Equal(other, votes) {
		t.Fatal("nothing replaced")
	}
	for name, c := range map[string]struct {
		head  signedRecord
		layer []byte
	}{
		"payload is other votes": {head, other},
		"counts differ":          {func() signedRecord { h := head; h.Votes.Counted++; return h }(), votes},
		"not canonical": {func() signedRecord {
			h := head
			b := append(votes, ' ')
			h.Votes.Digest, h.Votes.Size = digest.FromBytes(b), int64(len(b))
			return h
		}(), append(votes, ' ')},
	} {
		t.Run(name, func(t *testing.T) {
			layer, err := bundle.PushData(w.ctx, w.st, VotesFile, c.layer)
			if err != nil {
				t.Fatal(err)
			}
			subj := round.desc
			d, err := bundle.WriteSigned(w.ctx, w.st, k.owner, bundle.Artifact{Kind: KindConsensus, Record: c.head, Layers: []ocispec.Descriptor{layer}, Subject: &subj})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := LoadRecord(w.ctx, w.st, d); !errors.Is(err, ErrRecordLayout) {
				t.Errorf("LoadRecord = %v, want ErrRecordLayout", err)
			}
		})
	}
}
