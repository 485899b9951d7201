package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"

	"github.com/feval/feval/bundle"
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
	var keys []web.TrustedKey
	for _, p := range args[1:] {
		pem, err := os.ReadFile(ts.MkAbs(p))
		ts.Check(err)
		k, err := bundle.ParsePublicKey(pem)
		ts.Check(err)
		keys = append(keys, web.TrustedKey{Path: p, Key: k})
	}
	srv, err := web.New(ts.Getenv("FEVAL_STORE"), web.Options{Trusted: keys})
	ts.Check(err)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/rounds/"+round.Round, nil))
	if rec.Code != http.StatusOK {
		ts.Fatalf("GET /api/rounds/%s: %d %s", round.Round, rec.Code, rec.Body)
	}
	var page boardView
	ts.Check(json.Unmarshal(rec.Body.Bytes(), &page))
	if !reflect.DeepEqual(cli, page) {
		want, _ := json.Marshal(cli)
		got, _ := json.Marshal(page)
		ts.Fatalf("the web page's leaderboard differs from the CLI's:\ncli %s\nweb %s", want, got)
	}
	ts.Logf("the web page shows the CLI's leaderboard: %d rows, %d validators", len(cli.Rows), len(cli.Validators))
}
