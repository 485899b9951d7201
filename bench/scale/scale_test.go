// Package scale runs a whole round of the rollouts competition at a chosen
// size, through the library paths 'feval commit', 'reveal', 'evaluate' and
// 'consensus' use: miners commit and reveal generated rollout submissions
// (format 2, with a claims file), one validator checks the round and audits
// every accepted entry, the other validators sign their verdicts on the same
// entries, and the consensus record is derived. It reports the wall time and
// peak memory of each phase, the store's size and the consensus record's
// size.
//
// 'go test ./bench/scale/' runs a small round as a correctness test. The
// measured sizes run from 'make bench-scale' (scripts/bench-scale.sh), with
// -scale.miners, -scale.rows and -scale.validators; docs/PERFORMANCE.md
// records the figures.
package scale

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"flag"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/consensus"
	"github.com/feval/feval/evaluate"
	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/internal/roundtest"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/scoring"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

var (
	flagMiners     = flag.Int("scale.miners", 8, "miners in the round")
	flagRows       = flag.Int("scale.rows", 200, "rows per submission (half math, half instruction following)")
	flagValidators = flag.Int("scale.validators", 4, "validators signing a verdict on every entry")
	flagReport     = flag.String("scale.report", "", "append the figures as one Markdown table row to this file")
)

// inflatedEvery: every inflatedEvery-th miner inflates 10 % of its claims.
const inflatedEvery = 8

// bases: distinct honest submissions generated; every miner's rows are one
// of them in a miner-specific order, under its own model revision, so no two
// submissions share bytes.
const bases = 4

// phase is one measured step of the round.
type phase struct {
	name string
	wall time.Duration
	peak int64 // peak resident set size during the phase, bytes
}

