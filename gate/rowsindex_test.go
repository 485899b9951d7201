package gate

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

const (
	ixMeta = `{"model_revision":"` + "0123456789abcdef0123456789abcdef01234567" + `","rows":"rows.jsonl"}`
	ixRows = `{"response":"a","reward_claimed":"1","task_id":"t2"}` + "\n" +
		`{"response":"b","reward_claimed":"0","task_id":"t1"}` + "\n" +
		`{"response":"c","reward_claimed":"2/3","task_id":"t3"}` + "\n"
)

func mustIndex(t testing.TB) []byte {
	t.Helper()
	b, err := EncodeRowsIndex([]byte(ixMeta), []byte(ixRows))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRowsIndexRoundTrip(t *testing.T) {
	b := mustIndex(t)
	x, err := ParseRowsIndex(b, RowsIndexLimits{MaxRows: 3, MaxRowBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() != 3 || string(x.Meta()) != ixMeta || x.RowsSize() != int64(len(ixRows)) {
		t.Fatalf("len %d meta %q size %d", x.Len(), x.Meta(), x.RowsSize())
	}
	lines := strings.SplitAfter(ixRows, "\n")
	for i, want := range []struct{ id, reward string }{{"t2", "1"}, {"t1", "0"}, {"t3", "2/3"}} {
		if x.TaskID(i) != want.id || x.Reward(i) != want.reward {
			t.Errorf("row %d: %q %q, want %+v", i, x.TaskID(i), x.Reward(i), want)
		}
		if j, ok := x.Find(want.id); !ok || j != i {
			t.Errorf("Find(%q) = %d %v, want %d", want.id, j, ok, i)
		}
		off, n := x.Span(i)
		row, rerr := x.CheckRow(i, []byte(ixRows[off:off+int64(n)]))
		if rerr != nil || row.TaskID != want.id || ixRows[off:off+int64(n)] != lines[i] {
			t.Errorf("row %d: %+v %v", i, row, rerr)
		}
	}
	if _, ok := x.Find("t0"); ok {
		t.Error("Find found an id the index does not have")
	}
	rewards, counts := x.RewardCounts()
	if strings.Join(rewards, " ") != "0 1 2/3" || counts[0] != 1 || counts[1] != 1 || counts[2] != 1 {
		t.Errorf("rewards %q counts %v", rewards, counts)
	}
	known := map[string]bool{"t1": true, "t2": true, "t3": true}
	if err := x.MatchIDs(3, func(id []byte) bool { return known[string(id)] }); err != nil {
		t.Error(err)
	}
	delete(known, "t3")
	if err := x.MatchIDs(3, func(id []byte) bool { return known[string(id)] }); !errors.Is(err, ErrRowsIndex) {
		t.Errorf("an id the task does not have: %v", err)
	}
	if err := x.MatchIDs(4, func([]byte) bool { return true }); !errors.Is(err, ErrRowsIndex) {
		t.Errorf("a task with more ids: %v", err)
	}
	task := []string{"t1", "t2", "t3"}
	if err := x.MatchSortedIDs(task, SortedIDsDigest(task)); err != nil {
		t.Error(err)
	}
	for _, ids := range [][]string{{"t1", "t2", "t4"}, {"t1", "t2"}, {"t0", "t1", "t2", "t3"}, {"t1", "t2t", "3"}} {
		if err := x.MatchSortedIDs(ids, SortedIDsDigest(ids)); !errors.Is(err, ErrRowsIndex) {
			t.Errorf("task ids %q: %v", ids, err)
		}
	}
}

func TestCheckRow(t *testing.T) {
	b := mustIndex(t)
	x, err := ParseRowsIndex(b, RowsIndexLimits{})
	if err != nil {
		t.Fatal(err)
	}
	off, n := x.Span(0)
	row := []byte(ixRows[off : off+int64(n)])
	tampered := []byte(strings.Replace(string(row), `"a"`, `"z"`, 1))
	if _, rerr := x.CheckRow(0, tampered); rerr == nil || rerr.Rule != RuleRowsIndex || rerr.Line != 1 {
		t.Errorf("bytes that differ from their hash: %v", rerr)
	}
	// An index whose entry claims another reward than its row: the entry of
	// row 1 ("0") is pointed at reward "1".
	lying := append([]byte(nil), b...)
	x2, _ := ParseRowsIndex(lying, RowsIndexLimits{})
	k1, _ := x2.RewardOf(0)
	e := entryAt(t, lying, 1)
	binary.BigEndian.PutUint32(e[12:], uint32(k1))
	x2, err = ParseRowsIndex(lying, RowsIndexLimits{})
	if err != nil {
		t.Fatal(err)
	}
	off, n = x2.Span(1)
	if _, rerr := x2.CheckRow(1, []byte(ixRows[off:off+int64(n)])); rerr == nil || rerr.Rule != RuleClaimsMismatch {
		t.Errorf("an entry claiming another reward than its row: %v", rerr)
	}
}

// entryAt returns the bytes of entry i of an encoded index.
func entryAt(t testing.TB, b []byte, i int) []byte {
	x, err := ParseRowsIndex(b, RowsIndexLimits{})
	if err != nil {
		t.Fatal(err)
	}
	start := len(b) - len(x.ids) - len(x.order) - len(x.entries)
	return b[start+i*rowsIndexEntrySize : start+(i+1)*rowsIndexEntrySize]
}

func TestParseRowsIndexHostile(t *testing.T) {
	be := binary.BigEndian
	for _, c := range []struct {
		name string
		lim  RowsIndexLimits
		edit func(t *testing.T, b []byte) []byte
	}{
		{"empty", RowsIndexLimits{}, func(_ *testing.T, b []byte) []byte { return nil }},
		{"other magic", RowsIndexLimits{}, func(_ *testing.T, b []byte) []byte { b[7] = '2'; return b }},
		{"truncated", RowsIndexLimits{}, func(_ *testing.T, b []byte) []byte { return b[:len(b)-1] }},
		{"trailing byte", RowsIndexLimits{}, func(_ *testing.T, b []byte) []byte { return append(b, 0) }},
		{"more rows than the task", RowsIndexLimits{MaxRows: 2}, func(_ *testing.T, b []byte) []byte { return b }},
		{"row over the row limit", RowsIndexLimits{MaxRowBytes: 10}, func(_ *testing.T, b []byte) []byte { return b }},
		{"huge row count", RowsIndexLimits{}, func(_ *testing.T, b []byte) []byte { be.PutUint32(b[8:], 1<<31); return b }},
		{"huge reward count", RowsIndexLimits{}, func(_ *testing.T, b []byte) []byte { be.PutUint32(b[12:], 1<<31); return b }},
		{"huge meta", RowsIndexLimits{}, func(_ *testing.T, b []byte) []byte { be.PutUint32(b[16:], 1<<31); return b }},
		{"huge ids", RowsIndexLimits{}, func(_ *testing.T, b []byte) []byte { be.PutUint32(b[20:], 1<<31); return b }},
		{"rows size beyond the rows", RowsIndexLimits{}, func(_ *testing.T, b []byte) []byte { be.PutUint64(b[24:], 1<<62); return b }},
		{"negative rows size", RowsIndexLimits{}, func(_ *testing.T, b []byte) []byte { be.PutUint64(b[24:], 1<<63); return b }},
		{"overlapping rows", RowsIndexLimits{}, func(t *testing.T, b []byte) []byte {
			e := entryAt(t, b, 1)
			be.PutUint64(e, be.Uint64(e)-1)
			return b
		}},
		{"gap between rows", RowsIndexLimits{}, func(t *testing.T, b []byte) []byte {
			e := entryAt(t, b, 1)
			be.PutUint64(e, be.Uint64(e)+1)
			return b
		}},
		{"row length zero", RowsIndexLimits{}, func(t *testing.T, b []byte) []byte { be.PutUint32(entryAt(t, b, 2)[8:], 0); return b }},
		{"reward out of range", RowsIndexLimits{}, func(t *testing.T, b []byte) []byte { be.PutUint32(entryAt(t, b, 0)[12:], 3); return b }},
		{"id out of range", RowsIndexLimits{}, func(t *testing.T, b []byte) []byte { be.PutUint32(entryAt(t, b, 2)[20:], 1<<30); return b }},
		{"order not a permutation", RowsIndexLimits{}, func(t *testing.T, b []byte) []byte {
			copy(b[len(b)-6-8:len(b)-6-4], b[len(b)-6-12:len(b)-6-8])
			return b
		}},
		{"order not sorted", RowsIndexLimits{}, func(t *testing.T, b []byte) []byte {
			o := b[len(b)-6-12 : len(b)-6]
			var first [4]byte
			copy(first[:], o[:4])
			copy(o[:4], o[4:8])
			copy(o[4:8], first[:])
			return b
		}},
		{"duplicate id", RowsIndexLimits{}, func(t *testing.T, b []byte) []byte { b[len(b)-1] = '1'; return b }},
		{"control character in an id", RowsIndexLimits{}, func(t *testing.T, b []byte) []byte { b[len(b)-2] = '\n'; return b }},
		{"reward not canonical", RowsIndexLimits{}, func(t *testing.T, b []byte) []byte {
			i := strings.Index(string(b), "2/3")
			b[i] = '4'
			b[i+2] = '6'
			return b
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.edit(t, mustIndex(t))
			if _, err := ParseRowsIndex(b, c.lim); !errors.Is(err, ErrRowsIndex) {
				t.Fatalf("got %v, want ErrRowsIndex", err)
			}
		})
	}
}

func TestEncodeRowsIndexRefuses(t *testing.T) {
	for name, rows := range map[string]string{
		"no final line feed": strings.TrimSuffix(ixRows, "\n"),
		"invalid row":        ixRows + "{}\n",
		"duplicate id":       ixRows + `{"response":"","reward_claimed":"1","task_id":"t1"}` + "\n",
		"unreduced reward":   `{"response":"","reward_claimed":"2/4","task_id":"t1"}` + "\n",
		"empty":              "",
	} {
		if _, err := EncodeRowsIndex([]byte(ixMeta), []byte(rows)); !errors.Is(err, ErrRowsIndex) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// indexedFS is a format-3 submission tree as protocol.LoadSubmissionFS
// gives it; opening the rows file fails the test (the gate must not read it).
type indexedFS struct {
	fstest.MapFS
	t     *testing.T
	index []byte
}

func (f indexedFS) RowsIndex() []byte { return f.index }

func (f indexedFS) Open(name string) (fs.File, error) {
	if name == "rows.jsonl" {
		f.t.Errorf("the gate opened the rows file of an indexed submission")
	}
	return f.MapFS.Open(name)
}

func (f indexedFS) ReadFile(name string) ([]byte, error) {
	return fs.ReadFile(struct{ fs.FS }{f}, name)
}

func TestRolloutsGateRowsIndex(t *testing.T) {
	ids := []string{"t1", "t2", "t3"}
	tree := func(meta string, index []byte) indexedFS {
		return indexedFS{MapFS: fstest.MapFS{"submission.json": {Data: []byte(meta)}, "rows.jsonl": {Data: []byte(ixRows)}}, t: t, index: index}
	}
	lim := RolloutLimits{MaxRowBytes: 1024}
	vs, err := Rollouts(tree(ixMeta, mustIndex(t)), ids, lim)
	if err != nil || len(vs) != 0 {
		t.Fatalf("honest: %v %v", vs, err)
	}
	other := strings.Replace(ixMeta, "0123", "4567", 1)
	for name, c := range map[string]struct {
		fsys  indexedFS
		ids   []string
		rules []string
	}{
		"other task ids":          {tree(ixMeta, mustIndex(t)), []string{"t1", "t2", "t4"}, []string{RuleMissingTaskID, RuleUnknownTaskID}},
		"more task ids":           {tree(ixMeta, mustIndex(t)), []string{"t1", "t2", "t3", "t4"}, []string{RuleMissingTaskID}},
		"fewer task ids":          {tree(ixMeta, mustIndex(t)), []string{"t1", "t2"}, []string{RuleRowsIndex}},
		"another submission.json": {tree(other, mustIndex(t)), ids, []string{RuleRowsIndex}},
		"malformed index":         {tree(ixMeta, mustIndex(t)[:40]), ids, []string{RuleRowsIndex}},
	} {
		vs, err := Rollouts(c.fsys, c.ids, lim)
		var rules []string
		for _, v := range vs {
			rules = append(rules, v.Rule)
		}
		if err != nil || strings.Join(rules, " ") != strings.Join(c.rules, " ") {
			t.Errorf("%s: %v %v, want rules %v", name, vs, err, c.rules)
		}
	}
}

func FuzzParseRowsIndex(f *testing.F) {
	b := mustIndex(f)
	f.Add(b)
	f.Add(b[:len(b)-3])
	f.Add([]byte(RowsIndexMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := ParseRowsIndex(b, RowsIndexLimits{MaxRows: 64, MaxRowBytes: 1 << 10})
		if err != nil {
			if !errors.Is(err, ErrRowsIndex) {
				t.Fatalf("error not wrapping ErrRowsIndex: %v", err)
			}
			return
		}
		var end int64
		for i := 0; i < x.Len(); i++ {
			off, n := x.Span(i)
			if off != end || n < 2 || n > 1<<10+1 {
				t.Fatalf("row %d: span %d+%d after %d", i, off, n, end)
			}
			end += int64(n)
			if j, ok := x.Find(x.TaskID(i)); !ok || j != i {
				t.Fatalf("Find(TaskID(%d)) = %d %v", i, j, ok)
			}
			if _, err := ParseReward(x.Reward(i)); err != nil {
				t.Fatal(err)
			}
			x.CheckRow(i, make([]byte, n))
		}
		if end != x.RowsSize() {
			t.Fatalf("rows end at %d of %d", end, x.RowsSize())
		}
	})
}
