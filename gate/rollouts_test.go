package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// fixtureTaskIDs reads the task id list shared by the rollouts fixtures.
func fixtureTaskIDs(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile("../fixtures/rollouts-bad/task-ids.txt")
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.Fields(string(data))
	if len(ids) != 5 {
		t.Fatalf("task-ids.txt holds %d ids, want 5", len(ids))
	}
	return ids
}

func TestRolloutsFixtures(t *testing.T) {
	ids := fixtureTaskIDs(t)
	// The fixtures are small: they run with a 1 KiB row limit.
	limits := RolloutLimits{MaxRowBytes: 1024}
	for _, c := range loadFixtures(t, "../fixtures/rollouts-bad", 12) {
		t.Run(c.name, func(t *testing.T) {
			got, err := Rollouts(c.tree, ids, limits)
			if err != nil {
				t.Fatal(err)
			}
			checkExpectation(t, c.expect, got)
		})
	}
}

func TestRolloutsCallerErrors(t *testing.T) {
	tree := fstest.MapFS{}
	for name, ids := range map[string][]string{"empty": nil, "blank id": {"a", ""}, "repeated id": {"a", "b", "a"}} {
		t.Run(name, func(t *testing.T) {
			if _, err := Rollouts(tree, ids, RolloutLimits{}); !errors.Is(err, ErrTaskIDs) {
				t.Fatalf("err = %v, want ErrTaskIDs", err)
			}
		})
	}
}

func TestPinnedRevision(t *testing.T) {
	cases := map[string]bool{
		"sha256:" + strings.Repeat("0a", 32):       true,
		strings.Repeat("0a", 20):                   true,
		"sha256:" + strings.Repeat("0A", 32):       false,
		strings.Repeat("0A", 20):                   false,
		"sha256:" + strings.Repeat("0a", 31):       false,
		"sha512:" + strings.Repeat("0a", 64):       false,
		strings.Repeat("0a", 20) + "0":             false,
		"main":                                     false,
		"refs/heads/main":                          false,
		"v1.0":                                     false,
		"":                                         false,
		"sha256:" + strings.Repeat("0a", 31) + "g": false,
	}
	for rev, want := range cases {
		if got := PinnedRevision(rev); got != want {
			t.Errorf("PinnedRevision(%q) = %v, want %v", rev, got, want)
		}
	}
}

func TestParseReward(t *testing.T) {
	cases := []struct {
		in   string
		want string // big.Rat String(), "" for an error
	}{
		{"0", "0/1"},
		{"1", "1/1"},
		{"1/2", "1/2"},
		{"7/20", "7/20"},
		{"9999999999999999999999/10000000000000000000000", "9999999999999999999999/10000000000000000000000"},
		{"2/4", ""},
		{"0/5", ""},
		{"1/1", ""},
		{"3/2", ""},
		{"01/2", ""},
		{"1/02", ""},
		{"-1/2", ""},
		{"+1/2", ""},
		{"1/0", ""},
		{"0.5", ""},
		{"1e0", ""},
		{" 1/2", ""},
		{"1/2/3", ""},
		{"/2", ""},
		{"1/", ""},
		{"", ""},
		{"00", ""},
		{"1/" + strings.Repeat("9", 65), ""},
		{"\u0661/\u0662", ""},
	}
	for _, c := range cases {
		got, err := ParseReward(c.in)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("ParseReward(%q) = %v, want an error", c.in, got)
		case c.want == "" && !errors.Is(err, ErrBadReward):
			t.Errorf("ParseReward(%q) error %v does not wrap ErrBadReward", c.in, err)
		case c.want != "" && err != nil:
			t.Errorf("ParseReward(%q): %v", c.in, err)
		case c.want != "" && got.String() != c.want:
			t.Errorf("ParseReward(%q) = %v, want %s", c.in, got, c.want)
		}
	}
}

