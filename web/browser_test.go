package web

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium, which 'make test' installs.
const chromiumPath = "/usr/bin/chromium"

// TestBrowser drives a real, headless chromium through the viewer over the
// demo store: from the rounds to the leaderboard, a click on a Rejected cell
// to its evidence with the mismatching rows first, on to the replay command
// and back, the charts drawn with a size, every page titled, no console
// error, and every page readable with JavaScript disabled. Screenshots are
// saved in the test's artifact directory (kept with
// 'go test -artifacts -outputdir DIR').
func TestBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("chromium is needed for this test: %v (install Debian's chromium: make debian-deps)", err)
	}
	d := newDemo(t)
	srv := httptest.NewServer(LoopbackOnly(d.server(t)))
	defer srv.Close()
	shots := t.ArtifactDir()

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		// A page restored from the back-forward cache fires no load event.
		chromedp.Flag("disable-features", "BackForwardCache"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	// The console: calls of the console API, uncaught exceptions and the
	// browser log (where CSP violations and failed loads appear).
	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s (%s)", m, m.URL))
				mu.Unlock()
			}
		}
	}()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(js string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return n
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	location := func() string {
		t.Helper()
		u, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	var visited []string
	// page checks the title of the page shown, remembers it and saves a
	// screenshot.
	page := func(name, want string) {
		t.Helper()
		title, err := chromedp.Run(ctx, chromedp.Title())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(title, " · feval") || !strings.Contains(title, want) {
			t.Fatalf("%s: title %q, want one naming %q", name, title, want)
		}
		visited = append(visited, location())
		shot(t, ctx, filepath.Join(shots, name+".png"))
	}

	// The rounds, then the round's leaderboard.
	board := srv.URL + "/rounds/" + d.round.Digest.String()
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	do("rounds", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("table.rounds")))
	page("rounds", "Rounds")
	do("to the leaderboard", chromedp.Click(chromedp.CSS("a.round")), chromedp.WaitVisible(chromedp.CSS("table.board")))
	page("leaderboard", "Leaderboard")
	if u := location(); u != board {
		t.Fatalf("the round link led to %s, want %s", u, board)
	}
	if n := eval(`document.querySelectorAll("td.cell.rejected").length`); n != 3 {
		t.Fatalf("%d Rejected cells, want 3 (one per trusted validator)", n)
	}
	if n := eval(`Array.from(document.querySelectorAll("td.cell.rejected")).filter(c => /^Rejected \(reward_mismatch\) 0$/.test(c.textContent.trim())).length`); n != 3 {
		t.Fatalf("%d cells read \"Rejected (reward_mismatch) 0\", want 3", n)
	}

	// Search by miner and filter by status, with the page's own form.
	honest := eval(`document.querySelectorAll("table.board tbody tr").length`)
	if honest != 2 {
		t.Fatalf("%d rows, want 2", honest)
	}
	do("filter: rejected", chromedp.SetValue(chromedp.CSS(`form.board-filter select[name="status"]`), "rejected"),
		chromedp.Submit(chromedp.CSS("form.board-filter")), chromedp.WaitVisible(chromedp.CSS(`a[href="/rounds/`+d.round.Digest.String()+`"]`)))
	page("filtered", "Leaderboard")
	if n := eval(`document.querySelectorAll("table.board tbody tr").length`); n != 1 || eval(`document.querySelectorAll("table.board td.cell.passed").length`) != 0 {
		t.Fatalf("filtered by rejected: %d rows, want the inflating miner's alone", n)
	}
	miner := text("table.board tbody tr th code")
	do("search: another miner", chromedp.Navigate(board+"?q=ffffffffffffffff"), chromedp.WaitVisible(chromedp.CSS("form.board-filter")))
	if n := eval(`document.querySelectorAll("table.board tbody tr").length`); n != 0 {
		t.Fatalf("a search no miner matches shows %d rows", n)
	}
	do("search: the miner", chromedp.Navigate(board), chromedp.WaitVisible(chromedp.CSS("table.board")),
		chromedp.SetValue(chromedp.CSS(`form.board-filter input[name="q"]`), miner[:6]),
		chromedp.Submit(chromedp.CSS("form.board-filter")), chromedp.WaitVisible(chromedp.CSS(`a[href="/rounds/`+d.round.Digest.String()+`"]`)))
	if n := eval(`document.querySelectorAll("table.board tbody tr").length`); n != 1 || !strings.HasPrefix(text("table.board tbody tr th code"), miner[:6]) {
		t.Fatalf("searching %s: %d rows", miner[:6], n)
	}
	do("back to the leaderboard", chromedp.Navigate(board), chromedp.WaitVisible(chromedp.CSS("table.board")))

	// A Rejected cell leads to its evidence, mismatching rows first.
	// (Not the fourth validator's verdict: its key has no file, so no column shows it.)
	do("to the evidence", chromedp.Click(`//td[contains(@class,"rejected")][.//span[@class="reason"]="(reward_mismatch)"]//a[not(contains(@href,"`+d.hostile.String()+`"))]`),
		chromedp.WaitVisible(chromedp.CSS("table.audit-rows")))
	page("evidence", "Evidence for verdict")
	if n := eval(`document.querySelectorAll("table.audit-rows tr.mismatch").length`); n == 0 {
		t.Fatal("the evidence shows no mismatching row")
	}
	if o := text("table.audit-rows tbody tr:first-child td:last-child"); o != "mismatch" {
		t.Fatalf("the first audit row is a %q", o)
	}
	if st := text(".verdict-status"); !strings.EqualFold(st, "rejected") {
		t.Fatalf("evidence status %q", st)
	}

	// The replay command, and back to the leaderboard.
	do("to the replay command", chromedp.Click(chromedp.CSS("#replay-link")), chromedp.WaitVisible(chromedp.CSS("#replay-command")))
	page("replay", "Replay verdict")
	if c := text("#replay-command"); !strings.HasPrefix(c, "feval replay --pub validator-") || !strings.Contains(c, " sha256:") {
		t.Fatalf("replay command %q", c)
	}
	do("back", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS("table.audit-rows")))
	do("to the leaderboard", chromedp.Click(chromedp.CSS("#board-link")), chromedp.WaitVisible(chromedp.CSS("table.board")))
	if u := location(); u != board {
		t.Fatalf("back from the replay page to the evidence, then its round: %s, want the leaderboard", u)
	}

	// The charts render with a size.
	sized := func(sel string) {
		t.Helper()
		js := fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return r.width > 0 && r.height > 0 ? 1 : 0; })()`, sel)
		if eval(js) != 1 {
			t.Errorf("%s is not drawn with a size", sel)
		}
	}
	do("frontier", chromedp.Navigate(srv.URL+"/frontier"), chromedp.WaitVisible(chromedp.CSS("svg.bar-chart")))
	page("frontier", "frontier")
	for _, sel := range []string{"svg.bar-chart", "svg.bar-chart polyline", "svg.split-chart", "svg.split-chart rect"} {
		sized(sel)
	}
	do("costs", chromedp.Navigate(srv.URL+"/verdicts/"+d.metered.String()), chromedp.WaitVisible(chromedp.CSS("svg.cost-chart")))
	page("costs", "Evidence")
	sized("svg.cost-chart")
	sized("svg.cost-chart rect")
	do("artifact", chromedp.Navigate(srv.URL+"/artifacts/"+d.hostile.String()), chromedp.WaitVisible(chromedp.CSS("pre.record")))
	page("artifact", "Artifact")
	do("hostile", chromedp.Navigate(srv.URL+"/verdicts/"+d.hostile.String()), chromedp.WaitVisible(chromedp.CSS("table.audit-rows")))
	page("hostile", "Evidence")
	if n := eval(`document.querySelectorAll("script, img, [onerror]").length`); n != 0 {
		t.Fatalf("the hostile verdict's page holds %d script, img or handler elements", n)
	}
	// A verdict no trusted key signed never reads as passed.
	do("forged", chromedp.Navigate(srv.URL+"/verdicts/"+d.forged.String()), chromedp.WaitVisible(chromedp.CSS(".verdict-status")))
	page("forged", "Evidence")
	if st := text(".verdict-status"); !strings.HasPrefix(strings.ToLower(st), "claimed passed, untrusted") ||
		eval(`document.querySelectorAll(".verdict-status.passed").length`) != 0 {
		t.Fatalf("the forged verdict's status reads %q", st)
	}
	if w := text("ul.warnings li"); !strings.HasPrefix(w, "untrusted:") {
		t.Fatalf("the forged verdict's warning %q", w)
	}

	// At 390 px wide, the leaderboard and the evidence fit: wide tables
	// scroll inside the page, nothing is clipped.
	do("narrow", chromedp.EmulateViewport(390, 844))
	for i, u := range []string{board, srv.URL + "/verdicts/" + d.rejected.String(), srv.URL + "/rounds"} {
		do("narrow: "+u, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if w := eval(`document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s at 390 px: the page is %d px wide", u, w)
		}
		page(fmt.Sprintf("narrow-%d", i), "")
	}
	do("wide again", chromedp.EmulateViewport(1400, 1000))

	// The leaderboard refreshes itself: a verdict signed after the page loaded
	// appears without a reload by hand. This viewer trusts a fourth key,
	// which has signed nothing yet, and no consensus record (so that every
	// trusted signer has a column).
	late := newSigner(t)
	var keys []TrustedKey
	for _, v := range append(slices.Clone(d.vals[:3]), late) {
		keys = append(keys, TrustedKey{Key: v.Public()})
	}
	live, err := New(d.root, Options{Trusted: keys, Refresh: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	liveSrv := httptest.NewServer(LoopbackOnly(live))
	defer liveSrv.Close()
	do("live leaderboard", chromedp.Navigate(liveSrv.URL+"/rounds/"+d.round.Digest.String()), chromedp.WaitVisible(chromedp.CSS("table.board")))
	if n := eval(`document.querySelectorAll("th.validator").length`); n != 3 {
		t.Fatalf("%d validator columns before the new verdict, want 3", n)
	}
	d.resign(t, late, d.rejected, 7)
	do("refreshed", chromedp.WaitVisible(chromedp.CSS(`th.validator[title="`+late.Public().Fingerprint+`"]`)))
	if n := eval(`document.querySelectorAll("th.validator").length`); n != 4 {
		t.Fatalf("%d validator columns after the new verdict, want 4", n)
	}

	// Every page reads the same with JavaScript disabled.
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	for i, u := range slices.Clone(visited) {
		do("without JavaScript: "+u, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if n := eval(`document.querySelectorAll("main table, main svg, main pre").length`); n == 0 {
			t.Errorf("%s without JavaScript: no table, chart or record", u)
		}
		page(fmt.Sprintf("noscript-%d", i), "")
	}

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("the browser reported:\n%s", strings.Join(problems, "\n"))
	}
	t.Logf("screenshots in %s", shots)
}

// shot saves a screenshot of the whole page as PNG.
func shot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}
