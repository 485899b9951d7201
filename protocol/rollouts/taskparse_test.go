package rollouts_test

import (
	"bytes"
	"reflect"
	"testing"
	"testing/fstest"

	fx "github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/internal/strictjson"
	"github.com/feval/feval/protocol/rollouts"
)

// TestParseItemTakesGeneratedTasks: every line of a generated task has the
// plain form, so loading a task never needs the reflective decoder, and
// gives what it gives.
func TestParseItemTakesGeneratedTasks(t *testing.T) {
	g := fx.Generate([]byte(fx.ReferenceSeed), 200, 200)
	_, tasksJSONL, err := fx.EncodeTask(g.Spec, g.Items)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(tasksJSONL, []byte("\n")), []byte("\n")) {
		it, ok := rollouts.ParseItem(line)
		if !ok {
			t.Fatalf("line %d not taken: %s", i+1, line)
		}
		var want rollouts.Item
		if err := strictjson.Decode(line, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(it, want) {
			t.Fatalf("line %d: %+v, strictjson gives %+v", i+1, it, want)
		}
	}
}

// itemSeeds are lines of the forms task files have, and near misses.
var itemSeeds = []string{
	`{"task_id":"math-00000","kind":"math","prompt":"What is $2+2$? Put your final answer within \\boxed{}.","answer":"4"}`,
	`{"task_id":"if-1","kind":"if","prompt":"p","instruction_id_list":["a:b","c"],"kwargs":[{},{"keywords":["x","y"]},{"n":5,"rel":"less than","f":-1.5e3,"ok":true,"no":false}]}`,
	` { "task_id" : "a\u00e9\n\t\"\\\/\b\f\r" , "kind" : "math" } `,
	`{"task_id":"a","kind":"if","kwargs":[],"instruction_id_list":[]}`,
	`{}`,
	`{"task_id":"a","task_id":"b"}`,
	`{"Task_ID":"a"}`,
	`{"task_id":"a","extra":1}`,
	`{"task_id":"\ud83d\ude00"}`,
	`{"task_id":"\ud800"}`,
	`{"task_id":null}`,
	`{"task_id":"a","kwargs":[{"k":null}]}`,
	`{"task_id":"a","kwargs":[{"k":{"x":1}}]}`,
	`{"task_id":"a","kwargs":[{"k":[[1]]}]}`,
	`{"task_id":"a","kwargs":[{"k":1,"k":2}]}`,
	`{"task_id":"a","kwargs":[{"k":01}]}`,
	`{"task_id":"a","kwargs":[{"k":-}]}`,
	`{"task_id":"a","kwargs":[{"k":1.}]}`,
	`{"task_id":"a","kwargs":[{"k":truex}]}`,
	`{"task_id":"a"} x`,
	`{"task_id":"a",}`,
	`[]`,
	"{\"task_id\":\"a\xff\"}",
	"{\"task_id\":\"a\x01\"}",
	`{"task_id":5}`,
	`{"answer":"\u0041\u00"}`,
}

// FuzzParseItem checks the single-pass parser against strictjson, the
// decoder it stands in for: a line it takes, strictjson accepts, with the
// very same value (json.Number for numbers, empty lists and maps as such);
// a line it does not take goes to strictjson, so accept/reject and errors
// are strictjson's by construction.
func FuzzParseItem(f *testing.F) {
	for _, s := range itemSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		it, ok := rollouts.ParseItem(line)
		if !ok {
			if !reflect.DeepEqual(it, rollouts.Item{}) {
				t.Fatalf("a line not taken still gave %+v", it)
			}
			return
		}
		var want rollouts.Item
		if err := strictjson.Decode(line, &want); err != nil {
			t.Fatalf("taken, but strictjson rejects it: %v", err)
		}
		if !reflect.DeepEqual(it, want) {
			t.Fatalf("%+v, strictjson gives %+v", it, want)
		}
	})
}

// TestParseItemPlainForms: the plain forms (escapes, numbers, booleans,
// empty lists and objects, whitespace) are taken; the rest is left to
// strictjson.
func TestParseItemPlainForms(t *testing.T) {
	for i, s := range itemSeeds {
		_, ok := rollouts.ParseItem([]byte(s))
		if want := i < 5; ok != want {
			t.Errorf("%s: taken %v, want %v", s, ok, want)
		}
	}
}

// BenchmarkLoadTask parses the reference task (10,000 items) from its
// files, the task caches emptied first: the parse a process pays once.
func BenchmarkLoadTask(b *testing.B) {
	g := fx.Generate([]byte(fx.ReferenceSeed), fx.ReferenceMath, fx.ReferenceIF)
	taskJSON, tasksJSONL, err := fx.EncodeTask(g.Spec, g.Items)
	if err != nil {
		b.Fatal(err)
	}
	fsys := fstest.MapFS{rollouts.TaskFile: {Data: taskJSON}, rollouts.TasksFile: {Data: tasksJSONL}}
	b.SetBytes(int64(len(tasksJSONL)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rollouts.ForgetTasks()
		if _, err := rollouts.LoadTask(fsys); err != nil {
			b.Fatal(err)
		}
	}
}
