package ifeval_test

import (
	"slices"
	"testing"

	"github.com/feval/feval/fixtures/ifgen"
	"github.com/feval/feval/internal/detrand"
	"github.com/feval/feval/scoring/ifeval"
)

// TestGeneratedResponsesMatchNLTK runs the NLTK oracle on the responses the
// reference task's generator writes (titles, bullets, sections, postscripts,
// quotes, capitals), both following and breaking their instructions.
func TestGeneratedResponsesMatchNLTK(t *testing.T) {
	var texts []string
	for _, p := range ifgen.Generate([]byte("feval/ifeval/oracle/v1"), 150) {
		src := detrand.New("feval/ifeval/oracle/respond", []byte(p.ID))
		texts = append(texts, ifgen.Respond(p, true, src), ifgen.Respond(p, false, src))
	}
	ref := ifeval.RunOracle(t, texts)
	for i, s := range texts {
		if got := ifeval.Sentences(s); !slices.Equal(got, ref[i].Sentences) {
			t.Errorf("Sentences(%q)\n got %q\nwant %q (NLTK)", s, got, ref[i].Sentences)
		}
		if n := ifeval.CountWords(s); n != ref[i].Words {
			t.Errorf("CountWords(%q) = %d, IFEval %d", s, n, ref[i].Words)
		}
		if got := ifeval.WordTokens(s); !slices.Equal(got, ref[i].Tokens) {
			t.Errorf("WordTokens(%q)\n got %q\nwant %q (NLTK)", s, got, ref[i].Tokens)
		}
	}
}
