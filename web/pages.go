package web

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/consensus"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Round states relative to the viewer's clock.
const (
	StateCommitOpen = "commit_open" // commits are accepted
	StateRevealOpen = "reveal_open" // commits closed, reveals accepted
	StateClosed     = "closed"      // both windows closed
	StateUnknown    = "unknown"     // windows are block heights: the chain decides
)

// RoundSummary is one round as the rounds page lists it.
type RoundSummary struct {
	Digest      digest.Digest   `json:"digest"`
	Tags        []string        `json:"tags"`
	Task        digest.Digest   `json:"task"`
	Protocol    string          `json:"protocol"`
	CommitUntil protocol.Window `json:"commit_until"`
	RevealUntil protocol.Window `json:"reveal_until"`
	State       string          `json:"state"`
	// Commitments counts the commitments the store holds for the round.
	Commitments int `json:"commitments"`
	// Consensus lists the consensus records of the round, sorted.
	Consensus []digest.Digest `json:"consensus"`
}

// RoundsPage lists every round in the store.
type RoundsPage struct {
	// Rounds are the latest first: by when commits close, then digest.
	Rounds []RoundSummary `json:"rounds"`
	// Now is the viewer's clock reading the states were decided at.
	Now string `json:"now"`
}

func (s *Server) roundsPage(ctx context.Context, l *cas.Layout, _ *http.Request) (string, any, error) {
	now := s.opts.Now().UTC()
	p := RoundsPage{Rounds: []RoundSummary{}, Now: now.Format(time.RFC3339)}
	for _, m := range l.Manifests() {
		if m.ArtifactType != bundle.ArtifactType(protocol.KindRound) {
			continue
		}
		rs, err := s.roundSummary(ctx, l, m, now)
		if err != nil {
			continue // not a readable round: the artifact page shows what it is
		}
		p.Rounds = append(p.Rounds, rs)
	}
	// The latest round first: by when commits close (rounds with height
	// windows last), then by digest.
	slices.SortFunc(p.Rounds, func(a, b RoundSummary) int {
		ta, _ := time.Parse(time.RFC3339, a.CommitUntil.Time)
		tb, _ := time.Parse(time.RFC3339, b.CommitUntil.Time)
		return cmp.Or(tb.Compare(ta), cmp.Compare(a.Digest, b.Digest))
	})
	return "Rounds", p, nil
}

func (s *Server) roundSummary(ctx context.Context, l *cas.Layout, desc ocispec.Descriptor, now time.Time) (RoundSummary, error) {
	var r protocol.Round
	if _, err := protocol.LoadAs(ctx, l, desc, protocol.KindRound, &r); err != nil {
		return RoundSummary{}, err
	}
	rs := RoundSummary{Digest: desc.Digest, Tags: tagsOf(l, desc.Digest), Task: r.Task, Protocol: r.Protocol,
		CommitUntil: r.CommitUntil, RevealUntil: r.RevealUntil, State: roundState(r, now), Consensus: []digest.Digest{}}
	commits, err := l.Referrers(ctx, desc, bundle.ArtifactType(protocol.KindCommitment))
	if err != nil {
		return RoundSummary{}, err
	}
	rs.Commitments = len(commits)
	cons, err := l.Referrers(ctx, desc, bundle.ArtifactType(consensus.KindConsensus))
	if err != nil {
		return RoundSummary{}, err
	}
	for _, c := range cons {
		rs.Consensus = append(rs.Consensus, c.Digest)
	}
	return rs, nil
}

func roundState(r protocol.Round, now time.Time) string {
	if r.CommitUntil.Kind != "time" || r.RevealUntil.Kind != "time" {
		return StateUnknown
	}
	cu, err1 := time.Parse(time.RFC3339, r.CommitUntil.Time)
	ru, err2 := time.Parse(time.RFC3339, r.RevealUntil.Time)
	switch {
	case err1 != nil || err2 != nil:
		return StateUnknown
	case !now.After(cu):
		return StateCommitOpen
	case !now.After(ru):
		return StateRevealOpen
	}
	return StateClosed
}

