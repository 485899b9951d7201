package main

import (
	"path/filepath"
	"strconv"

	"github.com/feval/feval/fixtures/rollouts"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdGenRollouts writes a generated rollouts task of MATH math and IF
// instruction-following rows, with the reference seeds, and the submission of
// every fixture miner kind: genrollouts DIR MATH IF. It writes DIR/task/ and
// DIR/miners/<kind>/, as the genrollouts command does, without its process
// start-up.
func cmdGenRollouts(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: genrollouts DIR MATH IF")
	}
	nMath, err := strconv.Atoi(args[1])
	ts.Check(err)
	nIF, err := strconv.Atoi(args[2])
	ts.Check(err)
	if nMath < 0 || nIF < 0 || nMath+nIF == 0 {
		ts.Fatalf("genrollouts: need MATH, IF >= 0 and MATH+IF > 0")
	}
	dir := ts.MkAbs(args[0])
	g := rollouts.Generate([]byte(rollouts.ReferenceSeed), nMath, nIF)
	ts.Check(rollouts.WriteTask(filepath.Join(dir, "task"), g.Spec, g.Items))
	_, err = rollouts.WriteMiners(filepath.Join(dir, "miners"), g, []byte(rollouts.ReferenceMinerSeed))
	ts.Check(err)
}
