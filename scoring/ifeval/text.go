package ifeval

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// IsSpace reports whether r is whitespace in the sense used by every check: the
// Unicode White_Space property plus U+001C..U+001F (the set Python's str.isspace
// and the \s class of Python's re accept, which IFEval relies on).
func IsSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || (r >= '\t' && r <= '\r') || (r >= 0x1c && r <= 0x1f)
	}
	return unicode.IsSpace(r)
}

// IsWordRune reports whether r is a word character in the sense of Python's \w,
// which IFEval's word count and word boundaries use: a letter (L*), a number
// (N*) or "_". Combining marks are not word characters, so "हिन्दी" is three
// words, as for IFEval.
func IsWordRune(r rune) bool { return pyIsWord(r) }

// isASCIIWord is IsWordRune for a byte below utf8.RuneSelf.
func isASCIIWord(c byte) bool {
	return c == '_' || ('a' <= c|0x20 && c|0x20 <= 'z') || ('0' <= c && c <= '9')
}

// trimSpace removes leading and trailing whitespace (IsSpace), like Python's str.strip().
func trimSpace(s string) string { return strings.TrimFunc(s, IsSpace) }

// CountWords returns the number of words in s as IFEval counts them: the
// matches of the regular expression \w+ (NLTK's RegexpTokenizer), that is the
// maximal runs of word characters (IsWordRune). Every other character
// (whitespace, punctuation, symbols, combining marks, U+FFFD for invalid UTF-8)
// separates words, so "don't" is two words, "well-known" is two words and a run
// of Chinese characters without spaces is one word.
func CountWords(s string) int {
	n := 0
	inRun := false
	for i := 0; i < len(s); {
		r, size := runeAt(s, i)
		i += size
		w := IsWordRune(r)
		if w && !inRun {
			n++
		}
		inRun = w
	}
	return n
}

// CountCapitalWords returns the number of capital words in s as IFEval counts
// them: the tokens of NLTK's word_tokenize (WordTokens) for which Python's
// str.isupper holds (isUpperText), so "I", "NASA", "U.S.A." and "COVID-19"
// count and "2024" or "Hello" do not, and "DON'T" is the two tokens "DO" and
// "N'T".
func CountCapitalWords(s string) int {
	n := 0
	for _, w := range WordTokens(s) {
		if isUpperText(w) {
			n++
		}
	}
	return n
}

// foldRune maps r to its case-insensitive representative: the lowercase of its
// uppercase, so that 'K', 'k' and the Kelvin sign, or 's', 'S' and 'ſ', agree.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}
	return unicode.ToLower(unicode.ToUpper(r))
}

// fold returns s with every rune replaced by foldRune. Matching folded strings is
// the case-insensitive comparison used by the keyword checks.
func fold(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return strings.Map(foldRune, s)
		}
	}
	return s
}

// containsWord reports whether w occurs in s delimited by word boundaries on both
// sides, where a boundary lies between a word rune and a non-word rune (or the
// edge of the text), as the \b of a regular expression. s and w are folded.
func containsWord(s, w string) bool {
	if w == "" {
		return false
	}
	for off := 0; off <= len(s); {
		i := strings.Index(s[off:], w)
		if i < 0 {
			return false
		}
		i += off
		if atBoundary(s, i) && atBoundary(s, i+len(w)) {
			return true
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		off = i + size
	}
	return false
}

func atBoundary(s string, p int) bool {
	before, after := false, false
	if p > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:p])
		before = IsWordRune(r)
	}
	if p < len(s) {
		r, _ := utf8.DecodeRuneInString(s[p:])
		after = IsWordRune(r)
	}
	return before != after
}
