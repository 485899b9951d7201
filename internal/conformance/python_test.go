package conformance_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/feval/feval/internal/conformance"
)

// python is Debian's interpreter; the second verifier needs its
// python3-cryptography package, and python3-torch for the model-bound
// vectors (make debian-deps installs both).
const python = "/usr/bin/python3"

var pyVerifier = filepath.Join("python", "fevalverify.py")

// outOfScope are the vectors the second verifier cannot decide, each for a
// reason it names: a drand signature's BLS12-381 check, and math answers that
// are not plain numbers.
var outOfScope = []string{"beacon-bad-signature", "differs-undetermined-row", "rollouts-undetermined"}

func requirePython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing: run make debian-deps", python)
	}
	if out, err := exec.Command(python, "-c", "import cryptography.hazmat.primitives.asymmetric.ec, torch").CombinedOutput(); err != nil {
		t.Fatalf("python3-cryptography or python3-torch is missing (run make debian-deps): %v\n%s", err, out)
	}
}

func runPy(t *testing.T, dir string) (string, error) {
	t.Helper()
	cmd := exec.Command(python, pyVerifier, dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if errb.Len() > 0 {
		t.Logf("stderr: %s", errb.String())
	}
	return out.String(), err
}

// TestSecondVerifier runs the independent Python verifier, written against
// the documents, over every vector: it must reach every header's outcome
// (recomputing the audited rewards itself) and may leave out only the
// vectors it names as out of its scope.
func TestSecondVerifier(t *testing.T) {
	requirePython(t)
	out, err := runPy(t, vectorsDir)
	if err != nil {
		t.Fatalf("second verifier: %v\n%s", err, out)
	}
	results := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		verdict, rest, _ := strings.Cut(line, " ")
		name, _, _ := strings.Cut(rest, ":")
		results[name] = verdict
	}
	for _, v := range vectors(t) {
		want := "PASS"
		if slices.Contains(outOfScope, v.Name) {
			want = "SKIP"
		}
		if results[v.Name] != want {
			t.Errorf("%s: second verifier says %q, want %s\n%s", v.Name, results[v.Name], want, out)
		}
	}
	t.Logf("second verifier:\n%s", out)
}

// TestSecondVerifierDisagrees: the second verifier fails a vector whose
// header states another outcome than the vector holds, so passing means it
// did decide.
func TestSecondVerifierDisagrees(t *testing.T) {
	requirePython(t)
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, conformance.KeysDir), os.DirFS(filepath.Join(vectorsDir, conformance.KeysDir))); err != nil {
		t.Fatal(err)
	}
	for name, wrong := range map[string]string{
		"differs-claimed-score": conformance.ExpectIdentical,
		"rollouts-passed-plain": conformance.ExpectDiffersAt + " status",
		"signature-untrusted":   conformance.ExpectIdentical,
		"digest-verdict-record": conformance.ExpectSignatureFailure,
		"model-near-tie-inside": conformance.ExpectDiffersAt + " status",
	} {
		if err := os.CopyFS(filepath.Join(dir, name), os.DirFS(filepath.Join(vectorsDir, name))); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name, conformance.HeaderFile)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		v, err := conformance.ParseHeader(name, b)
		if err != nil {
			t.Fatal(err)
		}
		v.Expect = wrong
		if err := os.WriteFile(p, v.Header(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runPy(t, dir)
	if err == nil {
		t.Fatalf("second verifier accepted wrong expectations:\n%s", out)
	}
	if n := strings.Count(out, "FAIL "); n != 5 {
		t.Fatalf("second verifier failed %d of 5 wrong expectations:\n%s", n, out)
	}
}

// TestSecondVerifierRewardRules: the second verifier's answer extraction
// (REWARDS.md §2.2) and reward rules (§2.5 and five instruction types of
// §3.3) agree with the normative vector files on every case they cover.
func TestSecondVerifierRewardRules(t *testing.T) {
	requirePython(t)
	out, err := exec.Command(python, pyVerifier, "--reward-vectors", filepath.Join("..", "..", "scoring", "testdata")).CombinedOutput()
	if err != nil {
		t.Fatalf("second verifier on the reward vectors: %v\n%s", err, out)
	}
	var n, fails int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "checked %d reward vectors, %d failures", &n, &fails); err != nil || n < 100 || fails != 0 {
		t.Fatalf("second verifier on the reward vectors: %s", out)
	}
}

// readingVectors are consensus's reading vectors (CONSENSUS.md 8.2, 9).
var readingVectors = filepath.Join("..", "..", "scoring", "testdata", "consensus_reading_vectors.json")

// TestSecondVerifierReadsVerdicts: the second verifier, reading verdicts by
// CONSENSUS.md 8.2 and the schemas alone, reaches every reading vector's
// outcome, and fails a copy of the vectors whose expectations are wrong.
func TestSecondVerifierReadsVerdicts(t *testing.T) {
	requirePython(t)
	run := func(path string) (string, error) {
		out, err := exec.Command(python, pyVerifier, "--reading-vectors", path, schemaDir).CombinedOutput()
		return string(out), err
	}
	out, err := run(readingVectors)
	var n, fails int
	if _, serr := fmt.Sscanf(strings.TrimSpace(out), "checked %d reading vectors, %d failures", &n, &fails); err != nil || serr != nil || n < 30 || fails != 0 {
		t.Fatalf("second verifier on the reading vectors: %v\n%s", err, out)
	}

	b, err := os.ReadFile(readingVectors)
	if err != nil {
		t.Fatal(err)
	}
	var vs []map[string]any
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	flipped := 0
	for _, v := range vs {
		e := v["expect"].(map[string]any)
		switch {
		case e["exclude"] == "malformed" && e["reveal"] != "":
			e["reveal"] = "" // as if the record could not be read at all
		case e["exclude"] == "":
			e["exclude"], e["status"], e["score"] = "malformed", "", "0"
		default:
			continue
		}
		flipped++
	}
	wrong, err := json.Marshal(vs)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "wrong.json")
	if err := os.WriteFile(p, wrong, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(p)
	if err == nil || strings.Count(out, "FAIL ") != flipped {
		t.Fatalf("second verifier on %d wrong expectations: %v\n%s", flipped, err, out)
	}
}
