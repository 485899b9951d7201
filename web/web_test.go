package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/feval/feval/cas"
	"github.com/feval/feval/consensus"
	"github.com/feval/feval/internal/testenv"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/scoring"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// addRound opens a second round in the demo store, as another process would.
func addRound(t *testing.T, d *demo) ocispec.Descriptor {
	t.Helper()
	ctx := context.Background()
	l, err := cas.OpenLayout(d.root)
	if err != nil {
		t.Fatal(err)
	}
	var r protocol.Round
	if _, err := protocol.LoadAs(ctx, l, d.round, protocol.KindRound, &r); err != nil {
		t.Fatal(err)
	}
	task := mustResolve(t, l, r.Task)
	cu, _ := protocol.ParseWindow("2026-12-08T00:00:00Z")
	ru, _ := protocol.ParseWindow("2026-12-09T00:00:00Z")
	round, err := protocol.OpenRound(ctx, l, d.owner, task, cu, ru, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return round
}

func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func getJSON(t *testing.T, h http.Handler, path string, v any) {
	t.Helper()
	rec := get(t, h, "GET", path)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("GET %s: content type %q", path, ct)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

var titleRE = regexp.MustCompile(`<title>([^<]+) · feval</title>`)

// TestPages serves every page as HTML, with a title, the safety headers and
// a link to its JSON, and the same path under /api as JSON.
func TestPages(t *testing.T) {
	d := newDemo(t)
	s := d.server(t)
	paths := []string{
		"/rounds",
		"/rounds/" + d.round.Digest.String(),
		"/verdicts/" + d.rejected.String(),
		"/verdicts/" + d.rejected.String() + "/replay",
		"/verdicts/" + d.metered.String(),
		"/frontier",
		"/frontier?at=1209600",
		"/artifacts/" + d.consensus.String(),
		"/artifacts/" + d.round.Digest.String(),
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			rec := get(t, s, "GET", p)
			if rec.Code != http.StatusOK {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			body := rec.Body.String()
			if !titleRE.MatchString(body) {
				t.Errorf("no title in %.200s", body)
			}
			if strings.Contains(body, "<script") {
				t.Error("a page holds a script element")
			}
			h := rec.Header()
			if h.Get("Content-Security-Policy") != ContentSecurityPolicy || h.Get("X-Content-Type-Options") != "nosniff" ||
				h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("headers %v", h)
			}
			if !strings.Contains(body, `href="/api`+strings.ReplaceAll(p, "?", "?")) && !strings.Contains(body, `href="/api`+strings.Split(p, "?")[0]) {
				t.Errorf("no link to the JSON of %s", p)
			}
			var v map[string]any
			getJSON(t, s, "/api"+p, &v)
		})
	}
}

// TestRoundsJSON lists the round with its windows and state.
func TestRoundsJSON(t *testing.T) {
	d := newDemo(t)
	var p RoundsPage
	getJSON(t, d.server(t), "/api/rounds", &p)
	if len(p.Rounds) != 1 {
		t.Fatalf("%d rounds", len(p.Rounds))
	}
	r := p.Rounds[0]
	if r.Digest != d.round.Digest || r.Protocol != "rollouts" || r.State != StateRevealOpen || r.Commitments != 2 ||
		len(r.Consensus) != 1 || r.Consensus[0] != d.consensus || len(r.Tags) != 1 || r.Tags[0] != "round" {
		t.Errorf("%+v", r)
	}
}

