package consensus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/internal/strictjson"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// A consensus artifact holds its record in two layers (record revision 4,
// docs/CONSENSUS.md "Artifact"): the signed record layer, whose size grows
// with the entries of the round, and one payload layer, VotesFile, with the
// bulk that grows with entries x validators: the verdicts considered, the
// votes counted and the votes excluded. The record layer names the payload by
// digest, and the manifest lists it, so the signature over the manifest
// covers both. In memory a Record is whole; only its encoding is split.

// VotesFile is the title of a consensus artifact's payload layer.
const VotesFile = "votes.json"

// MaxVotesSize bounds the payload layer a reader accepts (about 250 bytes
// per verdict considered and per vote: a million verdicts fit).
const MaxVotesSize = 512 << 20

// Votes is the payload layer of a consensus artifact: canonical JSON, the
// lists sorted as Record states.
type Votes struct {
	Verdicts []VerdictInput `json:"verdicts"`
	Counted  []Vote         `json:"counted"`
	Excluded []Exclusion    `json:"excluded"`
}

// VotesRef names the payload layer from the record layer: its digest and
// size, and how many items each list holds.
type VotesRef struct {
	Digest   digest.Digest `json:"digest"`
	Size     int64         `json:"size"`
	Verdicts int           `json:"verdicts"`
	Counted  int           `json:"counted"`
	Excluded int           `json:"excluded"`
}

// signedRecord is the record layer: Record without the bulk.
type signedRecord struct {
	Inputs      signedInputs         `json:"inputs"`
	ActiveStake uint64               `json:"active_stake"`
	QuorumStake scoring.Ratio        `json:"quorum_stake"`
	Results     []Result             `json:"results"`
	Seat        scoring.SeatDecision `json:"seat"`
	Weights     Weights              `json:"weights"`
	Votes       VotesRef             `json:"votes"`
}

type signedInputs struct {
	Round     digest.Digest   `json:"round"`
	Reveals   []digest.Digest `json:"reveals"`
	Stakes    digest.Digest   `json:"stakes"`
	Rules     digest.Digest   `json:"rules"`
	Incumbent *Incumbent      `json:"incumbent,omitempty"`
}

// ErrRecordLayout reports a consensus artifact whose layers are not a record
// and its votes payload as specified.
var ErrRecordLayout = errors.New("malformed consensus artifact")

// votesLayer is the payload layer descriptor of votes bytes b.
func votesLayer(b []byte) ocispec.Descriptor {
	d := digest.FromBytes(b)
	return ocispec.Descriptor{MediaType: bundle.MediaTypeFile, Digest: d, Size: int64(len(b)), Annotations: map[string]string{
		bundle.AnnotationContentDigest: d.String(),
		bundle.AnnotationContentSize:   strconv.FormatInt(int64(len(b)), 10),
		ocispec.AnnotationTitle:        VotesFile,
	}}
}

// split encodes rec as its record layer value and its votes payload bytes.
func split(rec Record) (signedRecord, []byte, error) {
	votes, err := bundle.Canonical(Votes{Verdicts: rec.Inputs.Verdicts, Counted: rec.Counted, Excluded: rec.Excluded})
	if err != nil {
		return signedRecord{}, nil, err
	}
	in := rec.Inputs
	return signedRecord{
		Inputs:      signedInputs{Round: in.Round, Reveals: in.Reveals, Stakes: in.Stakes, Rules: in.Rules, Incumbent: in.Incumbent},
		ActiveStake: rec.ActiveStake, QuorumStake: rec.QuorumStake, Results: rec.Results, Seat: rec.Seat, Weights: rec.Weights,
		Votes: VotesRef{Digest: digest.FromBytes(votes), Size: int64(len(votes)),
			Verdicts: len(rec.Inputs.Verdicts), Counted: len(rec.Counted), Excluded: len(rec.Excluded)},
	}, votes, nil
}

// artifact is the consensus artifact of rec (its payload layer not stored).
func artifact(rec Record, subject ocispec.Descriptor, created string) (bundle.Artifact, []byte, error) {
	head, votes, err := split(rec)
	if err != nil {
		return bundle.Artifact{}, nil, err
	}
	return bundle.Artifact{Kind: KindConsensus, Record: head, Layers: []ocispec.Descriptor{votesLayer(votes)}, Subject: &subject, Created: created}, votes, nil
}

