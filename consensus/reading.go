package consensus

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/docs/schemas"
	"github.com/feval/feval/gate"
	"github.com/feval/feval/internal/jsonschema"
	"github.com/feval/feval/internal/strictjson"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/feval/feval/scoring"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// reading is what consensus takes from one verdict artifact (CONSENSUS.md
// §8.2, "Reading a verdict").
type reading struct {
	// head holds the shared members when they read (the record matches
	// verdict-head.schema.json); nil for a record that cannot be read at all.
	head *protocol.VerdictHead
	// malformed says why the verdict is not a strict verdict record of the
	// round's protocol; "" when it is.
	malformed string
	// score is a strict verdict's score: a rollouts claimed_score, a
	// scenarios score ("" when the record has none).
	score string
	// unverified reports a rollouts audit drawn from a plain beacon.
	unverified bool
	// unscored: a strict verdict of a protocol whose verdicts carry no score
	// (optimizer).
	unscored bool
	// summary is what a strict verdict decided, in a few words, for a
	// leaderboard cell.
	summary string
}

// vote is what the reading gives each signer's vote, before the vote is
// keyed to its entry: the sequence, status and score, or the exclusion as
// malformed; and what the verdict says it is about. A record whose head
// reads reports what it names, whatever else is wrong with it; one that
// cannot be read at all reports nothing (CONSENSUS.md 8.2).
func (r reading) vote() (scoring.Vote, verdictMeta) {
	var v scoring.Vote
	var meta verdictMeta
	if h := r.head; h != nil {
		meta = verdictMeta{reveal: h.Inputs.Reveal, submission: h.Submission, reason: h.Reason, summary: r.summary}
		v.Sequence = h.Sequence
	}
	if r.malformed != "" {
		v.Exclude = ReasonMalformed
		return v, meta
	}
	meta.unverifiedBeacon = r.unverified
	v.Status = scoring.Status(r.head.Status)
	if v.Status == scoring.StatusPassed {
		s, err := scoring.ParseRatio(r.score)
		if err != nil {
			v.Exclude = ReasonMalformed // a passed verdict without a score: an optimizer verdict
			meta.unscored = r.unscored
		}
		v.Score = s
	}
	return v, meta
}

// headMembers are the members of verdict-head.schema.json.
var headMembers = []string{"protocol", "status", "reason", "submission", "inputs", "reveal_check", "sequence"}

var loadSchemas = sync.OnceValues(func() (*jsonschema.Set, error) { return jsonschema.Load(schemas.FS) })

// readVerdict reads a verdict for a round of protocol proto, in the order of
// CONSENSUS.md §8.2: the artifact and its canonical record, the shared head,
// the protocol, then every rule of the protocol's schema and of the text
// beyond it. Only an error that means the store lacks or has damaged content
// is returned as an error; every fault of the record is in the reading.
func readVerdict(ctx context.Context, st cas.Store, desc ocispec.Descriptor, proto string) (reading, error) {
	set, err := loadSchemas()
	if err != nil {
		return reading{}, fmt.Errorf("loading the verdict schemas: %w", err)
	}
	art, err := bundle.Load(ctx, st, desc)
	if err != nil {
		if hardError(err) {
			return reading{}, err
		}
		return reading{malformed: err.Error()}, nil
	}
	if art.Kind != protocol.KindVerdict {
		return reading{malformed: fmt.Sprintf("a %s artifact, not a verdict", art.Kind)}, nil
	}
	val, err := jsonschema.Decode(art.Record)
	if err != nil {
		return reading{malformed: err.Error()}, nil
	}
	if err := set.Validate("verdict-head.schema.json", val); err != nil {
		return reading{malformed: "no verdict head: " + err.Error()}, nil
	}
	head, err := decodeHead(val.(map[string]any))
	if err != nil {
		return reading{malformed: "no verdict head: " + err.Error()}, nil
	}
	r := reading{head: &head}
	if head.Protocol != proto {
		r.malformed = fmt.Sprintf("a verdict of protocol %q in a round of protocol %q", head.Protocol, proto)
		return r, nil
	}
	if err := set.Validate("verdict-"+proto+".schema.json", val); err != nil {
		r.malformed = err.Error()
		return r, nil
	}
	r.score, r.unverified, err = decodeProtocol(art, proto)
	if err != nil {
		r.malformed = err.Error()
	} else {
		r.summary = summaryOf(art, proto)
	}
	r.unscored = proto == "optimizer"
	return r, nil
}

