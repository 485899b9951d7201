package main

import (
	"github.com/feval/feval/fixtures/optask"
	"github.com/feval/feval/fixtures/tinymodel"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdGenOptask writes the reference optimizer task: genoptask DIR.
func cmdGenOptask(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: genoptask DIR")
	}
	ts.Check(optask.Generate(ts.MkAbs(args[0]), optask.Config{}))
}

// cmdGenTinyModel writes the reference tiny Qwen3 model (fixtures/tinymodel),
// its tokenizer trained on a few sentences, into DIR: gentinymodel DIR.
func cmdGenTinyModel(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: gentinymodel DIR")
	}
	ts.Check(tinyModel(ts).Write(ts.MkAbs(args[0])))
}

// tinyModel is the reference tiny model, its tokenizer trained on a few
// sentences.
func tinyModel(ts *testscript.TestScript) tinymodel.Files {
	f, err := tinymodel.Generate(tinymodel.ReferenceSeed, []string{"What is 12 + 30?", "Write a short poem about the sea."}, tinymodel.ReferenceShape)
	ts.Check(err)
	return f
}
