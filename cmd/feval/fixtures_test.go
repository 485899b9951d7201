package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/feval/feval/fixtures/rollouts"
	"github.com/feval/feval/fixtures/tinymodel"
	"github.com/feval/feval/gate"
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
		// The tokenizer learns the task's prompts, as a real one knows the
		// language: the model's random text then holds words.
		var corpus []string
		for _, it := range g.Items {
			corpus = append(corpus, it.Prompt)
		}
		f, err := tinymodel.Generate(tinymodel.ReferenceSeed, corpus, tinymodel.ReferenceShape)
		ts.Check(err)
		ts.Check(f.Write(ts.MkAbs(args[3])))
		m, err := f.Load()
		ts.Check(err)
		ts.Check(rollouts.BindModel(g, m, rollouts.ReferenceSampling, 1<<30))
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

// cmdSwapToken replaces the first completion token of the first row of a
// generated rollouts submission by the next byte token: swaptoken DIR.
func cmdSwapToken(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: swaptoken DIR")
	}
	p := ts.MkAbs(filepath.Join(args[0], "rows.jsonl"))
	lines := strings.SplitAfter(ts.ReadFile(p), "\n")
	r, rerr := gate.ParseRow([]byte(strings.TrimSuffix(lines[0], "\n")))
	if rerr != nil || len(r.CompletionTokens) == 0 {
		ts.Fatalf("swaptoken: the first row is not a token row with a completion: %v", rerr)
	}
	r.CompletionTokens[0] = (r.CompletionTokens[0] + 1) % 256
	b, err := json.Marshal(r)
	ts.Check(err)
	lines[0] = string(b) + "\n"
	ts.Check(os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644))
}