func TestScaleRound(t *testing.T) {
	if *flagMiners < 2 || *flagRows < 20 || *flagValidators < 1 {
		t.Fatal("-scale.miners >= 2, -scale.rows >= 20 and -scale.validators >= 1")
	}
	t.Setenv("HOME", t.TempDir())
	ctx := context.Background()
	dir := t.TempDir()
	nMiners, nRows, nVals := *flagMiners, *flagRows, *flagValidators
	st, err := cas.Init(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	owner := newSigner(t)
	var phases []phase
	measure := func(name string, fn func()) {
		resetPeak()
		start := time.Now()
		fn()
		phases = append(phases, phase{name, time.Since(start), peakRSS()})
		t.Logf("%s: %v, peak RSS %d MiB", name, time.Since(start).Round(time.Millisecond), peakRSS()>>20)
	}

	// The task, the generated submissions and the round (not measured:
	// fixture generation).
	g := fx.Generate([]byte(fx.ReferenceSeed), nRows/2, nRows-nRows/2)
	taskDir := filepath.Join(dir, "task")
	if err := fx.WriteTask(taskDir, g.Spec, g.Items); err != nil {
		t.Fatal(err)
	}
	task, err := protocol.CreateTask(ctx, st, owner, "rollouts", taskDir, "")
	if err != nil {
		t.Fatal(err)
	}
	cu, _ := protocol.ParseWindow("2026-12-01T00:00:00Z")
	ru, _ := protocol.ParseWindow("2026-12-02T00:00:00Z")
	round, err := protocol.OpenRound(ctx, st, owner, task, cu, ru, "")
	if err != nil {
		t.Fatal(err)
	}
	subDirs, cheats := writeSubmissions(t, dir, g, nMiners)

	// Miners commit (pack, sign) and reveal.
	miners := make([]*bundle.Signer, nMiners)
	inflated := map[string]bool{} // by miner fingerprint
	for i := range miners {
		miners[i] = newSigner(t)
		inflated[miners[i].Public().Fingerprint] = cheats[i]
	}
	seen := map[digest.Digest]protocol.Seen{}
	commitSeen := protocol.Seen{Time: "2026-11-30T18:00:00Z"}
	revealSeen := protocol.Seen{Time: "2026-12-01T06:00:00Z"}
	reveals := make([]digest.Digest, nMiners)
	measure("commit and reveal", func() {
		for i, d := range subDirs {
			c, err := protocol.Commit(ctx, st, miners[i], round, d, "", bytes.NewReader(bytes.Repeat([]byte{byte(i), byte(i >> 8)}, protocol.SaltSize/2)))
			if err != nil {
				t.Fatal(err)
			}
			sec, err := protocol.LoadSecret(st, c.Commitment)
			if err != nil {
				t.Fatal(err)
			}
			rv, err := protocol.RevealCommitment(ctx, st, miners[i], sec, "")
			if err != nil {
				t.Fatal(err)
			}
			seen[c.Artifact.Digest], seen[rv.Artifact.Digest] = commitSeen, revealSeen
			reveals[i] = rv.Artifact.Digest
		}
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	storeAfterSubmissions := dirSize(t, filepath.Join(dir, "store"))

	// One validator checks the round once and audits every entry.
	vals := make([]*bundle.Signer, nVals)
	for i := range vals {
		vals[i] = newSigner(t)
	}
	type evaluated struct {
		verdict rollouts.Verdict
		subject ocispec.Descriptor
	}
	var evs []evaluated
	measure("evaluate (one validator)", func() {
		rep, err := protocol.CheckRound(ctx, st, round, seen, protocol.Observation{Now: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)}, evaluate.Gate)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Entries) != nMiners {
			t.Fatalf("%d entries, want %d", len(rep.Entries), nMiners)
		}
		for i, e := range rep.Entries {
			if e.Status != protocol.StatusAccepted {
				t.Fatalf("entry %d: %s %s %v", i, e.Reason, e.Detail, e.Violations)
			}
			rd, err := st.Resolve(ctx, e.Reveal.String())
			if err != nil {
				t.Fatal(err)
			}
			refs, err := rollouts.ResolveRefs(ctx, st, rd)
			if err != nil {
				t.Fatal(err)
			}
			v, err := rollouts.Decide(ctx, st, refs, e, rollouts.Params{Beacon: rollouts.Beacon{Source: "scale", Value: "beacon"}, Sequence: uint64(i + 1)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := bundle.WriteSigned(ctx, st, vals[0], bundle.Artifact{Kind: protocol.KindVerdict, Record: v, Subject: &refs.Submission}); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, evaluated{v, refs.Submission})
		}
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	passed := 0
	for _, ev := range evs {
		want := rollouts.StatusPassed
		if inflated[ev.verdict.Inputs.Miner] {
			want = rollouts.StatusRejected
		}
		// An audit of 10 % inflated rows is almost surely caught; at a small
		// size the sample may miss them, so only a passed verdict of an
		// honest miner is required.
		if want == rollouts.StatusPassed && ev.verdict.Status != want {
			t.Errorf("miner %s: %s (%s), want passed", ev.verdict.Inputs.Miner[:8], ev.verdict.Status, ev.verdict.Reason)
		}
		if ev.verdict.Status == rollouts.StatusPassed {
			passed++
		}
	}

	// The other validators sign verdicts on the same entries.
	measure("other validators' verdicts", func() {
		for j := 1; j < nVals; j++ {
			for i, ev := range evs {
				v := ev.verdict
				v.Sequence = uint64(i + 1)
				if _, err := bundle.WriteSigned(ctx, st, vals[j], bundle.Artifact{Kind: protocol.KindVerdict, Record: v, Subject: &ev.subject}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
	})

	// Consensus over every verdict.
	table := consensus.StakeTable{Stakes: map[string]uint64{}}
	for _, v := range vals {
		table.Stakes[v.Public().Fingerprint] = 1000
	}
	sd, err := consensus.WriteStakes(ctx, st, owner, table, "")
	if err != nil {
		t.Fatal(err)
	}
	rules := scoring.DefaultRules()
	rules.MaxScore = scoring.NewRatio(1, 1)
	rd, err := consensus.WriteRules(ctx, st, owner, rules, "")
	if err != nil {
		t.Fatal(err)
	}
	var rec consensus.Record
	measure("consensus", func() {
		rec, err = consensus.Compute(ctx, st, consensus.Request{Round: round.Digest, Stakes: sd.Digest, Rules: rd.Digest})
		if err != nil {
			t.Fatal(err)
		}
	})
	recLayer, votesLayer, err := consensus.LayerSizes(rec)
	if err != nil {
		t.Fatal(err)
	}
	if recLayer > bundle.MaxRecordSize {
		t.Errorf("the consensus record layer has %d bytes, over the %d byte limit", recLayer, bundle.MaxRecordSize)
	}
	if len(rec.Results) != nMiners || len(rec.Counted) != nMiners*nVals {
		t.Errorf("consensus: %d results and %d counted votes, want %d and %d", len(rec.Results), len(rec.Counted), nMiners, nMiners*nVals)
	}
	for _, r := range rec.Results {
		if r.Votes != nVals {
			t.Errorf("entry %s: %d votes, want %d", r.Reveal, r.Votes, nVals)
		}
	}
	storeTotal := dirSize(t, filepath.Join(dir, "store"))
	t.Logf("miners %d, rows %d, validators %d: %d passed; store %d MiB after submissions, %d MiB in all; consensus record layer %d bytes, votes payload %d bytes (%d per verdict)",
		nMiners, nRows, nVals, passed, storeAfterSubmissions>>20, storeTotal>>20, recLayer, votesLayer, votesLayer/(nMiners*nVals))
	if *flagReport != "" {
		report(t, *flagReport, nMiners, nRows, nVals, phases, storeAfterSubmissions, storeTotal, recLayer, votesLayer)
	}
}

// writeSubmissions writes nMiners format-2 submissions under dir and returns
// their directories and, by miner, whether it inflates its claims.
func writeSubmissions(t *testing.T, dir string, g *fx.Generated, nMiners int) ([]string, []bool) {
	t.Helper()
	var honest []fx.Submission
	for k := range bases {
		s, err := fx.Miner(fx.Honest, g, []byte(fmt.Sprintf("%s/%d", fx.ReferenceMinerSeed, k)))
		if err != nil {
			t.Fatal(err)
		}
		honest = append(honest, s)
	}
	cheat, err := fx.Miner(fx.Inflated10, g, []byte(fx.ReferenceMinerSeed))
	if err != nil {
		t.Fatal(err)
	}
	dirs, cheats := make([]string, nMiners), make([]bool, nMiners)
	for i := range dirs {
		base := honest[i%bases]
		if i%inflatedEvery == inflatedEvery-1 {
			base, cheats[i] = cheat, true
		}
		rev := sha1.Sum([]byte("scale miner " + strconv.Itoa(i)))
		sub := fx.Submission{ModelRevision: hex.EncodeToString(rev[:]), Rows: append(base.Rows[:0:0], base.Rows...)}
		r := mrand.New(mrand.NewPCG(uint64(i), 0x5ca1e))
		r.Shuffle(len(sub.Rows), func(a, b int) { sub.Rows[a], sub.Rows[b] = sub.Rows[b], sub.Rows[a] })
		sj, rows, claims, err := fx.EncodeIndexedSubmission(sub, g.Spec.MaxRowBytes)
		if err != nil {
			t.Fatal(err)
		}
		dirs[i] = filepath.Join(dir, "miners", strconv.Itoa(i))
		for name, b := range map[string][]byte{"submission.json": sj, fx.RowsFile: rows, fx.ClaimsFile: claims} {
			if err := os.MkdirAll(dirs[i], 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dirs[i], name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dirs, cheats
}

func newSigner(t *testing.T) *bundle.Signer { return roundtest.NewSigner(t) }

// resetPeak resets the process's peak resident set size (VmHWM), so that
// peakRSS reports the peak of what follows.
func resetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is VmHWM of /proc/self/status, in bytes (0 where unavailable).
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// dirSize is the apparent size of the files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func report(t *testing.T, path string, miners, rows, vals int, phases []phase, storeSubs, storeTotal int64, recLayer, votesLayer int) {
	t.Helper()
	var b strings.Builder
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "| %d | %d | %d |", miners, rows, vals)
	for _, p := range phases {
		fmt.Fprintf(&b, " %.1f s / %d MiB |", p.wall.Seconds(), p.peak>>20)
	}
	fmt.Fprintf(&b, " %.1f MiB | %.1f MiB | %d / %d | %s |\n", float64(storeSubs)/(1<<20), float64(storeTotal)/(1<<20), recLayer, votesLayer, strings.Join(strings.Fields(string(load))[:3], " "))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		t.Fatal(err)
	}
}
