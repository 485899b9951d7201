package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/gate"
	protocol "github.com/feval/feval/protocol/rollouts"
	"github.com/opencontainers/go-digest"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdGenRollouts writes a generated rollouts task of MATH math and IF
// instruction-following rows, with the reference seeds, and the submission of
// every fixture miner kind: genrollouts DIR MATH IF [MODELDIR]. It writes
// DIR/task/ and DIR/miners/<kind>/, as the genrollouts command does, without
// its process start-up. With MODELDIR, the task binds rows to a model: the
// reference tiny model is written into MODELDIR and the task names its
// tokenizer.
func cmdGenRollouts(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 && len(args) != 4 {
		ts.Fatalf("usage: genrollouts DIR MATH IF [MODELDIR]")
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
	if len(args) == 4 {
		f := tinyModel(ts)
		ts.Check(f.Write(ts.MkAbs(args[3])))
		g.Spec.Model = &protocol.ModelSpec{Architecture: protocol.ArchitectureQwen3, Tokenizer: digest.FromBytes(f.Tokenizer), MaxWeightsBytes: 1 << 30}
	}
	ts.Check(rollouts.WriteTask(filepath.Join(dir, "task"), g.Spec, g.Items))
	_, err = rollouts.WriteMiners(filepath.Join(dir, "miners"), g, []byte(rollouts.ReferenceMinerSeed))
	ts.Check(err)
}

// cmdSetRevision sets the model_revision of a rollouts submission directory
// to the digest in a file (the output of feval pack): setrevision DIR FILE.
func cmdSetRevision(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: setrevision DIR FILE")
	}
	p := ts.MkAbs(filepath.Join(args[0], gate.RolloutSubmissionFile))
	var sub gate.RolloutSubmission
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(p)), &sub))
	sub.ModelRevision = strings.TrimSpace(ts.ReadFile(args[1]))
	b, err := json.Marshal(sub)
	ts.Check(err)
	ts.Check(os.WriteFile(p, b, 0o644))
}
