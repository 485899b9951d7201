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

// IsWordRune reports whether r belongs to a word: a letter (L*), a mark (M*), a
// number (N*) or the underscore.
func IsWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return isASCIIWord(byte(r))
	}
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r)
}

// isASCIIWord is IsWordRune for a byte below utf8.RuneSelf.
func isASCIIWord(c byte) bool {
	return c == '_' || ('a' <= c|0x20 && c|0x20 <= 'z') || ('0' <= c && c <= '9')
}

// isMark reports whether r is a combining mark.
func isMark(r rune) bool { return r >= utf8.RuneSelf && unicode.IsMark(r) }

// trimSpace removes leading and trailing whitespace (IsSpace), like Python's str.strip().
func trimSpace(s string) string { return strings.TrimFunc(s, IsSpace) }

// CountWords returns the number of words in s. A word is a maximal run of word
// runes (IsWordRune) that contains at least one rune that is not a mark. Every
// other rune (whitespace, punctuation, symbols, U+FFFD for invalid UTF-8)
// separates words, so "don't" is two words, "well-known" is two words and a run of
// Chinese characters without spaces is one word, as with IFEval's \w+ tokenizer.
func CountWords(s string) int {
	n := 0
	inRun, hasBase := false, false
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			if isASCIIWord(c) {
				inRun, hasBase = true, true
				continue
			}
			if inRun && hasBase {
				n++
			}
			inRun, hasBase = false, false
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if IsWordRune(r) {
			inRun = true
			if !isMark(r) {
				hasBase = true
			}
			continue
		}
		if inRun && hasBase {
			n++
		}
		inRun, hasBase = false, false
	}
	if inRun && hasBase {
		n++
	}
	return n
}

// sentence terminators: a boundary may follow a run of these.
func isTerminator(r rune) bool {
	switch r {
	case '.', '!', '?', '…', '‼', '‽', '⁇', '⁈', '⁉', '。', '！', '？', '｡':
		return true
	}
	return false
}

// isWideTerminator reports terminators that end a sentence without following
// whitespace (CJK full stops and marks).
func isWideTerminator(r rune) bool {
	switch r {
	case '。', '！', '？', '｡':
		return true
	}
	return false
}

// isCloser reports runes that may trail a terminator and still belong to the
// sentence it ends: closing quotes, brackets and markdown emphasis.
func isCloser(r rune) bool {
	switch r {
	case '"', '\'', '”', '’', '»', ')', ']', '}', '*', '_', '`', '」', '』':
		return true
	}
	return false
}

// abbreviations whose trailing period never ends a sentence (compared lowercase).
var abbreviations = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true,
	"sr": true, "jr": true, "st": true, "vs": true,
}

