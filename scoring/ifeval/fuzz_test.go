package ifeval

import (
	"math/big"
	"regexp"
	"slices"
	"testing"
)

// ws is IsSpace as a regular-expression class (Unicode White_Space plus
// U+001C..U+001F), standing in for Python's \s in the reference patterns below.
const ws = `[\t-\r \x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]`

// Reference implementations with RE2, whose leftmost-first matching equals
// Python's re for these patterns. The hand-written scanners must agree with them.
var (
	rePlaceholder = regexp.MustCompile(`\[.*?\]`)
	reHighlight   = regexp.MustCompile(`\*[^\n\*]*\*`)
	reHighlight2  = regexp.MustCompile(`\*\*[^\n\*]*\*\*`)
	reBulletStar  = regexp.MustCompile(`(?m)^` + ws + `*\*[^\*].*$`)
	reBulletDash  = regexp.MustCompile(`(?m)^` + ws + `*-.*$`)
	reDivider     = regexp.MustCompile(ws + `?\*\*\*` + ws + `?`)
	reTitle       = regexp.MustCompile(`<<[^\n]+>>`)
	reSection     = regexp.MustCompile(ws + `?Sec` + ws + `?\p{Nd}+` + ws + `?`)
	rePS          = regexp.MustCompile(`p\.` + ws + `?s\.`)
	rePPS         = regexp.MustCompile(`p\.` + ws + `?p\.` + ws + `?s`)
	reWordRun     = regexp.MustCompile(`[\p{L}\p{N}_]+`)
)

func refHighlights(v string) int {
	n := 0
	for _, m := range reHighlight.FindAllString(v, -1) {
		if trimSpace(m[1:len(m)-1]) != "" {
			n++
		}
	}
	for _, m := range reHighlight2.FindAllString(v, -1) {
		if trimSpace(m[2:len(m)-2]) != "" {
			n++
		}
	}
	return n
}

func refTitle(v string) bool {
	for _, m := range reTitle.FindAllString(v, -1) {
		t := m
		for len(t) > 0 && t[0] == '<' {
			t = t[1:]
		}
		for len(t) > 0 && t[len(t)-1] == '>' {
			t = t[:len(t)-1]
		}
		if trimSpace(t) != "" {
			return true
		}
	}
	return false
}

func refWords(v string) int {
	return len(reWordRun.FindAllString(v, -1))
}

var fuzzSeeds = []string{
	"", "*", "**", "***", "****** x", "* a\n- b\n  * c", "*\nfoo\n* bar", "\n\n  * a\n\t- b",
	"[a] [b\n] [[c]]", "*one* and **two** ***three***", "A\n***\nB\n***\n", "a ***b*** c",
	"<<t>> <<u>>\n<<\n>>", "<<<>>>", "Sec 1 Sec2 Sec  3 Sec\u00a04 Sec١٢", "p.s. p. s. p.p.s P. P. S",
	"naïve\u0301 ́x हिन्दी 我喜欢", "a\xffb\xc3", "\u2028***\u3000", "-\n-\n-",
	"WELL-KNOWN A-b I- -X ǅA \u0301-Q ÉCOLE",
	"ab a-b AB-a-b é É éa x_1 X_1z",
}

