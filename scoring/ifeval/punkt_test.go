package ifeval

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnglishModelLoads(t *testing.T) {
	m, err := englishPunkt()
	if err != nil {
		t.Fatal(err)
	}
	// the sizes recorded in punkt/PROVENANCE.md
	if len(m.abbrevTypes) != 156 || len(m.collocations) != 37 || len(m.sentStarters) != 39 || len(m.orthoContext) != 20366 {
		t.Fatalf("model sizes %d %d %d %d", len(m.abbrevTypes), len(m.collocations), len(m.sentStarters), len(m.orthoContext))
	}
	if !m.abbrevTypes[". . "] || !m.abbrevTypes["u.s"] || !m.sentStarters["however"] || m.orthoContext["the"] == 0 {
		t.Fatal("model lacks known entries")
	}
}

// TestModelFilesAreCanonical keeps the exported files in their documented form:
// sorted, unique, no blank lines, every line ending in a newline.
func TestModelFilesAreCanonical(t *testing.T) {
	for _, name := range []string{"abbrev_types.txt", "collocations.tab", "sent_starters.txt", "ortho_context.tab"} {
		b, err := os.ReadFile(filepath.Join("punkt", "english", name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 || b[len(b)-1] != '\n' {
			t.Fatalf("%s does not end in a newline", name)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		prev := ""
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if line == "" || (n > 1 && line <= prev) {
				t.Fatalf("%s line %d (%q) is blank or out of order", name, n, line)
			}
			prev = line
		}
	}
}

// TestSentencesHostileInput runs inputs built to make a careless tokenizer
// quadratic; each must finish and keep the sentence invariants.
func TestSentencesHostileInput(t *testing.T) {
	for _, s := range []string{
		strings.Repeat(". ", 50000),
		strings.Repeat("a.", 50000),
		strings.Repeat("!", 100000),
		"x." + strings.Repeat(" ", 100000) + "Y",
		strings.Repeat("Dr. e.g. 1. ", 15000),
		strings.Repeat(`"')]} `, 20000) + ".",
		strings.Repeat("-", 100000) + ". A",
		strings.Repeat(". .", 50000),
	} {
		checkSentenceInvariants(t, s)
	}
}

func checkSentenceInvariants(t *testing.T, s string) {
	t.Helper()
	spans := english().spans(s)
	end := 0
	for _, sp := range spans {
		if sp[0] < end || sp[1] < sp[0] || sp[1] > len(s) {
			t.Fatalf("spans %v out of order or out of range for %d bytes", sp, len(s))
		}
		end = sp[1]
	}
	if CountSentences(s) != len(spans) || len(Sentences(s)) != len(spans) {
		t.Fatal("CountSentences and Sentences disagree")
	}
	if strings.TrimFunc(s, IsSpace) != "" && len(spans) == 0 {
		t.Fatalf("no sentence in %q", s[:min(len(s), 40)])
	}
}

// FuzzSentences checks that the tokenizer never panics and that its sentences
// are ordered, non-overlapping pieces of the text that cover every
// non-whitespace character.
func FuzzSentences(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "sentence_corpus.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	seeds := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(seeds) < 80 {
		f.Fatal("sentence corpus seeds missing")
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkSentenceInvariants(t, s)
		covered := make([]bool, len(s))
		for _, sp := range english().spans(s) {
			for i := sp[0]; i < sp[1]; i++ {
				covered[i] = true
			}
		}
		for i, r := range s {
			if !IsSpace(r) && !covered[i] {
				t.Fatalf("byte %d (%q) of %q is in no sentence", i, r, s)
			}
		}
	})
}