// TestLeaderboardJSON: one row per miner, one column per trusted validator
// of the stake table (the fourth is not trusted and left out); rejected
// cells carry their verdict's reason; the honest miner holds the seat and is
// rewarded.
func TestLeaderboardJSON(t *testing.T) {
	d := newDemo(t)
	var p BoardPage
	getJSON(t, d.server(t), "/api/rounds/"+d.round.Digest.String(), &p)
	if p.Consensus != d.consensus || len(p.Validators) != 3 || len(p.Rows) != 2 {
		t.Fatalf("consensus %s, %d validators, %d rows", p.Consensus, len(p.Validators), len(p.Rows))
	}
	if p.Seat == nil || p.Seat.HolderMiner == "" || p.Seat.HolderMiner != p.Rows[0].Miner || !p.Rows[0].SeatHolder {
		t.Errorf("seat %+v, first row %s", p.Seat, p.Rows[0].Miner)
	}
	if p.Rows[0].Reward != scoring.RewardRewarded || p.Rows[1].Reward != scoring.RewardUnrewarded {
		t.Errorf("rewards %s %s", p.Rows[0].Reward, p.Rows[1].Reward)
	}
	if slices.Contains(p.Validators, d.vals[3].Public().Fingerprint) || p.LeftOut[consensus.LeftUntrusted] == 0 {
		t.Errorf("validators %v, left out %v: the fourth validator's verdicts count", p.Validators, p.LeftOut)
	}
	for j, c := range p.Rows[1].Cells {
		if c.Status != scoring.CellRejected || c.Reason != "reward_mismatch" || c.Verdict == "" {
			t.Errorf("inflating miner, validator %d: %+v", j, c)
		}
	}
	for j, c := range p.Rows[0].Cells {
		if c.Status != scoring.CellPassed {
			t.Errorf("honest miner, validator %d: %+v", j, c)
		}
	}
	if p.Rows[1].Audit.Rejected != 3 || p.Rows[0].Audit.Passed != 3 {
		t.Errorf("audit %+v %+v", p.Rows[0].Audit, p.Rows[1].Audit)
	}
	for _, v := range p.Validators {
		if p.Stakes[v] == 0 {
			t.Errorf("validator %s: no stake from the stake table (%v)", v, p.Stakes)
		}
	}

	// Search and filter: the rows that match, the total before filtering;
	// anything else is a bad query.
	s := d.server(t)
	var f BoardPage
	getJSON(t, s, "/api/rounds/"+d.round.Digest.String()+"?status=passed", &f)
	if len(f.Rows) != 1 || f.Rows[0].Miner != p.Rows[0].Miner || f.Total != 2 || f.Status != "passed" {
		t.Errorf("status=passed: %d rows of %d", len(f.Rows), f.Total)
	}
	getJSON(t, s, "/api/rounds/"+d.round.Digest.String()+"?q="+strings.ToUpper(p.Rows[1].Miner[:8]), &f)
	if len(f.Rows) != 1 || f.Rows[0].Miner != p.Rows[1].Miner {
		t.Errorf("q=%s: %d rows", p.Rows[1].Miner[:8], len(f.Rows))
	}
	for _, q := range []string{"status=won", "q=%3Cscript%3E", "q=" + strings.Repeat("a", 65)} {
		if rec := get(t, s, "GET", "/api/rounds/"+d.round.Digest.String()+"?"+q); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, rec.Code)
		}
	}
}

