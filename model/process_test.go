package model_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/feval/feval/model"
)

// TestExternalRuntime runs model/testdata/qwen3_torch.py --serve as an
// external runtime: torch generating with the seeded sampler through the
// process protocol. Its completions must pass the reference runtime's check,
// the conformance every runtime is held to, and here they are the reference
// runtime's own completions (no near tie on these rows). A runtime that
// breaks the protocol is an error, not a completion.
func TestExternalRuntime(t *testing.T) {
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s has no torch (make debian-deps installs python3-torch): %v", python, err)
	}
	m, f := tiny(t)
	dir := t.TempDir()
	if err := f.Write(dir); err != nil {
		t.Fatal(err)
	}
	p, err := model.StartProcess([]string{python, "testdata/qwen3_torch.py", "--serve", dir}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var g model.Generator = p
	for i := range 4 {
		pr, in := prompt(t, m, i), seedFor(string(rune('e'+i)))
		out, err := g.Generate(pr, in, sampling)
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.Check(pr, out, in, sampling)
		if err != nil || r.Outcome != model.CheckOK {
			t.Fatalf("row %d from the external runtime: %+v %v", i, r, err)
		}
		ref, _ := m.Generate(pr, in, sampling)
		if !slices.Equal(out, ref) {
			t.Errorf("row %d: the external runtime generated %v, the reference %v", i, out, ref)
		}
	}
	// A request the runtime cannot serve comes back as an error, and the
	// runtime goes on.
	if _, err := g.Generate([]int{m.Config.VocabSize + 5}, seedFor("x"), sampling); !errors.Is(err, model.ErrRuntime) {
		t.Errorf("an id outside the vocabulary: %v, want ErrRuntime", err)
	}
	if _, err := g.Generate(prompt(t, m, 0), seedFor("y"), sampling); err != nil {
		t.Errorf("after a failed request: %v", err)
	}

	// A runtime that answers something else than the protocol.
	bad := filepath.Join(t.TempDir(), "bad.sh")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\nwhile read l; do echo '{\"completion\":[-1]}'; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := model.StartProcess([]string{bad}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Generate(prompt(t, m, 0), seedFor("z"), sampling); !errors.Is(err, model.ErrRuntime) {
		t.Errorf("a negative token id: %v, want ErrRuntime", err)
	}
}