func TestParseRow(t *testing.T) {
	tr := "t"
	cases := []struct {
		name string
		line string
		want *Row
		rule string
	}{
		{"minimal", `{"task_id":"a","response":"","reward_claimed":"0"}`, &Row{TaskID: "a", RewardClaimed: "0"}, ""},
		{"spaces and order", ` { "reward_claimed" : "1/3" , "response" : "r", "task_id" : "a" } `, &Row{TaskID: "a", Response: "r", RewardClaimed: "1/3"}, ""},
		{"trace", `{"task_id":"a","response":"","reward_claimed":"1","trace":"t"}`, &Row{TaskID: "a", RewardClaimed: "1", Trace: &tr}, ""},
		{"escapes", `{"task_id":"a\u00e9\ud83d\ude00\n\"\\\/","response":"","reward_claimed":"1"}`, &Row{TaskID: "a\u00e9\U0001F600\n\"\\/", RewardClaimed: "1"}, ""},
		{"raw utf-8", `{"task_id":"\u00e9t\u00e9","response":"\u03b2","reward_claimed":"1"}`, &Row{TaskID: "\u00e9t\u00e9", Response: "\u03b2", RewardClaimed: "1"}, ""},
		{"empty line", ``, nil, RuleRowSyntax},
		{"array", `["a"]`, nil, RuleRowSyntax},
		{"truncated", `{"task_id":"a","response":"`, nil, RuleRowSyntax},
		{"trailing data", `{"task_id":"a","response":"","reward_claimed":"1"} x`, nil, RuleRowSyntax},
		{"two objects", `{"task_id":"a","response":"","reward_claimed":"1"}{}`, nil, RuleRowSyntax},
		{"control character", "{\"task_id\":\"a\tb\",\"response\":\"\",\"reward_claimed\":\"1\"}", nil, RuleRowSyntax},
		{"lone surrogate", `{"task_id":"\ud800","response":"","reward_claimed":"1"}`, nil, RuleRowSyntax},
		{"bad escape", `{"task_id":"\x41","response":"","reward_claimed":"1"}`, nil, RuleRowSyntax},
		{"invalid utf-8", "{\"task_id\":\"\xff\",\"response\":\"\",\"reward_claimed\":\"1\"}", nil, RuleRowEncoding},
		{"missing field", `{"task_id":"a","response":""}`, nil, RuleRowSchema},
		{"empty object", `{}`, nil, RuleRowSchema},
		{"unknown field", `{"task_id":"a","response":"","reward_claimed":"1","x":""}`, nil, RuleRowSchema},
		{"case-folded key", `{"Task_ID":"a","response":"","reward_claimed":"1"}`, nil, RuleRowSchema},
		{"duplicate field", `{"task_id":"a","task_id":"b","response":"","reward_claimed":"1"}`, nil, RuleRowSchema},
		{"number value", `{"task_id":"a","response":"","reward_claimed":1}`, nil, RuleRowSchema},
		{"null value", `{"task_id":"a","response":null,"reward_claimed":"1"}`, nil, RuleRowSchema},
		{"number value then broken", `{"task_id":1,"response":`, nil, RuleRowSyntax},
		{"empty task id", `{"task_id":"","response":"","reward_claimed":"1"}`, nil, RuleRowSchema},
		{"bad reward", `{"task_id":"a","response":"","reward_claimed":"0.5"}`, nil, RuleBadReward},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row, rerr := ParseRow([]byte(c.line))
			if c.want != nil {
				if rerr != nil {
					t.Fatalf("unexpected error %v", rerr)
				}
				if !reflect.DeepEqual(row, *c.want) {
					t.Fatalf("got %+v, want %+v", row, *c.want)
				}
				return
			}
			if rerr == nil || rerr.Rule != c.rule {
				t.Fatalf("got %v, want rule %s", rerr, c.rule)
			}
		})
	}
}

