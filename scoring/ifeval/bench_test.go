package ifeval

import (
	"strings"
	"testing"
)

// benchResponse is a typical 200-word response: a title, three paragraphs of
// sentences, two bullets and a closing phrase.
func benchResponse() string {
	var b strings.Builder
	b.WriteString("<<Notes on River Valleys>>\n\n")
	sentence := "The quiet river carries fine silt across the wide valley floor every spring. "
	for p := 0; p < 3; p++ {
		for s := 0; s < 5; s++ {
			b.WriteString(sentence)
		}
		b.WriteString("\n\n")
	}
	b.WriteString("* Farmers plant early in the season.\n* Floods renew the soil.\n\nAny other questions?")
	return b.String()
}

func BenchmarkEvaluate(b *testing.B) {
	resp := benchResponse()
	if n := CountWords(resp); n < 180 || n > 220 {
		b.Fatalf("bench response has %d words, want about 200", n)
	}
	ids := []string{LengthNumberWords, KeywordsExistence, StartEndEndChecker}
	kws := []map[string]any{
		{"num_words": 150, "relation": "at least"},
		{"keywords": []any{"valley", "soil"}},
		{"end_phrase": "Any other questions?"},
	}
	b.ReportAllocs()
	for b.Loop() {
		strict, _, err := Evaluate("p", resp, ids, kws)
		if err != nil || !strict[0] || !strict[1] || !strict[2] {
			b.Fatalf("unexpected result %v %v", strict, err)
		}
	}
}

// BenchmarkEvaluateHeavy uses the three slowest checks on the same response.
func BenchmarkEvaluateHeavy(b *testing.B) {
	resp := benchResponse()
	ids := []string{LengthNumberSentences, CaseCapitalWordFrequency, KeywordsForbiddenWords}
	kws := []map[string]any{
		{"num_sentences": 30, "relation": "less than"},
		{"capital_frequency": 2, "capital_relation": "at least"},
		{"forbidden_words": []any{"desert", "mountain", "ocean"}},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Evaluate("p", resp, ids, kws); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReward(b *testing.B) {
	resp := benchResponse()
	ids := []string{LengthNumberWords, KeywordsExistence, StartEndEndChecker}
	kws := []map[string]any{
		{"num_words": 150, "relation": "at least"},
		{"keywords": []any{"valley", "soil"}},
		{"end_phrase": "Any other questions?"},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Reward("p", resp, ids, kws); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCountSentences(b *testing.B) {
	resp := benchResponse()
	b.SetBytes(int64(len(resp)))
	for b.Loop() {
		if CountSentences(resp) < 15 {
			b.Fatal("too few sentences")
		}
	}
}

func BenchmarkCountCapitalWords(b *testing.B) {
	resp := strings.ToUpper(benchResponse())
	b.SetBytes(int64(len(resp)))
	for b.Loop() {
		if CountCapitalWords(resp) < 150 {
			b.Fatal("too few capital words")
		}
	}
}