// decodeHead decodes the shared members of a record that matched the head
// schema, by their exact names.
func decodeHead(obj map[string]any) (protocol.VerdictHead, error) {
	sub := make(map[string]any, len(headMembers))
	for _, k := range headMembers {
		if v, ok := obj[k]; ok {
			sub[k] = v
		}
	}
	b, err := json.Marshal(sub) // json.Number keeps its digits
	if err != nil {
		return protocol.VerdictHead{}, err
	}
	var h protocol.VerdictHead
	if err := strictjson.Decode(b, &h); err != nil {
		return protocol.VerdictHead{}, err
	}
	return h, nil
}

// summaryOf is what a strict verdict of a protocol decided, in a few words:
// a scenarios verdict's score of its maximum and cost, an optimizer
// verdict's outcome and held-out losses ("" for rollouts, whose cell shows
// its score).
func summaryOf(art *bundle.Loaded, proto string) string {
	switch proto {
	case "scenarios":
		var v scenarios.Verdict
		if art.Decode(&v) != nil {
			return ""
		}
		score := v.Score
		if score == "" {
			score = "-"
		}
		cost := v.CostMicroUSD
		return fmt.Sprintf("%s of %d, $%d.%06d", score, v.MaxScore, cost/1_000_000, cost%1_000_000)
	case "optimizer":
		var v optimizer.Verdict
		if art.Decode(&v) != nil {
			return ""
		}
		var losses []string
		for _, r := range v.Runs {
			if r.HeldOutLossMicroNats != nil {
				losses = append(losses, fmt.Sprint(*r.HeldOutLossMicroNats))
			}
		}
		out := v.Outcome
		if len(losses) > 0 {
			out = strings.TrimPrefix(out+", held-out losses "+strings.Join(losses, ", ")+" micro-nats", ", ")
		}
		return out
	}
	return ""
}

// decodeProtocol decodes a record that matched its protocol's schema into the
// protocol's verdict (canonical, and re-encoding to its own bytes) and applies
// the rules the schema cannot state: rewards in [0, 1] and reduced; a
// scenarios score reduced, at most max_score, and no scenario passing more
// tests than it has.
func decodeProtocol(art *bundle.Loaded, proto string) (score string, unverified bool, err error) {
	switch proto {
	case "rollouts":
		var v rollouts.Verdict
		if err := art.Decode(&v); err != nil {
			return "", false, err
		}
		if v.ClaimedScore != "" {
			if _, err := gate.ParseReward(v.ClaimedScore); err != nil {
				return "", false, fmt.Errorf("claimed_score: %w", err)
			}
		}
		if v.Audit != nil {
			for i, row := range v.Audit.Rows {
				if _, err := gate.ParseReward(row.Claimed); err != nil {
					return "", false, fmt.Errorf("audit.rows[%d].claimed: %w", i, err)
				}
				if _, err := gate.ParseReward(row.Recomputed); err != nil && row.Recomputed != "" {
					return "", false, fmt.Errorf("audit.rows[%d].recomputed: %w", i, err)
				}
			}
		}
		return v.ClaimedScore, v.Audit != nil && !v.Audit.Beacon.Verified, nil
	case "scenarios":
		var v scenarios.Verdict
		if err := art.Decode(&v); err != nil {
			return "", false, err
		}
		for i, s := range v.Scenarios {
			if s.Passed > s.Total {
				return "", false, fmt.Errorf("scenarios[%d]: passed %d exceeds total %d", i, s.Passed, s.Total)
			}
		}
		if v.Score != "" {
			s, err := scoring.ParseRatio(v.Score)
			if err != nil {
				return "", false, fmt.Errorf("score: %w", err)
			}
			if s.Sign() < 0 || s.Cmp(scoring.NewRatio(int64(v.MaxScore), 1)) > 0 {
				return "", false, fmt.Errorf("score %s is outside [0, max_score %d]", v.Score, v.MaxScore)
			}
		}
		return v.Score, false, nil
	case "optimizer":
		var v optimizer.Verdict
		return "", false, art.Decode(&v)
	}
	return "", false, fmt.Errorf("protocol %q has no verdict reader", proto)
}