func TestScanRowsLines(t *testing.T) {
	good := `{"task_id":"a","response":"","reward_claimed":"1"}`
	long := `{"task_id":"b","response":"` + strings.Repeat("x", 200) + `","reward_claimed":"1"}`
	cases := []struct {
		name  string
		input string
		want  []string // "line:task" or "line:rule"
	}{
		{"no trailing newline", good + "\n" + good, []string{"1:a", "2:a"}},
		{"trailing newline", good + "\n", []string{"1:a"}},
		{"empty file", "", nil},
		{"blank line at end", good + "\n\n", []string{"1:a", "2:row-syntax"}},
		{"long line in the middle", good + "\n" + long + "\n" + good, []string{"1:a", "2:row-too-large", "3:a"}},
		{"long last line", good + "\n" + long, []string{"1:a", "2:row-too-large"}},
		{"crlf", good + "\r\n" + good + "\r\n", []string{"1:a", "2:a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			err := ScanRows(strings.NewReader(c.input), RolloutLimits{MaxRowBytes: 100}, func(line int, row Row, rerr *RowError) error {
				if rerr != nil {
					got = append(got, fmt.Sprintf("%d:%s", line, rerr.Rule))
				} else {
					got = append(got, fmt.Sprintf("%d:%s", line, row.TaskID))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestReadRowsStopsAtFirstBadRow(t *testing.T) {
	input := `{"task_id":"a","response":"","reward_claimed":"1"}` + "\n" + `{"task_id":"b"}` + "\n" + `{"task_id":"c","response":"","reward_claimed":"1"}` + "\n"
	var seen []string
	err := ReadRows(strings.NewReader(input), RolloutLimits{}, func(line int, row Row) error {
		seen = append(seen, row.TaskID)
		return nil
	})
	var rerr *RowError
	if !errors.As(err, &rerr) || rerr.Line != 2 || rerr.Rule != RuleRowSchema {
		t.Fatalf("err = %v, want row-schema on line 2", err)
	}
	if strings.Join(seen, ",") != "a" {
		t.Fatalf("rows seen before the error: %v", seen)
	}
	stop := errors.New("stop")
	if err := ReadRows(strings.NewReader(input), RolloutLimits{}, func(int, Row) error { return stop }); err != stop {
		t.Fatalf("callback error not returned unchanged: %v", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestScanRowsReadError(t *testing.T) {
	err := ScanRows(io.MultiReader(strings.NewReader("{"), failingReader{}), RolloutLimits{}, func(int, Row, *RowError) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("err = %v", err)
	}
}

// bigRollout builds a valid submission of n rows.
func bigRollout(n int) (fstest.MapFS, []string) {
	ids := make([]string, n)
	var rows bytes.Buffer
	for i := range ids {
		ids[i] = fmt.Sprintf("task-%05d", i)
		fmt.Fprintf(&rows, `{"task_id":%q,"response":"The answer is \\boxed{%d}. %s","reward_claimed":"%d/%d"}`+"\n",
			ids[i], i, strings.Repeat("Reasoning step. ", 8), 1, i%7+2)
	}
	sub := fmt.Sprintf(`{"model_revision":"sha256:%s","rows":"rows.jsonl"}`, strings.Repeat("ab", 32))
	return fstest.MapFS{"submission.json": {Data: []byte(sub)}, "rows.jsonl": {Data: rows.Bytes()}}, ids
}

func TestRolloutsTenThousandRows(t *testing.T) {
	tree, ids := bigRollout(10000)
	vs, err := Rollouts(tree, ids, RolloutLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 0 {
		t.Fatalf("violations: %v", vs[:min(len(vs), 5)])
	}
	// Every row a duplicate of the first: the report stays bounded.
	dup := fstest.MapFS{"submission.json": tree["submission.json"]}
	line := `{"task_id":"task-00000","response":"","reward_claimed":"1"}` + "\n"
	dup["rows.jsonl"] = &fstest.MapFile{Data: []byte(strings.Repeat(line, 10000))}
	vs, err = Rollouts(dup, ids, RolloutLimits{MaxViolationsPerRule: 10, MaxListedIDs: 3})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, v := range vs {
		counts[v.Rule]++
	}
	if counts[RuleDuplicateTaskID] != 11 || counts[RuleMissingTaskID] != 1 || len(vs) != 12 {
		t.Fatalf("got %v", counts)
	}
	for _, v := range vs {
		if v.Rule == RuleMissingTaskID && (!strings.Contains(v.Detail, "9999 task ids have no row") || !strings.Contains(v.Detail, "and 9996 more")) {
			t.Fatalf("missing summary: %s", v.Detail)
		}
	}
}

func BenchmarkRolloutsTenThousandRows(b *testing.B) {
	tree, ids := bigRollout(10000)
	b.SetBytes(int64(len(tree["rows.jsonl"].Data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Rollouts(tree, ids, RolloutLimits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParseRow checks ParseRow against encoding/json: every row ParseRow
// accepts decodes with encoding/json to an object with exactly the same
// keys and values, and marshalling the row parses back to the same row.
func FuzzParseRow(f *testing.F) {
	f.Add([]byte(`{"task_id":"a","response":"","reward_claimed":"0"}`))
	f.Add([]byte(`{"task_id":"a\u00e9\ud83d\ude00","response":"x\n","reward_claimed":"7/20","trace":"t"}`))
	f.Add([]byte(`{"task_id":"a","task_id":"b","response":"","reward_claimed":"1"}`))
	f.Add([]byte(`{"task_id":"\ud800","response":"","reward_claimed":"1"}`))
	f.Add([]byte(` {"reward_claimed":"1/2" ,"response":"\"","task_id":"z"} `))
	f.Add([]byte(`{"task_id":"a","prompt_tokens":[1,20,300],"completion_tokens":[0, 2147483647 ],"reward_claimed":"1"}`))
	f.Add([]byte(`{"task_id":"a","prompt_tokens":[],"completion_tokens":[],"reward_claimed":"0","trace":""}`))
	f.Add([]byte(`{"task_id":"a","prompt_tokens":[01],"completion_tokens":[2147483648],"reward_claimed":"0"}`))
	f.Add([]byte(`{"task_id":"a","prompt_tokens":[1.0],"completion_tokens":[-1],"response":"","reward_claimed":"0"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		row, rerr := ParseRow(line)
		if rerr != nil {
			if rerr.Rule == "" {
				t.Fatalf("error without rule: %v", rerr)
			}
			return
		}
		var generic map[string]any
		dec := json.NewDecoder(bytes.NewReader(line))
		if err := dec.Decode(&generic); err != nil {
			t.Fatalf("ParseRow accepted what encoding/json rejects: %v", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Fatalf("ParseRow accepted trailing data")
		}
		want := map[string]any{"task_id": row.TaskID, "reward_claimed": row.RewardClaimed}
		if row.IsTokens() {
			for name, ids := range map[string][]int{"prompt_tokens": row.PromptTokens, "completion_tokens": row.CompletionTokens} {
				list := []any{}
				for _, id := range ids {
					list = append(list, float64(id))
				}
				want[name] = list
			}
		} else {
			want["response"] = row.Response
		}
		if row.Trace != nil {
			want["trace"] = *row.Trace
		}
		if !reflect.DeepEqual(generic, want) {
			t.Fatalf("ParseRow %v, encoding/json %v", want, generic)
		}
		out, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		again, rerr := ParseRow(out)
		if rerr != nil || !reflect.DeepEqual(again, row) {
			t.Fatalf("round trip: %s -> %+v, %v", out, again, rerr)
		}
	})
}
