package ifeval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The reference implementation runs as a differential oracle: Debian's
// /usr/bin/python3 with python3-nltk computes IFEval's text measures with
// NLTK's own code (testdata/nltk_oracle.py) and the same Punkt model, and the
// Go port must agree on every text. A machine without python3-nltk fails these
// tests: `make debian-deps` installs it.

const referencePython = "/usr/bin/python3"

// requireNLTK fails the test, with what to do, when the reference cannot run.
func requireNLTK(t *testing.T) {
	t.Helper()
	out, err := exec.Command(referencePython, "-c", "import nltk.tokenize.punkt, nltk.tokenize.destructive").CombinedOutput()
	if err != nil {
		t.Fatalf("the NLTK reference oracle needs Debian's python3-nltk (run `make debian-deps` or `apt-get install python3-nltk`): %v\n%s", err, out)
	}
}

type oracleResult struct {
	Sentences []string `json:"sentences"`
	Words     int      `json:"words"`
	Tokens    []string `json:"tokens"`
	Capital   []string `json:"capital"`
	IsUpper   bool     `json:"isupper"`
	IsLower   bool     `json:"islower"`
}

// runOracle computes the reference results for texts.
func runOracle(t *testing.T, texts []string) []oracleResult {
	t.Helper()
	requireNLTK(t)
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, s := range texts {
		if err := enc.Encode(map[string]string{"text": s}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(referencePython, filepath.Join("testdata", "nltk_oracle.py"), filepath.Join("punkt", "english"))
	cmd.Stdin = &in
	cmd.Env = append(os.Environ(), "PYTHONIOENCODING=utf-8", "PYTHONHASHSEED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running the NLTK oracle: %v\n%s", err, stderr.Bytes())
	}
	var res []oracleResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r oracleResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("oracle output: %v", err)
		}
		res = append(res, r)
	}
	if len(res) != len(texts) {
		t.Fatalf("oracle answered %d of %d texts", len(res), len(texts))
	}
	return res
}

// oracleTexts is the size of the differential corpus, recorded with the
// agreement in docs/PROTOCOL.md.
const oracleTexts = 274

// oracleCorpus is the differential corpus: hand-written responses (numbered
// lists, abbreviations, ellipses, quotes, several scripts) and every response of
// the IFEval vectors.
func oracleCorpus(t *testing.T) []string {
	t.Helper()
	var texts []string
	b, err := os.ReadFile(filepath.Join("testdata", "sentence_corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var v struct{ Text string }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("sentence corpus: %v", err)
		}
		texts = append(texts, v.Text)
	}
	for _, v := range loadVectors(t) {
		texts = append(texts, v.Response)
	}
	if len(texts) != oracleTexts {
		t.Fatalf("the oracle corpus has %d texts; docs/PROTOCOL.md records agreement on %d", len(texts), oracleTexts)
	}
	return texts
}

func TestSentencesMatchNLTK(t *testing.T) {
	texts := oracleCorpus(t)
	ref := runOracle(t, texts)
	multi := 0
	for i, s := range texts {
		got := Sentences(s)
		if len(got) > 1 {
			multi++
		}
		if !slices.Equal(got, ref[i].Sentences) {
			t.Errorf("Sentences(%q)\n got %q\nwant %q (NLTK)", s, got, ref[i].Sentences)
		}
		if n := CountSentences(s); n != len(ref[i].Sentences) {
			t.Errorf("CountSentences(%q) = %d, NLTK %d", s, n, len(ref[i].Sentences))
		}
	}
	if multi < len(texts)/3 {
		t.Fatalf("only %d of %d texts have several sentences: the corpus does not exercise the tokenizer", multi, len(texts))
	}
}

func TestWordsAndCaseMatchPython(t *testing.T) {
	texts := oracleCorpus(t)
	ref := runOracle(t, texts)
	for i, s := range texts {
		if n := CountWords(s); n != ref[i].Words {
			t.Errorf("CountWords(%q) = %d, IFEval (\\w+) %d", s, n, ref[i].Words)
		}
		if got := WordTokens(s); !slices.Equal(got, ref[i].Tokens) {
			t.Errorf("WordTokens(%q)\n got %q\nwant %q (NLTK word_tokenize)", s, got, ref[i].Tokens)
		}
		if n := CountCapitalWords(s); n != len(ref[i].Capital) {
			t.Errorf("CountCapitalWords(%q) = %d, IFEval %d %q", s, n, len(ref[i].Capital), ref[i].Capital)
		}
		if got := isUpperText(s); got != ref[i].IsUpper {
			t.Errorf("isUpperText(%q) = %v, Python %v", s, got, ref[i].IsUpper)
		}
		if got := isLowerText(s); got != ref[i].IsLower {
			t.Errorf("isLowerText(%q) = %v, Python %v", s, got, ref[i].IsLower)
		}
	}
}

// TestPythonCharacterClasses compares the character predicates with Python's
// on every code point both Unicode versions assign.
func TestPythonCharacterClasses(t *testing.T) {
	requireNLTK(t)
	out, err := exec.Command(referencePython, filepath.Join("testdata", "nltk_oracle.py"), "--chars").Output()
	if err != nil {
		t.Fatalf("python character table: %v", err)
	}
	if len(out) != unicode.MaxRune+1 {
		t.Fatalf("python character table has %d entries", len(out))
	}
	preds := []struct {
		name string
		bit  byte
		f    func(rune) bool
	}{
		{`\w`, 1 << 0, pyIsWord}, {`\d`, 1 << 1, pyIsDecimal}, {"isupper", 1 << 2, func(r rune) bool { return pyIsUpper(r) && !pyIsLower(r) && !pyIsTitle(r) }},
		{"islower", 1 << 3, func(r rune) bool { return pyIsLower(r) && !pyIsUpper(r) && !pyIsTitle(r) }},
		{"istitle", 1 << 4, pyIsTitle}, {`\s`, 1 << 5, IsSpace},
	}
	// Other_Lowercase since Unicode 15.0 (Go's tables); Python 3.11's Unicode
	// 14.0 does not have them yet, Python 3.12 does.
	unicode15Lower := map[rune]bool{0x10FC: true, 0xA7F2: true, 0xA7F3: true, 0xA7F4: true, 0xAB69: true}
	checked, bad := 0, 0
	for c := rune(0); c <= unicode.MaxRune; c++ {
		if out[c]&(1<<6) == 0 || !utf8.ValidRune(c) || !(unicode.IsPrint(c) || unicode.IsControl(c) || unicode.In(c, unicode.Cf, unicode.Co, unicode.Zl, unicode.Zp, unicode.Zs, unicode.M)) {
			continue // unassigned in Python's Unicode version or in Go's, or a surrogate
		}
		checked++
		for _, p := range preds {
			got, want := p.f(c), out[c]&p.bit != 0
			if p.name == "islower" && unicode15Lower[c] && got {
				continue
			}
			if got != want && bad < 20 {
				bad++
				t.Errorf("U+%04X %s: Go %v, Python %v", c, p.name, got, want)
			}
		}
	}
	if checked < 140000 {
		t.Fatalf("only %d code points compared", checked)
	}
}