// TestEvidenceJSON: the audit rows come mismatches first, the signature is
// a trusted validator's, and the replay command names the verdict and the
// key file.
func TestEvidenceJSON(t *testing.T) {
	d := newDemo(t)
	s := d.server(t)
	var p EvidencePage
	getJSON(t, s, "/api/verdicts/"+d.rejected.String(), &p)
	if p.Status != "rejected" || p.Reason != "reward_mismatch" || p.Audit == nil || p.Audit.Mismatches == 0 {
		t.Fatalf("%s %s %+v", p.Status, p.Reason, p.Audit)
	}
	for i, r := range p.Audit.Rows {
		if (i < p.Audit.Mismatches) != (r.Outcome == "mismatch") {
			t.Fatalf("row %d is %s: mismatches are not first", i, r.Outcome)
		}
	}
	if p.Audit.ClaimedOnSample == p.Audit.RecomputedOnSample || p.Audit.ClaimedOnSample == "" {
		t.Errorf("claimed %q, recomputed %q on the sample", p.Audit.ClaimedOnSample, p.Audit.RecomputedOnSample)
	}
	if !p.Trusted || len(p.Signatures) != 1 || p.Signatures[0].Signer != d.vals[0].Public().Fingerprint {
		t.Errorf("signatures %+v", p.Signatures)
	}
	if want := "feval replay --pub validator-1.pub " + d.rejected.String(); p.Replay.Command != want { // the key's name, not the server's path
		t.Errorf("replay command %q, want %q", p.Replay.Command, want)
	}

	// The forged verdict is signed, but by no trusted key.
	getJSON(t, s, "/api/verdicts/"+d.forged.String(), &p)
	if p.Trusted || len(p.Signatures) != 1 || p.Signatures[0].Trusted || p.Signatures[0].Signer != d.rogue.Public().Fingerprint {
		t.Errorf("forged: trusted %v, %+v", p.Trusted, p.Signatures)
	}
	if !strings.Contains(p.Replay.Command, "--pub VALIDATOR.pub") {
		t.Errorf("forged: replay command %q names a key file", p.Replay.Command)
	}
	if want := "feval replay --pub VALIDATOR.pub " + d.forged.String(); p.Replay.Command != want {
		t.Errorf("replay command %q, want %q: nothing of the server's own paths", p.Replay.Command, want)
	}

	// The metered verdict: receipts become costs per scenario and model, the
	// checkpoint's held-out loss is listed.
	getJSON(t, s, "/api/verdicts/"+d.metered.String(), &p)
	if p.Costs == nil || len(p.Costs.Scenarios) != 2 || len(p.Costs.Models) != 3 || len(p.Receipts) != 1 || len(p.Checkpoints) != 1 {
		t.Fatalf("costs %+v, receipts %v, checkpoints %v", p.Costs, p.Receipts, p.Checkpoints)
	}
	if p.Costs.TotalMicroUSD[0] != 150000 || p.Costs.TotalMicroUSD[1] != 50000 {
		t.Errorf("totals %v", p.Costs.TotalMicroUSD)
	}
	var found bool
	for _, l := range p.Losses {
		found = found || strings.HasSuffix(l.Path, "held_out_loss_micro_nats") && l.MicroNats == 3141592
	}
	if !found || len(p.Losses) != 2 {
		t.Errorf("losses %+v", p.Losses)
	}
}

// TestHostileStringsEscaped: what a miner or validator wrote never reaches
// a page as markup.
func TestHostileStringsEscaped(t *testing.T) {
	d := newDemo(t)
	s := d.server(t)
	// The round's page shows only strict verdicts' reasons (CONSENSUS.md
	// 8.2), so the hostile strings are on the evidence pages.
	for _, p := range []string{
		"/rounds/" + d.round.Digest.String(),
		"/verdicts/" + d.hostile.String(),
		"/verdicts/" + d.metered.String(),
		"/artifacts/" + d.hostile.String(),
		"/frontier",
	} {
		body := get(t, s, "GET", p).Body.String()
		for _, bad := range []string{"<script", "<img", `"><script`, `'&`} {
			if strings.Contains(body, bad) {
				t.Errorf("%s holds %q unescaped", p, bad)
			}
		}
		if !strings.HasPrefix(p, "/rounds/") && p != "/frontier" && !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s does not show the hostile string escaped", p)
		}
	}
	// JSON carries the string as data.
	var e EvidencePage
	getJSON(t, s, "/api/verdicts/"+d.hostile.String(), &e)
	if e.Audit.Rows[0].TaskID != hostile {
		t.Errorf("first row %q", e.Audit.Rows[0].TaskID)
	}
}

// TestErrors: bad and unknown digests, the wrong kind, other methods and
// unknown paths get their status, as HTML or JSON.
func TestErrors(t *testing.T) {
	d := newDemo(t)
	s := d.server(t)
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/verdicts/sha256:1234", http.StatusBadRequest},
		{"GET", "/api/verdicts/md5:abc", http.StatusBadRequest},
		{"GET", "/verdicts/sha256:" + strings.Repeat("0", 64), http.StatusNotFound},
		{"GET", "/verdicts/" + d.round.Digest.String(), http.StatusNotFound},
		{"GET", "/rounds/" + d.rejected.String(), http.StatusNotFound},
		{"GET", "/rounds/" + d.round.Digest.String() + "?consensus=nope", http.StatusBadRequest},
		{"GET", "/frontier?at=-1", http.StatusBadRequest},
		{"GET", "/rounds/" + d.round.Digest.String() + "?consensus=" + d.rejected.String(), http.StatusUnprocessableEntity},
		{"GET", "/nowhere", http.StatusNotFound},
		{"POST", "/rounds", http.StatusMethodNotAllowed},
		{"DELETE", "/api/rounds", http.StatusMethodNotAllowed},
	} {
		rec := get(t, s, c.method, c.path)
		if rec.Code != c.code {
			t.Errorf("%s %s: %d, want %d: %s", c.method, c.path, rec.Code, c.code, rec.Body)
		}
		if rec.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("%s %s: no CSP", c.method, c.path)
		}
		if c.method == "GET" && strings.HasPrefix(c.path, "/api/") {
			var e errorData
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Status != c.code || e.Error == "" {
				t.Errorf("%s: error body %s", c.path, rec.Body)
			}
		}
		if c.method == "GET" && !strings.HasPrefix(c.path, "/api/") && !titleRE.MatchString(rec.Body.String()) {
			t.Errorf("%s: error page without a title", c.path)
		}
	}
}

