package main

import (
	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/fixtures/upstream"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdGenScentask writes the reference scenarios task (or a task of the named
// scenarios) and its hidden tests: genscentask DIR HIDDEN [SCENARIO...].
func cmdGenScentask(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: genscentask DIR HIDDEN [SCENARIO...]")
	}
	ts.Check(scenariotask.Generate(ts.MkAbs(args[0]), ts.MkAbs(args[1]), scenariotask.Config{Scenarios: args[2:]}))
}

// cmdFixtureUpstream serves the fixture upstream with the reference
// scenarios' scripts for the rest of the script and sets
// FEVAL_METER_UPSTREAM to it: fixtureupstream.
func cmdFixtureUpstream(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: fixtureupstream")
	}
	scripts, err := scenariotask.Scripts()
	ts.Check(err)
	url, stop, err := upstream.Start(upstream.New(upstream.Options{Scripts: scripts}))
	ts.Check(err)
	ts.Defer(stop)
	ts.Setenv("FEVAL_METER_UPSTREAM", url)
}
