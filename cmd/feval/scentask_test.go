package main

import (
	"github.com/feval/feval/fixtures/scenariotask"
	"github.com/feval/feval/fixtures/upstream"
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