// writeRecord stores the votes payload, then the signed consensus artifact.
func writeRecord(ctx context.Context, st cas.Store, s *bundle.Signer, rec Record, subject ocispec.Descriptor, created string) (ocispec.Descriptor, error) {
	a, votes, err := artifact(rec, subject, created)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if _, err := bundle.PushData(ctx, st, VotesFile, votes); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("storing %s: %w", VotesFile, err)
	}
	return bundle.WriteSigned(ctx, st, s, a)
}

// encodeRecord is the artifact bytes writeRecord would store for rec.
func encodeRecord(rec Record, subject ocispec.Descriptor, created string) (bundle.Encoded, error) {
	a, _, err := artifact(rec, subject, created)
	if err != nil {
		return bundle.Encoded{}, err
	}
	return bundle.Encode(a)
}

// LoadRecord reads a consensus artifact: its record layer and its votes
// payload, which must be exactly one raw layer titled VotesFile, the one the
// record names (digest, size and list lengths), in canonical JSON. Nothing in
// the record is believed about the payload: every figure is checked.
func LoadRecord(ctx context.Context, st cas.Store, desc ocispec.Descriptor) (*bundle.Loaded, Record, error) {
	var head signedRecord
	art, err := protocol.LoadAs(ctx, st, desc, KindConsensus, &head)
	if err != nil {
		return nil, Record{}, err
	}
	if len(art.Payloads) != 1 {
		return art, Record{}, fmt.Errorf("%w: %d payload layers, want 1 (%s)", ErrRecordLayout, len(art.Payloads), VotesFile)
	}
	layer := art.Payloads[0]
	switch {
	case layer.MediaType != bundle.MediaTypeFile || layer.Annotations[ocispec.AnnotationTitle] != VotesFile:
		return art, Record{}, fmt.Errorf("%w: the payload layer is not a raw %s", ErrRecordLayout, VotesFile)
	case layer.Digest != head.Votes.Digest || layer.Size != head.Votes.Size:
		return art, Record{}, fmt.Errorf("%w: the payload layer %s is not the votes the record names (%s)", ErrRecordLayout, layer.Digest, head.Votes.Digest)
	case layer.Size > MaxVotesSize:
		return art, Record{}, fmt.Errorf("%w: %s of %d bytes, over %d", ErrRecordLayout, VotesFile, layer.Size, MaxVotesSize)
	}
	b, err := bundle.ReadPayload(ctx, st, layer, MaxVotesSize)
	if err != nil {
		return art, Record{}, fmt.Errorf("reading %s: %w", VotesFile, err)
	}
	var votes Votes
	if err := strictjson.Decode(b, &votes); err != nil {
		return art, Record{}, fmt.Errorf("%w: %s: %v", ErrRecordLayout, VotesFile, err)
	}
	if c, err := bundle.Canonical(votes); err != nil || !bytes.Equal(c, b) {
		return art, Record{}, fmt.Errorf("%w: %s is not canonical JSON", ErrRecordLayout, VotesFile)
	}
	if votes.Verdicts == nil || votes.Counted == nil || votes.Excluded == nil ||
		len(votes.Verdicts) != head.Votes.Verdicts || len(votes.Counted) != head.Votes.Counted || len(votes.Excluded) != head.Votes.Excluded {
		return art, Record{}, fmt.Errorf("%w: %s does not hold the lists the record counts", ErrRecordLayout, VotesFile)
	}
	in := head.Inputs
	return art, Record{
		Inputs:      Inputs{Round: in.Round, Reveals: in.Reveals, Verdicts: votes.Verdicts, Stakes: in.Stakes, Rules: in.Rules, Incumbent: in.Incumbent},
		ActiveStake: head.ActiveStake, QuorumStake: head.QuorumStake, Results: head.Results, Seat: head.Seat, Weights: head.Weights,
		Counted: votes.Counted, Excluded: votes.Excluded,
	}, nil
}

// LayerSizes are the sizes in bytes of rec's record layer and votes payload.
func LayerSizes(rec Record) (record, votes int, err error) {
	head, v, err := split(rec)
	if err != nil {
		return 0, 0, err
	}
	b, err := bundle.Canonical(head)
	return len(b), len(v), err
}