func tagsOf(l *cas.Layout, d digest.Digest) []string {
	out := []string{}
	for t, desc := range l.Tags() {
		if desc.Digest == d {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// BoardPage is a round's leaderboard: [consensus.Board] with the round's
// summary and, for a carried cell, when the round it comes from closed.
type BoardPage struct {
	Round RoundSummary `json:"round"`
	// Consensus is the record the scores, reward status and seat come from
	// ("" when the round has none a trusted key signed); CarryFrom the
	// earlier round carried from.
	Consensus  digest.Digest   `json:"consensus,omitempty"`
	CarryFrom  digest.Digest   `json:"carry_from,omitempty"`
	Validators []string        `json:"validators"`
	Rows       []BoardRow      `json:"rows"`
	Seat       *consensus.Seat `json:"seat,omitempty"`
	// LeftOut counts the round's verdicts no cell shows, by reason.
	LeftOut map[string]int `json:"left_out"`
	// Trusted are the fingerprints of the viewer's trusted keys.
	Trusted []string `json:"trusted_keys"`
	// Stakes are the shown validators' stakes in the consensus record's
	// stake table (none without a record).
	Stakes map[string]uint64 `json:"validator_stakes,omitempty"`
	// Query and Status are the search (part of a miner's fingerprint) and the
	// status filter (a cell status, or "" for all); Total counts the rows
	// before filtering.
	Query  string `json:"query,omitempty"`
	Status string `json:"status,omitempty"`
	Total  int    `json:"total"`
}

// boardStatuses are the status filter's values.
var boardStatuses = []string{string(scoring.CellPassed), string(scoring.CellInProgress), string(scoring.CellCarried), string(scoring.CellRejected)}

// boardFilter reads the search and status filter of a leaderboard request.
func boardFilter(r *http.Request) (query, status string, err error) {
	q := r.URL.Query()
	query, status = strings.ToLower(strings.TrimSpace(q.Get("q"))), q.Get("status")
	if len(query) > 64 || strings.Trim(query, "0123456789abcdef") != "" {
		return "", "", fmt.Errorf("q=%q: %w (want part of a miner's fingerprint, hex)", clipValue(query), ErrBadQuery)
	}
	if status != "" && !slices.Contains(boardStatuses, status) {
		return "", "", fmt.Errorf("status=%q: %w (want one of %s)", clipValue(status), ErrBadQuery, strings.Join(boardStatuses, ", "))
	}
	return query, status, nil
}

// keep says whether a row passes the search and the status filter: its miner
// contains the query, and one of its cells has the status.
func (p *BoardPage) keep(row BoardRow) bool {
	if !strings.Contains(row.Miner, p.Query) {
		return false
	}
	return p.Status == "" || slices.ContainsFunc(row.Cells, func(c BoardCell) bool { return string(c.Status) == p.Status })
}

// BoardRow is one miner's row.
type BoardRow struct {
	Miner  string               `json:"miner"`
	Scored bool                 `json:"scored"`
	Score  scoring.Ratio        `json:"score"`
	Reward scoring.RewardStatus `json:"reward"`
	Audit  scoring.Audit        `json:"audit"`
	// SeatHolder is set on the row of the miner holding the seat after the
	// round.
	SeatHolder bool        `json:"seat_holder"`
	Cells      []BoardCell `json:"cells"`
}

// BoardCell is one validator's cell: [scoring.Cell] with, for a carried
// cell, the window of the round it is carried from.
type BoardCell struct {
	scoring.Cell
	Validator string `json:"validator"`
	// CarriedWindow is when the reveals of the round a carried result comes
	// from closed.
	CarriedWindow string `json:"carried_window,omitempty"`
}

func (s *Server) boardPage(ctx context.Context, l *cas.Layout, r *http.Request) (string, any, error) {
	d, err := pathDigest(r, "round")
	if err != nil {
		return "", nil, err
	}
	cons, err := queryDigest(r, "consensus")
	if err != nil {
		return "", nil, err
	}
	carry, err := queryDigest(r, "carry_from")
	if err != nil {
		return "", nil, err
	}
	query, status, err := boardFilter(r)
	if err != nil {
		return "", nil, err
	}
	desc, err := s.resolve(ctx, l, d)
	if err != nil {
		return "", nil, err
	}
	if desc.ArtifactType != "" && desc.ArtifactType != bundle.ArtifactType(protocol.KindRound) {
		return "", nil, fmt.Errorf("%s is a %s: %w", d, bundle.KindOf(desc.ArtifactType), ErrWrongKind)
	}
	req := consensus.BoardRequest{Round: d.String(), Source: s.opts.Source, Trusted: s.trustedKeys()}
	if carry != "" {
		req.CarryFrom = carry.String()
	}
	if cons != "" {
		if _, err := s.resolve(ctx, l, cons); err != nil {
			return "", nil, fmt.Errorf("consensus %s: %w", cons, err)
		}
		req.Consensus = cons.String()
	}
	b, err := consensus.Leaderboard(ctx, l, req)
	if err != nil {
		if errors.Is(err, consensus.ErrInput) {
			err = fmt.Errorf("%w: %v", ErrBadQuery, err)
		}
		return "", nil, err
	}
	rs, err := s.roundSummary(ctx, l, desc, s.opts.Now().UTC()) // after gathering, which may have added some
	if err != nil {
		return "", nil, err
	}
	p := BoardPage{Round: rs, Consensus: b.Consensus, CarryFrom: b.CarryFrom, Validators: b.Validators, Rows: []BoardRow{},
		Seat: b.Seat, LeftOut: b.LeftOut, Trusted: []string{}, Stakes: b.Stakes, Query: query, Status: status, Total: len(b.Rows)}
	if p.Validators == nil {
		p.Validators = []string{}
	}
	for _, k := range s.opts.Trusted {
		p.Trusted = append(p.Trusted, k.Key.Fingerprint)
	}
	var carriedWindow string
	if b.CarryFrom != "" {
		var cr protocol.Round
		if cd, err := l.Resolve(ctx, b.CarryFrom.String()); err == nil {
			if _, err := protocol.LoadAs(ctx, l, cd, protocol.KindRound, &cr); err == nil {
				carriedWindow = cr.RevealUntil.String()
			}
		}
	}
	for _, row := range b.Rows {
		br := BoardRow{Miner: row.Miner, Scored: row.Scored, Score: row.Score, Reward: row.Reward, Audit: row.Audit,
			Cells: make([]BoardCell, len(row.Cells))}
		br.SeatHolder = p.Seat != nil && p.Seat.HolderMiner != "" && p.Seat.HolderMiner == row.Miner
		for j, c := range row.Cells {
			bc := BoardCell{Cell: c, Validator: b.Validators[j]}
			if c.Status == scoring.CellCarried {
				bc.CarriedWindow = carriedWindow
			}
			br.Cells[j] = bc
		}
		if p.keep(br) {
			p.Rows = append(p.Rows, br)
		}
	}
	return "Leaderboard of round " + shortD(d), p, nil
}

func shortD(d digest.Digest) string {
	s := d.Encoded()
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// ArtifactPage shows any manifest in the store: its record (for a feval
// artifact), layers, subject and referrers.
type ArtifactPage struct {
	Digest       digest.Digest       `json:"digest"`
	MediaType    string              `json:"media_type"`
	ArtifactType string              `json:"artifact_type,omitempty"`
	Kind         string              `json:"kind,omitempty"`
	Size         int64               `json:"size"`
	Tags         []string            `json:"tags"`
	Subject      *ocispec.Descriptor `json:"subject,omitempty"`
	Annotations  map[string]string   `json:"annotations,omitempty"`
	// Summary is the record's short account (see [Summarize]).
	Summary []Field `json:"summary,omitempty"`
	// Record is the feval record (layer 0), as stored.
	Record json.RawMessage `json:"record,omitempty"`
	// RecordText is Record indented for reading.
	RecordText string               `json:"-"`
	Layers     []ocispec.Descriptor `json:"layers"`
	Referrers  []ocispec.Descriptor `json:"referrers"`
	// Signatures are the artifact's signature referrers as checked against
	// the viewer's trusted keys.
	Signatures []bundle.SignatureCheck `json:"signatures"`
	// Manifest is the raw manifest, indented, for artifacts that are not
	// feval's.
	ManifestText string `json:"-"`
}

func (s *Server) artifactPage(ctx context.Context, l *cas.Layout, r *http.Request) (string, any, error) {
	d, err := pathDigest(r, "digest")
	if err != nil {
		return "", nil, err
	}
	desc, err := s.resolve(ctx, l, d)
	if err != nil {
		return "", nil, err
	}
	if desc.MediaType == "" {
		desc.MediaType = ocispec.MediaTypeImageManifest
	}
	mb, err := cas.ReadAll(ctx, l, desc, cas.MaxManifestSize)
	if err != nil {
		return "", nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return "", nil, fmt.Errorf("manifest %s: %w", d, bundle.ErrNotArtifact)
	}
	p := ArtifactPage{Digest: d, MediaType: desc.MediaType, ArtifactType: m.ArtifactType, Kind: bundle.KindOf(m.ArtifactType),
		Size: desc.Size, Tags: tagsOf(l, d), Subject: m.Subject, Annotations: m.Annotations, Layers: m.Layers,
		ManifestText: indent(mb)}
	if p.Layers == nil {
		p.Layers = []ocispec.Descriptor{}
	}
	if p.Kind != "" {
		art, err := bundle.Load(ctx, l, desc)
		if err != nil {
			return "", nil, err
		}
		p.Record, p.RecordText, p.Summary = art.Record, indent(art.Record), Summarize(art.Kind, art.Record)
		if p.Signatures, err = bundle.CheckSignatures(ctx, l, desc, s.trustedKeys()); err != nil {
			return "", nil, err
		}
	}
	if p.Signatures == nil {
		p.Signatures = []bundle.SignatureCheck{}
	}
	if p.Referrers, err = l.Referrers(ctx, desc, ""); err != nil {
		return "", nil, err
	}
	if p.Referrers == nil {
		p.Referrers = []ocispec.Descriptor{}
	}
	title := "Artifact " + shortD(d)
	if p.Kind != "" {
		title = "Artifact " + shortD(d) + " (" + p.Kind + ")"
	}
	return title, p, nil
}

func indent(b []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return string(b)
	}
	return buf.String()
}

func (s *Server) trustedKeys() []*bundle.PublicKey {
	out := make([]*bundle.PublicKey, 0, len(s.opts.Trusted))
	for _, k := range s.opts.Trusted {
		out = append(out, k.Key)
	}
	return out
}

// FrontierPage is the optimizer frontier folded from the configured runs,
// and the emission split at one time.
type FrontierPage struct {
	// Configured is false when the viewer was started without runs.
	Configured bool `json:"configured"`
	// Round is the round the runs come from ("" for a runs file); LeftOut
	// counts its verdicts that did not count, by reason, and Reconciled
	// lists the runs its verdicts report differently.
	Round      digest.Digest            `json:"round,omitempty"`
	LeftOut    map[string]int           `json:"left_out,omitempty"`
	Reconciled []consensus.Reconciled   `json:"reconciled,omitempty"`
	History    *scoring.FrontierHistory `json:"history,omitempty"`
	Emission   *scoring.Emission        `json:"emission,omitempty"`
	BarChart   *BarOverTime             `json:"-"`
	SplitChart *SplitChart              `json:"-"`
}

func (s *Server) frontierPage(ctx context.Context, l *cas.Layout, r *http.Request) (string, any, error) {
	f := s.opts.Frontier
	if f == nil {
		return "Optimizer frontier", FrontierPage{}, nil
	}
	p := FrontierPage{Configured: true}
	baseline, runs := f.BaselineMicroNats, f.Runs
	if f.Round != "" {
		if s.opts.Source != nil {
			desc, err := s.opts.Source.Resolve(ctx, f.Round.String())
			if err != nil {
				return "", nil, fmt.Errorf("round %s: %w", f.Round, err)
			}
			if err := consensus.Gather(ctx, s.opts.Source, l, desc); err != nil {
				return "", nil, err
			}
		}
		res, err := consensus.RunsFromVerdicts(ctx, l, consensus.RunsRequest{Round: f.Round, Launch: f.Launch, Trusted: s.trustedKeys()})
		if err != nil {
			if errors.Is(err, consensus.ErrInput) {
				err = fmt.Errorf("%w: %v", ErrBadQuery, err)
			}
			return "", nil, err
		}
		baseline, runs = res.BaselineMicroNats, res.Runs
		p.Round, p.LeftOut, p.Reconciled = f.Round, res.LeftOut, res.Reconciled
	}
	h, err := scoring.FoldFrontier(baseline, runs, f.Rules.Frontier)
	if err != nil {
		return "", nil, err
	}
	var at int64
	for _, run := range runs {
		at = max(at, run.AtSec)
	}
	if v := r.URL.Query().Get("at"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return "", nil, fmt.Errorf("at=%q: %w (want whole seconds since launch)", v, ErrBadQuery)
		}
		at = n
	}
	e, err := scoring.SplitEmission(h.Events, at, f.Rules.Emission)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", ErrBadQuery, err)
	}
	p.History, p.Emission = &h, &e
	p.BarChart = barOverTime(h, at)
	p.SplitChart = splitChart(e)
	return "Optimizer frontier", p, nil
}
