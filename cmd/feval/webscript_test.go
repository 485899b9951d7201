package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/scoring"
	"github.com/feval/feval/web"
	"github.com/rogpeppe/go-internal/testscript"
)

// boardView is what a leaderboard decides, as both 'feval leaderboard
// --json' and the web page's JSON give it.
type boardView struct {
	Consensus  string         `json:"consensus"`
	CarryFrom  string         `json:"carry_from"`
	Validators []string       `json:"validators"`
	Seat       map[string]any `json:"seat"`
	Stakes     map[string]int `json:"validator_stakes"`
	LeftOut    map[string]int `json:"left_out"`
	Rows       []struct {
		Miner  string         `json:"miner"`
		Scored bool           `json:"scored"`
		Score  string         `json:"score"`
		Reward string         `json:"reward"`
		Audit  map[string]int `json:"audit"`
		Cells  []struct {
			Status           string `json:"status"`
			Score            string `json:"score"`
			CarriedFrom      string `json:"carried_from"`
			Verdict          string `json:"verdict"`
			Reason           string `json:"reason"`
			Summary          string `json:"summary"`
			Unscored         bool   `json:"unscored"`
			UnverifiedBeacon bool   `json:"unverified_beacon"`
		} `json:"cells"`
	} `json:"rows"`
}

// cmdSameBoard checks that the web viewer shows the leaderboard 'feval
// leaderboard --json' wrote to a file, on the store of $FEVAL_STORE with the
// same trusted keys: sameboard CLI.json PUB...
func cmdSameBoard(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: sameboard CLI.json PUB...")
	}
	var cli boardView
	var round struct {
		Round string `json:"round"`
	}
	b := []byte(ts.ReadFile(args[0]))
	ts.Check(json.Unmarshal(b, &cli))
	ts.Check(json.Unmarshal(b, &round))
	srv, err := web.New(ts.Getenv("FEVAL_STORE"), web.Options{Trusted: scriptKeys(ts, args[1:])})
	ts.Check(err)
	var page boardView
	webGet(ts, srv, "/api/rounds/"+round.Round, &page)
	if !reflect.DeepEqual(cli, page) {
		want, _ := json.Marshal(cli)
		got, _ := json.Marshal(page)
		ts.Fatalf("the web page's leaderboard differs from the CLI's:\ncli %s\nweb %s", want, got)
	}
	ts.Logf("the web page shows the CLI's leaderboard: %d rows, %d validators", len(cli.Rows), len(cli.Validators))
}

// cmdSameFrontier checks that the web viewer started as 'feval serve
// --frontier-round ROUND' shows the frontier 'feval frontier --round ROUND
// --json' wrote to a file, on the store of $FEVAL_STORE with the same trusted
// keys: samefrontier CLI.json ROUND PUB...
func cmdSameFrontier(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 {
		ts.Fatalf("usage: samefrontier CLI.json ROUND PUB...")
	}
	var cli any
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &cli))
	cfg := serveConfig{store: ts.Getenv("FEVAL_STORE"),
		opts: web.Options{Trusted: scriptKeys(ts, args[2:]), Frontier: &web.Frontier{Rules: scoring.DefaultRules()}}}
	ts.Check(cfg.resolveFrontier(context.Background(), args[1], ""))
	srv, err := web.New(cfg.store, cfg.opts)
	ts.Check(err)
	// The CLI prints the history with the round's left-out counts and
	// reconciled runs beside it; the page has them as members of its own.
	var page struct {
		History    map[string]any `json:"history"`
		Round      any            `json:"round"`
		LeftOut    any            `json:"left_out"`
		Reconciled any            `json:"reconciled"`
	}
	webGet(ts, srv, "/api/frontier", &page)
	shown := page.History
	for k, v := range map[string]any{"round": page.Round, "left_out": page.LeftOut, "reconciled": page.Reconciled} {
		if v != nil {
			shown[k] = v
		}
	}
	if !reflect.DeepEqual(cli, shown) {
		want, _ := json.Marshal(cli)
		got, _ := json.Marshal(shown)
		ts.Fatalf("the web page's frontier differs from the CLI's:\ncli %s\nweb %s", want, got)
	}
}

// scriptKeys reads public key files as the viewer's trusted keys.
func scriptKeys(ts *testscript.TestScript, paths []string) []web.TrustedKey {
	var keys []web.TrustedKey
	for _, p := range paths {
		pem, err := os.ReadFile(ts.MkAbs(p))
		ts.Check(err)
		k, err := bundle.ParsePublicKey(pem)
		ts.Check(err)
		keys = append(keys, web.TrustedKey{Path: p, Key: k})
	}
	return keys
}

// webGet decodes the JSON a viewer serves at path into v.
func webGet(ts *testscript.TestScript, srv *web.Server, path string, v any) {
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		ts.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	ts.Check(json.Unmarshal(rec.Body.Bytes(), v))
}

// cmdWebGet prints the JSON the web viewer serves at a path, on the store of
// $FEVAL_STORE with the named trusted keys: webget PATH PUB...
func cmdWebGet(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: webget PATH PUB...")
	}
	srv, err := web.New(ts.Getenv("FEVAL_STORE"), web.Options{Trusted: scriptKeys(ts, args[1:])})
	ts.Check(err)
	var v any
	webGet(ts, srv, args[0], &v)
	b, err := json.MarshalIndent(v, "", "  ")
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "%s\n", b)
}
