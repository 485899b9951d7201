package web

import (
	"encoding/json"
	"html/template"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	`{"audit":{"beacon":{"source":"drand:x","value":"v"},"full":false,"mismatches":["if-00168"],"rows":[{"claimed":"1","outcome":"mismatch","recomputed":"0","task_id":"if-00168"},{"claimed":"2/3","outcome":"match","recomputed":"2/3","task_id":"if-1"}],"sample_size":2,"seed":"ab","undetermined":[]},"claimed_score":"25169/30000","inputs":{"round":"sha256:0000000000000000000000000000000000000000000000000000000000000000","miner":"ff"},"protocol":"rollouts","reason":"reward_mismatch","reveal_check":{"status":"accepted"},"rows":10000,"sequence":7,"status":"rejected","submission":"sha256:11","traces":[],"violations":[{"rule":"x"}]}`,
	`{"protocol":"scenarios","status":"passed","receipts":[{"digest":"sha256:aa"}],"costs":[{"scenario":"s1","model":"m","cost_micro_usd":5},{"scenario_id":"<script>","model":"</svg><script>","price_micro_usd":7}],"loss_micro_nats":12,"nested":{"x_micro_nats":-3}}`,
	`{"status":"<script>alert(1)</script>","reason":"\u0000\u001b[2J","inputs":{"a":"\"><img src=x onerror=alert(1)>"},"audit":{"rows":[{"task_id":"<b>","claimed":"x","outcome":"<i>"}]}}`,
	`[]`, `null`, `{"audit":[]}`, `{"audit":{"rows":null}}`, `1e999`,
}

// FuzzEvidence: whatever a verdict record holds, building its evidence, its
// costs and losses and rendering the page never panics, always encodes as
// JSON, and never puts a script element on the page.
func FuzzEvidence(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	s := &Server{pages: map[string]*template.Template{}}
	if err := s.parseTemplates(); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, record []byte) {
		p, rec, err := recordEvidence(record)
		if err != nil {
			return
		}
		costs := newCostTable()
		costs.walk(rec)
		p.Costs = costs.chart()
		losses := map[string]int64{}
		collectLosses(rec, "", losses)
		for _, k := range sortedKeys(losses) {
			p.Losses = append(p.Losses, Loss{Path: k, MicroNats: losses[k]})
		}
		if top, ok := rec.(map[string]any); ok {
			for _, d := range digestsIn(top["receipts"]) {
				p.Receipts = append(p.Receipts, Linked{Digest: d, Record: string(record)})
			}
		}
		p.Replay = ReplayCommand{Command: "feval replay --pub VALIDATOR.pub " + string(p.Verdict)}
		if _, err := json.Marshal(p); err != nil {
			t.Fatalf("encoding: %v", err)
		}
		var out strings.Builder
		if err := s.pages["evidence"].ExecuteTemplate(&out, "base", view{Title: p.Status, Data: p}); err != nil {
			t.Fatalf("rendering: %v", err)
		}
		if strings.Contains(strings.ToLower(out.String()), "<script") {
			t.Fatalf("a record put a script element on the page")
		}
	})
}

// FuzzSummarize: a summary never panics, and each value is one line of at
// most maxSummaryValue runes without control characters.
func FuzzSummarize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add("verdict", []byte(s))
		f.Add("round", []byte(s))
	}
	f.Fuzz(func(t *testing.T, kind string, record []byte) {
		for _, fl := range Summarize(kind, record) {
			for _, s := range []string{fl.Name, fl.Value} {
				if utf8.RuneCountInString(s) > maxSummaryValue {
					t.Fatalf("%q: %d runes", s, utf8.RuneCountInString(s))
				}
				if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r >= 0x7f && r < 0xa0 }) {
					t.Fatalf("control character in %q", s)
				}
			}
		}
	})
}
