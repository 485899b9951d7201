package main

import (
	"github.com/feval/feval/fixtures/optask"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdGenOptask writes the reference optimizer task: genoptask DIR.
func cmdGenOptask(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: genoptask DIR")
	}
	ts.Check(optask.Generate(ts.MkAbs(args[0]), optask.Config{}))
}