// TestLoopbackOnly refuses requests naming another host (DNS rebinding).
func TestLoopbackOnly(t *testing.T) {
	h := LoopbackOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	for host, ok := range map[string]bool{"127.0.0.1:8080": true, "localhost:1": true, "[::1]:80": true, "LOCALHOST": true,
		"evil.example:8080": false, "10.0.0.1:80": false, "127.0.0.1.evil.example": false} {
		req := httptest.NewRequest("GET", "/rounds", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if (rec.Code == http.StatusOK) != ok {
			t.Errorf("host %s: %d", host, rec.Code)
		}
	}
}

// TestStoreReopened: what another process adds to the store appears
// without a restart.
func TestStoreReopened(t *testing.T) {
	d := newDemo(t)
	s := d.server(t)
	var p RoundsPage
	getJSON(t, s, "/api/rounds", &p)
	if len(p.Rounds) != 1 {
		t.Fatalf("%d rounds", len(p.Rounds))
	}
	addRound(t, d)
	getJSON(t, s, "/api/rounds", &p)
	if len(p.Rounds) != 2 {
		t.Fatalf("after adding a round: %d rounds", len(p.Rounds))
	}
}

// TestSummarize: a verdict is summarized by its decisive fields, anything
// else by its members; control characters never reach a terminal.
func TestSummarize(t *testing.T) {
	verdict := `{"audit":{"beacon":{"source":"drand:x","value":"v"},"full":false,"mismatches":["a","b","c","d","e","f"],` +
		`"rows":[{"task_id":"a"}],"sample_size":320,"undetermined":[]},"claimed_score":"7/20",` +
		`"inputs":{"round":"sha256:00","task":"sha256:11"},"reason":"reward_mismatch\u001b[31m","status":"rejected","sequence":3}`
	got := map[string]string{}
	for _, f := range Summarize("verdict", []byte(verdict)) {
		got[f.Name] = f.Value
	}
	want := map[string]string{"status": "rejected", "reason": "reward_mismatch�[31m", "claimed_score": "7/20", "sequence": "3",
		"audit": "320 rows sampled with beacon drand:x v", "mismatches": "6 (a, b, c, d, e, …)", "undetermined": "0",
		"inputs.round": "sha256:00", "inputs.task": "sha256:11",
		"warning": "unverified beacon: the sample or seeds come from a beacon value nothing shows the validator did not choose"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields %v", got)
	}
	var lines []string
	for _, f := range Summarize("round", []byte(`{"commit_until":{"kind":"time","time":"T"},"list":[1,2],"protocol":"rollouts","empty":{}}`)) {
		lines = append(lines, f.Name+"="+f.Value)
	}
	if g := strings.Join(lines, " "); g != "commit_until.kind=time commit_until.time=T empty={} list=2 items protocol=rollouts" {
		t.Errorf("round summary %s", g)
	}
	if f := Summarize("x", []byte("not json")); len(f) != 1 || !strings.HasPrefix(f[0].Value, "not JSON") {
		t.Errorf("%v", f)
	}
}

// TestFromRegistry: a viewer over an empty local store and a registry
// gathers what a page asks for, and its replay command names the registry.
func TestFromRegistry(t *testing.T) {
	d := newDemo(t)
	ctx := context.Background()
	reg := testenv.StartRegistry(t)
	repo := reg.Addr + "/competition/rollouts"
	ref, err := cas.ParseRemote(repo)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := cas.OpenRemote(ref, cas.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := cas.OpenLayout(d.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range l.Manifests() {
		if _, err := cas.Copy(ctx, l, remote, m, cas.CopyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(t.TempDir(), "cache")
	if _, err := cas.Init(root); err != nil {
		t.Fatal(err)
	}
	s, err := New(root, Options{Source: remote, SourceName: repo, Trusted: []TrustedKey{{Key: d.vals[0].Public()}, {Key: d.owner.Public()}}})
	if err != nil {
		t.Fatal(err)
	}
	var rounds RoundsPage
	getJSON(t, s, "/api/rounds", &rounds)
	if len(rounds.Rounds) != 0 {
		t.Fatalf("an empty store lists %d rounds", len(rounds.Rounds))
	}
	var b BoardPage
	getJSON(t, s, "/api/rounds/"+d.round.Digest.String(), &b)
	if b.Consensus != d.consensus || len(b.Rows) != 2 || len(b.Validators) != 1 {
		t.Fatalf("gathered leaderboard: consensus %s, %d rows, %d validators", b.Consensus, len(b.Rows), len(b.Validators))
	}
	getJSON(t, s, "/api/rounds", &rounds)
	if len(rounds.Rounds) != 1 {
		t.Fatalf("after gathering, %d rounds", len(rounds.Rounds))
	}
	var e EvidencePage
	getJSON(t, s, "/api/verdicts/"+d.metered.String(), &e)
	if e.Costs == nil || len(e.Receipts) != 1 || e.Receipts[0].Error != "" || !e.Trusted {
		t.Fatalf("gathered metered verdict: costs %v, receipts %+v, trusted %v", e.Costs, e.Receipts, e.Trusted)
	}
	if want := "feval replay --from " + repo + " --pub VALIDATOR.pub " + d.metered.String(); e.Replay.Command != want {
		t.Errorf("replay command %q, want %q", e.Replay.Command, want)
	}
	if rec := get(t, s, "GET", "/api/artifacts/sha256:"+strings.Repeat("a", 64)); rec.Code != http.StatusNotFound {
		t.Errorf("a digest neither store holds: %d", rec.Code)
	}
}

// TestCarried: a new round without verdicts shows the earlier round's
// results as carried, naming that round and when its reveals closed.
func TestCarried(t *testing.T) {
	d := newDemo(t)
	next := addRound(t, d)
	s := d.server(t)
	rec := get(t, s, "GET", "/api/rounds/"+next.Digest.String())
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"validators": []`) ||
		!strings.Contains(rec.Body.String(), `"left_out": {}`) || !strings.Contains(rec.Body.String(), `"rows": []`) {
		t.Errorf("a round without verdicts: %d %s", rec.Code, rec.Body)
	}
	path := "/rounds/" + next.Digest.String() + "?carry_from=" + d.round.Digest.String()
	var b BoardPage
	getJSON(t, s, "/api"+path, &b)
	if b.CarryFrom != d.round.Digest || len(b.Rows) != 2 || b.Consensus != "" {
		t.Fatalf("carry from %s, %d rows, consensus %s", b.CarryFrom, len(b.Rows), b.Consensus)
	}
	carried := 0
	for _, r := range b.Rows {
		if r.Reward != scoring.RewardPending {
			t.Errorf("reward %s without a consensus record", r.Reward)
		}
		for _, c := range r.Cells {
			if c.Status == scoring.CellCarried {
				carried++
				if c.CarriedFrom != d.round.Digest.String() || c.CarriedWindow != "2026-12-02T00:00:00Z" || c.Verdict == "" {
					t.Errorf("carried cell %+v", c)
				}
			}
		}
	}
	if carried != 6 { // the three trusted validators on two miners; the hostile one and the rogue are not trusted
		t.Errorf("%d carried cells, want 6", carried)
	}
	body := get(t, s, "GET", path).Body.String()
	if !strings.Contains(body, `<span class="status">Carried</span>`) || !strings.Contains(body, "reveals closed 2026-12-02T00:00:00Z") {
		t.Errorf("the page does not show carried cells with their round's window")
	}
}
