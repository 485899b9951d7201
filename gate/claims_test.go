package gate

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
)

// claimsTree is a format-2 submission for ids, with rows whose claims are
// given (one per id, in id order) and the claims file built from them.
func claimsTree(ids []string, rewards []string) fstest.MapFS {
	var rows, claims strings.Builder
	for i, id := range ids {
		fmt.Fprintf(&rows, `{"task_id":%q,"response":"r%d","reward_claimed":%q}`+"\n", id, i, rewards[i])
		fmt.Fprintf(&claims, "%s\t%s\n", id, rewards[i])
	}
	return fstest.MapFS{
		RolloutSubmissionFile: {Data: []byte(`{"model_revision":"` + strings.Repeat("ab", 20) + `","rows":"rows.jsonl","claims":"claims.tsv"}`)},
		"rows.jsonl":          {Data: []byte(rows.String())},
		"claims.tsv":          {Data: []byte(claims.String())},
	}
}

func TestRolloutsClaims(t *testing.T) {
	ids := []string{"a", "b", "c"}
	rewards := []string{"1", "0", "1/2"}
	edit := func(file, old, new string) func(fstest.MapFS) {
		return func(m fstest.MapFS) {
			d := string(m[file].Data)
			if !strings.Contains(d, old) {
				panic(old + " not in " + file)
			}
			m[file] = &fstest.MapFile{Data: []byte(strings.Replace(d, old, new, 1))}
		}
	}
	cases := []struct {
		name  string
		edit  func(fstest.MapFS)
		rules []string
	}{
		{"valid", func(fstest.MapFS) {}, nil},
		{"claims path not .tsv", edit(RolloutSubmissionFile, `"claims.tsv"`, `"claims.txt"`), []string{RuleExtraFile, RuleJSONSchema}},
		{"claims file missing", func(m fstest.MapFS) { delete(m, "claims.tsv") }, []string{RuleMissingFile}},
		{"no tab", edit("claims.tsv", "b\t0", "b 0"), []string{RuleClaimsSyntax}},
		{"bad reward", edit("claims.tsv", "c\t1/2", "c\t2/4"), []string{RuleClaimsSyntax}},
		{"last line open", edit("claims.tsv", "1/2\n", "1/2"), []string{RuleClaimsSyntax}},
		{"fewer claims than rows", edit("claims.tsv", "b\t0\n", ""), []string{RuleClaimsSyntax}},
		{"row without line feed", edit("rows.jsonl", "\"1/2\"}\n", "\"1/2\"}"), []string{RuleClaimsSyntax}},
		{"unknown id", edit("claims.tsv", "b\t0", "z\t0"), []string{RuleMissingTaskID, RuleUnknownTaskID}},
		{"duplicate id", edit("claims.tsv", "b\t0", "a\t0"), []string{RuleMissingTaskID, RuleDuplicateTaskID}},
		{"control byte in id", edit("claims.tsv", "b\t0", "b\x01\t0"), []string{RuleClaimsSyntax}},
		{"long row", edit("rows.jsonl", `"r1"`, `"`+strings.Repeat("x", 2000)+`"`), []string{RuleRowTooLarge}},
		// Rows are not decoded by the gate when a claims file indexes them.
		{"undecodable row passes the gate", edit("rows.jsonl", `{"task_id":"b"`, `{"task_id":b"`), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree := claimsTree(ids, rewards)
			c.edit(tree)
			vs, err := Rollouts(tree, ids, RolloutLimits{MaxRowBytes: 1024})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range vs {
				got = append(got, v.Rule)
			}
			if strings.Join(got, ",") != strings.Join(c.rules, ",") {
				t.Errorf("rules %v, want %v (%v)", got, c.rules, vs)
			}
		})
	}
}

// TestIndexedRowsRow: a row read through the claims must repeat its claims
// line; the claims are not believed about the rows they index.
func TestIndexedRowsRow(t *testing.T) {
	ids := []string{"a", "b", "c"}
	tree := claimsTree(ids, []string{"1", "0", "1/2"})
	rows := strings.Replace(string(tree["rows.jsonl"].Data), `"task_id":"b","response":"r1","reward_claimed":"0"`, `"task_id":"b","response":"r1","reward_claimed":"1"`, 1)
	claims := tree["claims.tsv"].Data
	x, vs := OpenIndexedRows([]byte(rows), claims, "rows.jsonl", "claims.tsv", ids, RolloutLimits{})
	if len(vs) > 0 {
		t.Fatal(vs)
	}
	if x.Len() != 3 {
		t.Fatalf("Len %d", x.Len())
	}
	row, claim, rerr, ok := x.Row("c")
	if !ok || rerr != nil || row.Response != "r2" || claim.Reward != "1/2" {
		t.Fatalf("row c: %+v %+v %v %v", row, claim, rerr, ok)
	}
	if _, claim, rerr, ok := x.Row("b"); !ok || rerr == nil || rerr.Rule != RuleClaimsMismatch || rerr.Line != 2 || claim.Reward != "0" {
		t.Fatalf("row b claims 1 in the row and 0 in the claims: %v %+v", rerr, claim)
	}
	// Claims pointing task a at the row of task c (lines swapped in the
	// claims only) are caught on either row.
	swapped := []byte("c\t1/2\nb\t0\na\t1\n")
	x, vs = OpenIndexedRows(tree["rows.jsonl"].Data, swapped, "rows.jsonl", "claims.tsv", ids, RolloutLimits{})
	if len(vs) > 0 {
		t.Fatal(vs)
	}
	for _, id := range []string{"a", "c"} {
		if _, _, rerr, _ := x.Row(id); rerr == nil || rerr.Rule != RuleClaimsMismatch {
			t.Errorf("row %s read through swapped claims: %v", id, rerr)
		}
	}
	if _, _, _, ok := x.Row("z"); ok {
		t.Error("an id without a claim was found")
	}
}

// FuzzOpenIndexedRows: any bytes as rows and claims are refused or give
// rows that each repeat their claims line; nothing panics.
func FuzzOpenIndexedRows(f *testing.F) {
	tree := claimsTree([]string{"a", "b"}, []string{"1", "1/3"})
	f.Add(tree["rows.jsonl"].Data, tree["claims.tsv"].Data)
	f.Add([]byte("\n\n"), []byte("a\t0\nb\t1\n"))
	f.Add([]byte(`{"task_id":"a","response":"","reward_claimed":"0"}`), []byte("a\t0"))
	f.Fuzz(func(t *testing.T, rows, claims []byte) {
		x, vs := OpenIndexedRows(rows, claims, "rows.jsonl", "claims.tsv", []string{"a", "b"}, RolloutLimits{MaxRowBytes: 256})
		if (x == nil) == (len(vs) == 0) {
			t.Fatalf("result %v with violations %v", x != nil, vs)
		}
		if x == nil {
			return
		}
		for _, id := range []string{"a", "b"} {
			row, claim, rerr, ok := x.Row(id)
			if !ok {
				t.Fatalf("claimed id %s not found", id)
			}
			if rerr == nil && (row.TaskID != id || row.RewardClaimed != claim.Reward) {
				t.Fatalf("row %+v accepted for claim %+v", row, claim)
			}
		}
	})
}
