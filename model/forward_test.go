package model_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"testing"

	"github.com/feval/feval/fixtures/tinymodel"
	"github.com/feval/feval/model"
)

// greedy runs the prompt of corpus line i and n tokens of greedy
// continuation through a fresh state, returning every token and the logits
// after each.
func greedy(t testing.TB, m *model.Model, i, n int) ([]int, [][]float32) {
	t.Helper()
	seq, err := m.Tokenizer.Encode(testCorpus[i])
	if err != nil {
		t.Fatal(err)
	}
	end := len(seq) + n
	st := m.NewState()
	var logits [][]float32
	for j := 0; j < len(seq); j++ {
		l := append([]float32(nil), st.Step(seq[j], true)...)
		logits = append(logits, l)
		if j == len(seq)-1 && len(seq) < end {
			seq = append(seq, argmax(l))
		}
	}
	return seq, logits
}

func argmax[F float32 | float64](l []F) int {
	best := 0
	for v := range l {
		if l[v] > l[best] {
			best = v
		}
	}
	return best
}

// logitsDigest is the SHA-256 of every logit's bits, in order.
func logitsDigest(ls [][]float32) string {
	h := sha256.New()
	var b [4]byte
	for _, l := range ls {
		for _, v := range l {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// corpusDigest runs every corpus line with 8 greedy tokens.
func corpusDigest(t testing.TB, m *model.Model) string {
	var all [][]float32
	for i := range testCorpus {
		_, ls := greedy(t, m, i, 8)
		all = append(all, ls...)
	}
	return logitsDigest(all)
}

// TestForwardDeterministic: the forward pass gives the same bits in two runs
// of one process, in a state reused or fresh, and in another process
// (FEVAL_MODEL_DIGEST_CHILD runs this test binary as the second process).
func TestForwardDeterministic(t *testing.T) {
	m, _ := tiny(t)
	d := corpusDigest(t, m)
	if os.Getenv("FEVAL_MODEL_DIGEST_CHILD") != "" {
		os.Stdout.WriteString("digest " + d + "\n")
		return
	}
	if again := corpusDigest(t, m); again != d {
		t.Fatalf("second run %s, first %s", again, d)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestForwardDeterministic$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FEVAL_MODEL_DIGEST_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("second process: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("digest "+d+"\n")) {
		t.Fatalf("another process gives other logits:\n%s\nwant digest %s", out, d)
	}
}

// TorchTolerance is the largest difference allowed between a logit of the
// reference runtime and the same logit of the plain-torch forward pass
// (testdata/qwen3_torch.py) on the test model: both are float32 and differ
// only in summation order and in how exp, rsqrt, sin and cos round.
const TorchTolerance = 1e-4

const python = "/usr/bin/python3"

// TestTorchCrossCheck: a plain-torch Qwen3 (Hugging Face semantics: q and k
// normed per head before the rotation, rotate-half RoPE, grouped-query
// attention) gives every logit of the test rows within TorchTolerance, and
// the same greedy choice at every position, tied and untied.
func TestTorchCrossCheck(t *testing.T) {
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s has no torch (make debian-deps installs python3-torch): %v", python, err)
	}
	tied, tiedFiles := tiny(t)
	sh := tinymodel.ReferenceShape
	sh.Merges = 64
	untiedFiles, err := tinymodel.Generate("model-test-untied", testCorpus, sh)
	if err != nil {
		t.Fatal(err)
	}
	untied, err := untiedFiles.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		m     *model.Model
		files tinymodel.Files
	}{{"tied", tied, tiedFiles}, {"untied", untied, untiedFiles}} {
		t.Run(c.name, func(t *testing.T) { torchAgrees(t, c.m, c.files) })
	}
}

// runTorch sends req to testdata/qwen3_torch.py as JSON and decodes its
// answer into out.
func runTorch(t testing.TB, req, out any) {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "testdata/qwen3_torch.py")
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if b, err = cmd.Output(); err != nil {
		t.Fatalf("qwen3_torch.py: %v\n%s", err, stderr.Bytes())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("qwen3_torch.py answered %.200s: %v", b, err)
	}
}

func torchAgrees(t *testing.T, m *model.Model, f tinymodel.Files) {
	dir := t.TempDir()
	if err := f.Write(dir); err != nil {
		t.Fatal(err)
	}
	var rows [][]int
	var goLogits [][][]float32
	for i := range testCorpus {
		seq, ls := greedy(t, m, i, 8)
		rows, goLogits = append(rows, seq), append(goLogits, ls)
	}
	// Seeded rows: torch's logits, perturbed with the protocol's noise, must
	// choose every token the reference runtime's generation chose.
	type seeded struct {
		row, promptLen int
		in             model.SeedInput
		completion     []int
	}
	var seededRows []seeded
	for i := range testCorpus {
		p := prompt(t, m, i)
		in := seedFor(fmt.Sprintf("torch-%d", i))
		out, err := m.Generate(p, in, sampling)
		if err != nil {
			t.Fatal(err)
		}
		seededRows = append(seededRows, seeded{row: len(rows), promptLen: len(p), in: in, completion: out})
		rows = append(rows, append(append([]int(nil), p...), out...))
		goLogits = append(goLogits, nil)
	}
	var got struct {
		Rows [][][]float64 `json:"rows"`
	}
	runTorch(t, map[string]any{"dir": dir, "rows": rows}, &got)
	if len(got.Rows) != len(rows) {
		t.Fatalf("torch gave %d rows, want %d", len(got.Rows), len(rows))
	}
	choices := 0
	for _, sr := range seededRows {
		r := got.Rows[sr.row]
		V := m.Config.VocabSize
		g, scores, l32 := make([]float64, V), make([]float64, V), make([]float32, V)
		for k, tok := range sr.completion {
			pos := sr.promptLen - 1 + k
			if pos >= len(r) || len(r[pos]) != V {
				t.Fatalf("seeded row %d: torch gave no logits at position %d", sr.row, pos)
			}
			for v, l := range r[pos] {
				l32[v] = float32(l)
			}
			model.Noise(model.PositionKey(sr.in, k), g)
			model.Scores(l32, g, sampling.TemperatureMilli, scores)
			if c := model.Choice(scores); c != tok {
				t.Errorf("seeded row %d completion position %d: torch's logits choose %d, the reference runtime chose %d (margin %d micro)",
					sr.row, k, c, tok, model.MarginMicro(scores, c, tok))
			}
			choices++
		}
	}
	t.Logf("%d seeded choices agree", choices)
	var worst float64
	for i, r := range got.Rows {
		if goLogits[i] == nil {
			continue // a seeded row
		}
		if len(r) != len(goLogits[i]) {
			t.Fatalf("row %d: torch gave %d positions, want %d", i, len(r), len(goLogits[i]))
		}
		for pos, ls := range r {
			for v, l := range ls {
				worst = math.Max(worst, math.Abs(l-float64(goLogits[i][pos][v])))
			}
			if best, goBest := argmax(ls), argmax(goLogits[i][pos]); best != goBest {
				t.Errorf("row %d position %d: torch's greedy choice %d, the reference's %d", i, pos, best, goBest)
			}
		}
	}
	if worst > TorchTolerance {
		t.Fatalf("logits differ by up to %g, tolerance %g", worst, TorchTolerance)
	}
	t.Logf("largest logit difference %.3g over %d greedy rows", worst, len(rows)-len(seededRows))
}