// FuzzScanners checks every hand-written scanner against its regular-expression
// reference.
func FuzzScanners(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if got, want := countPlaceholders(v), len(rePlaceholder.FindAllStringIndex(v, -1)); got != want {
			t.Errorf("placeholders(%q) = %d, want %d", v, got, want)
		}
		if got, want := countHighlights(v), refHighlights(v); got != want {
			t.Errorf("highlights(%q) = %d, want %d", v, got, want)
		}
		if got, want := countLinePattern(v, true), len(reBulletStar.FindAllStringIndex(v, -1)); got != want {
			t.Errorf("star bullets(%q) = %d, want %d", v, got, want)
		}
		if got, want := countLinePattern(v, false), len(reBulletDash.FindAllStringIndex(v, -1)); got != want {
			t.Errorf("dash bullets(%q) = %d, want %d", v, got, want)
		}
		if got, want := splitDivider(v), reDivider.Split(v, -1); !slices.Equal(got, want) {
			t.Errorf("splitDivider(%q) = %q, want %q", v, got, want)
		}
		if got, want := checkTitle()(v), refTitle(v); got != want {
			t.Errorf("title(%q) = %v, want %v", v, got, want)
		}
		if got, want := countSections(v, "Sec"), len(reSection.FindAllStringIndex(v, -1)); got != want {
			t.Errorf("sections(%q) = %d, want %d", v, got, want)
		}
		if got, want := checkPostscript("P.S.")(v), rePS.MatchString(lowerASCIIOnly(v)); got != want && isASCII(v) {
			t.Errorf("P.S.(%q) = %v, want %v", v, got, want)
		}
		if got, want := checkPostscript("P.P.S")(v), rePPS.MatchString(lowerASCIIOnly(v)); got != want && isASCII(v) {
			t.Errorf("P.P.S(%q) = %v, want %v", v, got, want)
		}
		if got, max := CountCapitalWords(v), len(WordTokens(v)); got > max {
			t.Errorf("CountCapitalWords(%q) = %d of %d tokens", v, got, max)
		}
		for _, w := range []string{"ab", "a-b", "é", "x_1"} {
			fw := fold(w)
			if got, want := checkForbidden([]string{w})(v), !containsWord(fold(v), fw); got != want {
				t.Errorf("forbidden %q in %q = %v, want %v", w, v, got, want)
			}
		}
		if got, want := CountWords(v), refWords(v); got != want {
			t.Errorf("CountWords(%q) = %d, want %d", v, got, want)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func lowerASCIIOnly(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// fuzzInstructions exercises every supported type.
var fuzzInstructions = []struct {
	id string
	kw map[string]any
}{
	{KeywordsExistence, map[string]any{"keywords": []string{"the", "ß"}}},
	{KeywordsFrequency, map[string]any{"keyword": "a", "frequency": 2, "relation": "at least"}},
	{KeywordsForbiddenWords, map[string]any{"forbidden_words": []string{"x", "é"}}},
	{KeywordsLetterFrequency, map[string]any{"letter": "e", "let_frequency": 3, "let_relation": "less than"}},
	{LengthNumberSentences, map[string]any{"num_sentences": 2, "relation": "at least"}},
	{LengthNumberParagraphs, map[string]any{"num_paragraphs": 2}},
	{LengthNumberWords, map[string]any{"num_words": 5, "relation": "less than"}},
	{LengthNthParagraphFirst, map[string]any{"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "b"}},
	{ContentNumberPlaceholders, map[string]any{"num_placeholders": 1}},
	{ContentPostscript, map[string]any{"postscript_marker": "P.S."}},
	{FormatNumberBulletLists, map[string]any{"num_bullets": 2}},
	{FormatConstrainedResponse, nil},
	{FormatNumberHighlighted, map[string]any{"num_highlights": 1}},
	{FormatMultipleSections, map[string]any{"section_spliter": "Section", "num_sections": 1}},
	{FormatJSON, nil},
	{FormatTitle, nil},
	{CombinationTwoResponses, nil},
	{CombinationRepeatPrompt, map[string]any{"prompt_to_repeat": "Say a"}},
	{StartEndEndChecker, map[string]any{"end_phrase": "bye"}},
	{StartEndQuotation, nil},
	{CaseCapitalWordFrequency, map[string]any{"capital_frequency": 1, "capital_relation": "at least"}},
	{CaseEnglishCapital, nil},
	{CaseEnglishLowercase, nil},
	{PunctuationNoComma, nil},
}

// FuzzEvaluate checks that Evaluate never panics, is deterministic, that loose
// mode accepts whatever strict mode accepts, and that Reward counts strict results.
func FuzzEvaluate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Add("Say a word.\n\nB then, Section 1 P.S. bye")
	f.Add(`"{\"a\": [1, 2]}"`)
	ids := make([]string, len(fuzzInstructions))
	kws := make([]map[string]any, len(fuzzInstructions))
	for i, in := range fuzzInstructions {
		ids[i], kws[i] = in.id, in.kw
	}
	f.Fuzz(func(t *testing.T, response string) {
		strict, loose, err := Evaluate("p", response, ids, kws)
		if err != nil {
			t.Fatal(err)
		}
		strict2, loose2, _ := Evaluate("p", response, ids, kws)
		if !slices.Equal(strict, strict2) || !slices.Equal(loose, loose2) {
			t.Fatalf("Evaluate(%q) is not deterministic", response)
		}
		followed := 0
		for i := range strict {
			if strict[i] && !loose[i] {
				t.Errorf("%s: strict passes but loose fails on %q", ids[i], response)
			}
			if strict[i] {
				followed++
			}
		}
		r, err := Reward("p", response, ids, kws)
		if err != nil {
			t.Fatal(err)
		}
		if r.Cmp(big.NewRat(int64(followed), int64(len(ids)))) != 0 {
			t.Errorf("Reward(%q) = %s, want %d/%d", response, r.RatString(), followed, len(ids))
		}
	})
}
