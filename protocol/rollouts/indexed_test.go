package rollouts_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/fstest"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

type indexedEnv struct {
	ctx   context.Context
	l     *cas.Layout
	s     *bundle.Signer
	g     *fx.Generated
	dir   string
	task  digest.Digest
	entry protocol.Entry
}

func newIndexedEnv(t *testing.T) *indexedEnv {
	t.Helper()
	e := &indexedEnv{ctx: context.Background(), dir: t.TempDir(),
		g:     fx.Generate([]byte(fx.ReferenceSeed), 60, 60),
		entry: protocol.Entry{Status: protocol.StatusAccepted, Commitment: "sha256:" + digest.FromString("c").Encoded()}}
	if err := fx.WriteTask(filepath.Join(e.dir, "task"), e.g.Spec, e.g.Items); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.l, err = cas.Init(filepath.Join(e.dir, "store")); err != nil {
		t.Fatal(err)
	}
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	e.s, _ = bundle.NewSigner(k)
	task, err := protocol.CreateTask(e.ctx, e.l, e.s, "rollouts", filepath.Join(e.dir, "task"), "")
	if err != nil {
		t.Fatal(err)
	}
	e.task = task.Digest
	return e
}

// pack stores the submission in dir/name, after edit changes its files.
func (e *indexedEnv) pack(t *testing.T, name string, write func(dir string) error, edit func(dir string)) rollouts.Refs {
	t.Helper()
	dir := filepath.Join(e.dir, name)
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(dir)
	}
	sub, err := bundle.PackPath(e.ctx, e.l, e.s, dir, bundle.PackOptions{Kind: protocol.KindSubmission})
	if err != nil {
		t.Fatal(err)
	}
	return rollouts.Refs{Task: e.task, Submission: sub.Artifact.OCI(), Round: ocispec.Descriptor{Digest: digest.FromString("r")}}
}

