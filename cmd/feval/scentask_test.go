package main

import (
	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdGenScentask writes the reference scenarios task, or a task of the named
// scenarios: genscentask DIR [SCENARIO...].
func cmdGenScentask(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: genscentask DIR [SCENARIO...]")
	}
	ts.Check(scenariotask.Generate(ts.MkAbs(args[0]), scenariotask.Config{Scenarios: args[1:]}))
}
