package main

import (
	"strconv"
	"strings"

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
// FEVAL_METER_UPSTREAM to it: fixtureupstream [max_concurrent=N]
// [latency_millis=N] (a provider that answers 429 past N calls at once; a
// first byte N ms late).
func cmdFixtureUpstream(ts *testscript.TestScript, neg bool, args []string) {
	usage := "usage: fixtureupstream [max_concurrent=N] [latency_millis=N]"
	if neg {
		ts.Fatalf("%s", usage)
	}
	scripts, err := scenariotask.Scripts()
	ts.Check(err)
	opts := upstream.Options{Scripts: scripts}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0:
			ts.Fatalf("%s", usage)
		case k == "max_concurrent":
			opts.Faults.MaxConcurrent = n
		case k == "latency_millis":
			opts.LatencyMillis = n
		default:
			ts.Fatalf("%s", usage)
		}
	}
	url, stop, err := upstream.Start(upstream.New(opts))
	ts.Check(err)
	ts.Defer(stop)
	ts.Setenv("FEVAL_METER_UPSTREAM", url)
}