func (e *indexedEnv) decide(t *testing.T, refs rollouts.Refs, full bool) rollouts.Verdict {
	t.Helper()
	v, err := rollouts.Decide(e.ctx, e.l, refs, e.entry, rollouts.Params{Beacon: rollouts.Beacon{Source: "s", Value: "v"}, Full: full})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func writer(kind fx.MinerKind, g *fx.Generated, indexed bool) func(string) error {
	return func(dir string) error {
		if indexed {
			return fx.WriteIndexedSubmission(dir, kind, g, []byte(fx.ReferenceMinerSeed))
		}
		return fx.WriteSubmission(dir, kind, g, []byte(fx.ReferenceMinerSeed))
	}
}

// TestIndexedDecideMatchesRows: reading a submission through its claims file
// gives the verdict that decoding every row gives, for an honest and an
// inflated miner, in an audit and in a full evaluation.
func TestIndexedDecideMatchesRows(t *testing.T) {
	e := newIndexedEnv(t)
	for _, kind := range []fx.MinerKind{fx.Honest, fx.Inflated10} {
		rows := e.pack(t, string(kind)+"-rows", writer(kind, e.g, false), nil)
		indexed := e.pack(t, string(kind)+"-indexed", writer(kind, e.g, true), nil)
		for _, full := range []bool{false, true} {
			want, got := e.decide(t, rows, full), e.decide(t, indexed, full)
			want.Submission, got.Submission = "", ""
			if want.Audit != nil && got.Audit != nil {
				// The seed names the submission digest.
				want.Audit.Seed, got.Audit.Seed = "", ""
			}
			if full && !reflect.DeepEqual(want, got) {
				t.Errorf("%s full: indexed verdict %+v, rows verdict %+v", kind, got, want)
			}
			if got.ClaimedScore != want.ClaimedScore || got.Rows != want.Rows || got.Rows != 120 {
				t.Errorf("%s: indexed claims %s over %d rows, rows claim %s over %d", kind, got.ClaimedScore, got.Rows, want.ClaimedScore, want.Rows)
			}
			if wantStatus := map[fx.MinerKind]string{fx.Honest: rollouts.StatusPassed, fx.Inflated10: rollouts.StatusRejected}[kind]; full && got.Status != wantStatus {
				t.Errorf("%s full: status %s, want %s", kind, got.Status, wantStatus)
			}
		}
	}
}

// TestIndexedDecideChecksRowsAgainstClaims: the claims file is the miner's
// word about its rows; an audited row that says something else is a wrong
// claim (outcome malformed, verdict rejected), and a sampled row that is not
// valid JSON likewise, though the gate never decoded it. (Every row is
// edited: the sample depends on the submission's digest.)
func TestIndexedDecideChecksRowsAgainstClaims(t *testing.T) {
	e := newIndexedEnv(t)
	for name, edit := range map[string]func([]byte) []byte{
		"rows claim other rewards than the claims file": func(row []byte) []byte {
			if bytes.Contains(row, []byte(`"reward_claimed":"1"`)) {
				return replaceClaim(row, `"reward_claimed":"0"`)
			}
			return replaceClaim(row, `"reward_claimed":"1"`)
		},
		"rows are not JSON": func(row []byte) []byte { return append([]byte("{"), row...) },
	} {
		t.Run(name, func(t *testing.T) {
			refs := e.pack(t, "tampered-"+name, writer(fx.Honest, e.g, true), func(dir string) {
				editRows(t, filepath.Join(dir, fx.RowsFile), edit)
			})
			got := e.decide(t, refs, false)
			if got.Status != rollouts.StatusRejected || got.Reason != rollouts.ReasonRewardMismatch {
				t.Fatalf("status %s (%s), want rejected for a reward mismatch", got.Status, got.Reason)
			}
			if len(got.Audit.Rows) == 0 || len(got.Audit.Mismatches) != len(got.Audit.Rows) {
				t.Fatalf("audit %+v: want every row a mismatch", got.Audit)
			}
			for _, r := range got.Audit.Rows {
				if r.Outcome != rollouts.OutcomeMalformed || r.Claimed == "" || r.Recomputed != "" {
					t.Errorf("row %+v: want malformed with the claims file's claim", r)
				}
			}
		})
	}
}

func replaceClaim(row []byte, claim string) []byte {
	i := bytes.Index(row, []byte(`"reward_claimed":"`))
	j := bytes.IndexByte(row[i+len(`"reward_claimed":"`):], '"')
	end := i + len(`"reward_claimed":"`) + j + 1
	return append(append(append([]byte(nil), row[:i]...), claim...), row[end:]...)
}

// editRows rewrites every line of a rows file.
func editRows(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	for i, l := range lines {
		lines[i] = append(edit(bytes.TrimSuffix(l, []byte("\n"))), '\n')
	}
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadTaskShared: the same task bytes are parsed once; other bytes are
// parsed on their own.
func TestLoadTaskShared(t *testing.T) {
	g := fx.Generate([]byte(fx.ReferenceSeed), 3, 3)
	tj, tl, err := fx.EncodeTask(g.Spec, g.Items)
	if err != nil {
		t.Fatal(err)
	}
	fsys := func(tl []byte) fstest.MapFS {
		return fstest.MapFS{rollouts.TaskFile: {Data: tj}, rollouts.TasksFile: {Data: tl}}
	}
	a, err := rollouts.LoadTask(fsys(tl))
	if err != nil {
		t.Fatal(err)
	}
	b, err := rollouts.LoadTask(fsys(append([]byte(nil), tl...)))
	if err != nil || a != b {
		t.Fatalf("same bytes parsed twice (%p, %p) or %v", a, b, err)
	}
	other := bytes.Replace(tl, []byte(g.Items[0].TaskID), []byte("zz-"+g.Items[0].TaskID[3:]), 1)
	c, err := rollouts.LoadTask(fsys(other))
	if err != nil || c == a || c.Items[0].TaskID == a.Items[0].TaskID {
		t.Fatalf("other bytes gave the cached task: %v", err)
	}
}