// CountSentences returns the number of sentences in s under this deterministic
// rule (IFEval uses NLTK's Punkt model, which cannot be pinned here):
//
//  1. A candidate boundary is a maximal run of terminators (. ! ? … ‼ ‽ ⁇ ⁈ ⁉ and
//     the full-width 。！？｡) followed by any closers (" ' ” ’ » ) ] } * _ ` 」 』).
//  2. The candidate is a boundary if the rune after it is whitespace (IsSpace) or
//     the end of the text, or if the run contains a full-width terminator.
//  3. Except: a run that is a single "." is not a boundary when the word directly
//     before it (the maximal run of word runes ending at the ".") is a single
//     letter ("J. Smith", "e.g. this", "U.S. law"), one of mr, mrs, ms, dr, prof,
//     sr, jr, st, vs (any case), or a number made only of ASCII digits that is the
//     first word of its line (a list enumerator such as "1. ").
//  4. The text is cut at every boundary; the pieces that contain at least one
//     letter or number are the sentences. Line breaks are ordinary whitespace: a
//     heading or list item without a terminator joins the sentence that follows.
func CountSentences(s string) int {
	n := 0
	hasWord := false
	lineStart := 0 // byte offset of the start of the current line
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf && c != '.' && c != '!' && c != '?' {
			if c == '\n' {
				lineStart = i + 1
			} else if isASCIIWord(c) && c != '_' {
				hasWord = true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isTerminator(r) {
			if unicode.IsLetter(r) || unicode.IsNumber(r) {
				hasWord = true
			}
			i += size
			continue
		}
		start := i
		runes, wide := 0, false
		for i < len(s) {
			r, size = utf8.DecodeRuneInString(s[i:])
			if !isTerminator(r) {
				break
			}
			runes++
			wide = wide || isWideTerminator(r)
			i += size
		}
		single := runes == 1 && s[start] == '.'
		for i < len(s) {
			r, size = utf8.DecodeRuneInString(s[i:])
			if !isCloser(r) {
				break
			}
			i += size
		}
		boundary := wide
		if !boundary {
			if i == len(s) {
				boundary = true
			} else {
				r, _ = utf8.DecodeRuneInString(s[i:])
				boundary = IsSpace(r)
			}
		}
		if boundary && single && abbreviationBefore(s, start, lineStart) {
			boundary = false
		}
		if boundary {
			if hasWord {
				n++
			}
			hasWord = false
		}
	}
	if hasWord {
		n++
	}
	return n
}

// abbreviationBefore reports whether the word ending at byte offset end makes a
// following single period an abbreviation point (rule 3 of CountSentences).
func abbreviationBefore(s string, end, lineStart int) bool {
	begin := end
	for begin > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:begin])
		if !IsWordRune(r) {
			break
		}
		begin -= size
	}
	if begin == end {
		return false
	}
	word := s[begin:end]
	if r, size := utf8.DecodeRuneInString(word); size == len(word) && unicode.IsLetter(r) {
		return true
	}
	if len(word) <= 4 && abbreviations[strings.ToLower(word)] {
		return true
	}
	if isASCIIDigits(word) && trimSpace(s[lineStart:begin]) == "" {
		return true
	}
	return false
}

func isASCIIDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// CountCapitalWords returns the number of capital words in s. The tokens are the
// words of CountWords, except that a single hyphen between two word runes joins
// its neighbours into one token ("WELL-KNOWN" is one token, as in NLTK's word
// tokenizer). A token is a capital word when it contains at least one cased
// letter and all its cased letters are uppercase (Python's str.isupper), so "I",
// "NASA" and "COVID19" count and "2024" or "Hello" do not.
func CountCapitalWords(s string) int {
	n := 0
	inTok, hasBase, upper, lower := false, false, false, false
	flush := func() {
		if inTok && hasBase && upper && !lower {
			n++
		}
		inTok, hasBase, upper, lower = false, false, false, false
	}
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf && isASCIIWord(c) {
			inTok, hasBase = true, true
			if 'A' <= c && c <= 'Z' {
				upper = true
			} else if 'a' <= c && c <= 'z' {
				lower = true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if IsWordRune(r) {
			inTok = true
			if !isMark(r) {
				hasBase = true
			}
			switch {
			case unicode.IsUpper(r):
				upper = true
			case unicode.IsLower(r), unicode.IsTitle(r):
				lower = true
			}
			i += size
			continue
		}
		if r == '-' && inTok && i+size < len(s) {
			if next, _ := utf8.DecodeRuneInString(s[i+size:]); IsWordRune(next) {
				i += size
				continue
			}
		}
		flush()
		i += size
	}
	flush()
	return n
}

// caseOf summarizes the cased letters of s.
func caseOf(s string) (upper, lower bool) {
	for _, r := range s {
		switch {
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsLower(r), unicode.IsTitle(r):
			lower = true
		}
		if upper && lower {
			return
		}
	}
	return
}

// isUpperText is Python's str.isupper: at least one cased letter, none lowercase
// or titlecase.
func isUpperText(s string) bool {
	u, l := caseOf(s)
	return u && !l
}

// isLowerText is Python's str.islower: at least one cased letter, none uppercase
// or titlecase.
func isLowerText(s string) bool {
	for _, r := range s {
		if unicode.IsUpper(r) || unicode.IsTitle(r) {
			return false
		}
	}
	_, l := caseOf(s)
	return l
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
