package ifeval

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The checks below take one response variant and report whether it follows the
// instruction. Each is linear in the length of the variant (times the length of
// its kwargs) and allocates at most a folded or lowercased copy of it.

func checkExistence(keywords []string) checkFunc {
	folded := foldAll(keywords)
	return func(v string) bool {
		fv := fold(v)
		for _, k := range folded {
			if !strings.Contains(fv, k) {
				return false
			}
		}
		return true
	}
}

func checkFrequency(keyword string, freq int, rel relation) checkFunc {
	k := fold(keyword)
	return func(v string) bool {
		return rel.holds(strings.Count(fold(v), k), freq)
	}
}

// checkForbidden: no forbidden word occurs between word boundaries. A word made
// only of word runes matches exactly a maximal run of word runes, so those are
// looked up in one linear pass; others are searched for (O(len(v)·len(word))).
func checkForbidden(words []string) checkFunc {
	folded := foldAll(words)
	plain := map[string]bool{}
	var other []string
	for _, w := range folded {
		if strings.IndexFunc(w, func(r rune) bool { return !IsWordRune(r) }) < 0 {
			plain[w] = true
		} else {
			other = append(other, w)
		}
	}
	return func(v string) bool {
		fv := fold(v)
		if len(plain) > 0 && anyWordRun(fv, plain) {
			return false
		}
		for _, w := range other {
			if containsWord(fv, w) {
				return false
			}
		}
		return true
	}
}

// anyWordRun reports whether some maximal run of word runes of s is in set.
func anyWordRun(s string, set map[string]bool) bool {
	start := -1
	for i, r := range s {
		if IsWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && set[s[start:i]] {
			return true
		}
		start = -1
	}
	return start >= 0 && set[s[start:]]
}

func checkLetter(letter rune, freq int, rel relation) checkFunc {
	return func(v string) bool {
		n := 0
		for _, r := range v {
			if unicode.ToLower(r) == letter {
				n++
			}
		}
		return rel.holds(n, freq)
	}
}

func checkSentences(num int, rel relation) checkFunc {
	return func(v string) bool { return rel.holds(CountSentences(v), num) }
}

func checkWords(num int, rel relation) checkFunc {
	return func(v string) bool { return rel.holds(CountWords(v), num) }
}

// checkParagraphs splits at the markdown divider: IFEval's re.split(r"\s?\*\*\*\s?").
// Empty pieces are allowed only first and last (and are not counted).
func checkParagraphs(num int) checkFunc {
	return func(v string) bool {
		parts := splitDivider(v)
		count := len(parts)
		for i, p := range parts {
			if trimSpace(p) == "" {
				if i == 0 || i == len(parts)-1 {
					count--
				} else {
					return false
				}
			}
		}
		return count == num
	}
}

// splitDivider splits v at the leftmost non-overlapping matches of
// `\s?\*\*\*\s?` (one optional whitespace rune on each side of "***").
func splitDivider(v string) []string {
	var parts []string
	prev, pos := 0, 0
	for {
		k := strings.Index(v[pos:], "***")
		if k < 0 {
			break
		}
		k += pos
		start := k
		if r, size := utf8.DecodeLastRuneInString(v[:k]); k-size >= pos && size > 0 && IsSpace(r) {
			start = k - size
		}
		end := k + 3
		if r, size := utf8.DecodeRuneInString(v[end:]); size > 0 && IsSpace(r) {
			end += size
		}
		parts = append(parts, v[prev:start])
		prev, pos = end, end
	}
	return append(parts, v[prev:])
}

// checkNthParagraph: paragraphs are split at "\n\n"; blank ones are not counted,
// but nth indexes the raw split, as IFEval does.
func checkNthParagraph(num, nth int, firstWord string) checkFunc {
	return func(v string) bool {
		parts := strings.Split(v, "\n\n")
		count := len(parts)
		for _, p := range parts {
			if trimSpace(p) == "" {
				count--
			}
		}
		if nth > count {
			return false
		}
		p := trimSpace(parts[nth-1])
		if p == "" {
			return false
		}
		word := p
		if i := strings.IndexFunc(p, IsSpace); i >= 0 {
			word = p[:i]
		}
		word = strings.TrimLeft(strings.TrimLeft(word, "'"), `"`)
		var b strings.Builder
		for _, r := range word {
			if strings.ContainsRune(`.,?!'"`, r) {
				break
			}
			b.WriteRune(unicode.ToLower(r))
		}
		return count == num && b.String() == firstWord
	}
}

// checkPlaceholders wants at least num placeholders.
func checkPlaceholders(num int) checkFunc {
	return func(v string) bool { return countPlaceholders(v) >= num }
}

// countPlaceholders counts the non-overlapping matches of `\[.*?\]` (no line break
// inside).
func countPlaceholders(v string) int {
	n := 0
	for i := 0; i < len(v); {
		k := strings.IndexByte(v[i:], '[')
		if k < 0 {
			break
		}
		k += i
		m := strings.IndexAny(v[k+1:], "]\n")
		if m < 0 {
			break
		}
		m += k + 1
		if v[m] == ']' {
			n++
		}
		// A line break at m also defeats every '[' between k and m.
		i = m + 1
	}
	return n
}

// checkPostscript looks for the marker anywhere in the lowercased response:
// "P.P.S" as `p\.\s?p\.\s?s`, "P.S." as `p\.\s?s\.`, any other marker literally.
func checkPostscript(marker string) checkFunc {
	var seq []string
	switch marker {
	case "P.P.S":
		seq = []string{"p.", "p.", "s"}
	case "P.S.":
		seq = []string{"p.", "s."}
	default:
		lm := strings.ToLower(marker)
		return func(v string) bool { return strings.Contains(strings.ToLower(v), lm) }
	}
	return func(v string) bool { return containsSpaced(strings.ToLower(v), seq) }
}

// containsSpaced reports whether s contains seq[0], seq[1], … in a row with at most
// one whitespace rune between consecutive pieces.
func containsSpaced(s string, seq []string) bool {
	for off := 0; off < len(s); {
		i := strings.Index(s[off:], seq[0])
		if i < 0 {
			return false
		}
		i += off
		if matchSpacedAt(s, i+len(seq[0]), seq[1:]) {
			return true
		}
		off = i + 1
	}
	return false
}

func matchSpacedAt(s string, p int, rest []string) bool {
	if len(rest) == 0 {
		return true
	}
	if strings.HasPrefix(s[p:], rest[0]) && matchSpacedAt(s, p+len(rest[0]), rest[1:]) {
		return true
	}
	if r, size := utf8.DecodeRuneInString(s[p:]); size > 0 && IsSpace(r) {
		q := p + size
		return strings.HasPrefix(s[q:], rest[0]) && matchSpacedAt(s, q+len(rest[0]), rest[1:])
	}
	return false
}

// checkBullets counts lines matching `^\s*\*[^\*].*$` plus lines matching
// `^\s*-.*$` (multi-line mode; \s may span line breaks) and wants exactly num.
func checkBullets(num int) checkFunc {
	return func(v string) bool {
		return countLinePattern(v, true)+countLinePattern(v, false) == num
	}
}

// countLinePattern counts the non-overlapping matches of `^\s*\*[^\*].*$` (star)
// or `^\s*-.*$` (!star) with ^ and $ matching at line boundaries.
func countLinePattern(v string, star bool) int {
	n := 0
	for p := 0; p <= len(v); {
		// p is a line start. Skip the whitespace run, which may span lines.
		q := p
		for q < len(v) {
			r, size := utf8.DecodeRuneInString(v[q:])
			if !IsSpace(r) {
				break
			}
			q += size
		}
		matched := false
		end := q
		if star {
			if q < len(v) && v[q] == '*' {
				if r, size := utf8.DecodeRuneInString(v[q+1:]); size > 0 && r != '*' {
					matched = true
					end = q + 1 + size
				}
			}
		} else if q < len(v) && v[q] == '-' {
			matched = true
			end = q + 1
		}
		if matched {
			n++
			// .* runs to the end of the line; the next match starts at a later line start.
			if e := strings.IndexByte(v[end:], '\n'); e >= 0 {
				p = end + e + 1
				continue
			}
			break
		}
		// Every line start inside the whitespace run reaches the same q and fails too.
		e := strings.IndexByte(v[q:], '\n')
		if e < 0 {
			break
		}
		p = q + e + 1
	}
	return n
}

func checkConstrained() checkFunc {
	options := [...]string{"My answer is yes.", "My answer is no.", "My answer is maybe."}
	return func(v string) bool {
		s := trimSpace(v)
		for _, o := range options {
			if strings.Contains(s, o) {
				return true
			}
		}
		return false
	}
}

// checkHighlights counts matches of `\*[^\n\*]*\*` and of `\*\*[^\n\*]*\*\*` whose
// inner text is not blank, and wants at least num.
func checkHighlights(num int) checkFunc {
	return func(v string) bool { return countHighlights(v) >= num }
}

func countHighlights(v string) int {
	n := 0
	for pos := 0; pos < len(v); {
		i := strings.IndexByte(v[pos:], '*')
		if i < 0 {
			break
		}
		i += pos
		j := strings.IndexAny(v[i+1:], "*\n")
		if j < 0 {
			break
		}
		j += i + 1
		if v[j] == '*' && trimSpace(v[i+1:j]) != "" {
			n++
		}
		pos = j + 1
	}
	for pos := 0; pos < len(v); {
		i := strings.Index(v[pos:], "**")
		if i < 0 {
			break
		}
		i += pos
		j := strings.IndexAny(v[i+2:], "*\n")
		if j < 0 {
			break
		}
		j += i + 2
		if strings.HasPrefix(v[j:], "**") {
			if trimSpace(v[i+2:j]) != "" {
				n++
			}
			pos = j + 2
			continue
		}
		pos = i + 1
	}
	return n
}

// checkSections counts matches of `\s?SPLITTER\s?\d+\s?` (splitter literal,
// case-sensitive, \d any decimal digit) and wants at least num.
func checkSections(splitter string, num int) checkFunc {
	return func(v string) bool { return countSections(v, splitter) >= num }
}

func countSections(v, splitter string) int {
	n := 0
	for pos := 0; pos < len(v); {
		k := strings.Index(v[pos:], splitter)
		if k < 0 {
			break
		}
		k += pos
		e := k + len(splitter)
		if r, size := utf8.DecodeRuneInString(v[e:]); size > 0 && IsSpace(r) {
			e += size
		}
		d := e
		for d < len(v) {
			r, size := utf8.DecodeRuneInString(v[d:])
			if !unicode.IsDigit(r) {
				break
			}
			d += size
		}
		if d == e {
			pos = k + 1
			continue
		}
		n++
		pos = d
	}
	return n
}

// checkJSON: the stripped response, without a leading ```json (or ```Json,
// ```JSON, ```) fence and a trailing ``` fence, must be one JSON value (RFC 8259).
func checkJSON() checkFunc {
	return func(v string) bool {
		s := trimSpace(v)
		for _, p := range [...]string{"```json", "```Json", "```JSON", "```"} {
			s = strings.TrimPrefix(s, p)
		}
		s = trimSpace(strings.TrimSuffix(s, "```"))
		return json.Valid([]byte(s))
	}
}

// checkTitle: some line holds `<<…>>` (greedy within the line) whose text, without
// the outer angle brackets and whitespace, is not empty.
func checkTitle() checkFunc {
	return func(v string) bool {
		for rest := v; rest != ""; {
			line := rest
			if i := strings.IndexByte(rest, '\n'); i >= 0 {
				line, rest = rest[:i], rest[i+1:]
			} else {
				rest = ""
			}
			i := strings.Index(line, "<<")
			if i < 0 {
				continue
			}
			j := strings.LastIndex(line, ">>")
			if j < i+3 {
				continue
			}
			t := strings.TrimRight(strings.TrimLeft(line[i:j+2], "<"), ">")
			if trimSpace(t) != "" {
				return true
			}
		}
		return false
	}
}

// checkTwoResponses: exactly two non-blank responses separated by "******", and
// they differ after stripping. Blank pieces are allowed only first and last.
func checkTwoResponses() checkFunc {
	return func(v string) bool {
		parts := strings.Split(v, "******")
		var valid []string
		for i, p := range parts {
			if trimSpace(p) == "" {
				if i != 0 && i != len(parts)-1 {
					return false
				}
				continue
			}
			valid = append(valid, p)
		}
		return len(valid) == 2 && trimSpace(valid[0]) != trimSpace(valid[1])
	}
}

// checkRepeatPrompt: the stripped, lowercased response starts with the lowercased
// prompt. Lowercasing maps rune to rune, so only a prefix of as many runes as the
// prompt has needs lowercasing.
func checkRepeatPrompt(prompt string) checkFunc {
	lp := strings.ToLower(prompt)
	k := utf8.RuneCountInString(lp)
	return func(v string) bool {
		s := trimSpace(v)
		end := 0
		for n := 0; n < k && end < len(s); n++ {
			_, size := utf8.DecodeRuneInString(s[end:])
			end += size
		}
		return strings.ToLower(s[:end]) == lp
	}
}

// checkEnd: the response, stripped of whitespace and then of double quotes,
// lowercased, ends with the lowercased phrase (compared on as many trailing runes
// as the phrase has).
func checkEnd(phrase string) checkFunc {
	lp := strings.ToLower(phrase)
	k := utf8.RuneCountInString(lp)
	return func(v string) bool {
		s := strings.Trim(trimSpace(v), `"`)
		start := len(s)
		for n := 0; n < k && start > 0; n++ {
			_, size := utf8.DecodeLastRuneInString(s[:start])
			start -= size
		}
		return strings.ToLower(s[start:]) == lp
	}
}

func checkCapitalWords(freq int, rel relation) checkFunc {
	return func(v string) bool { return rel.holds(CountCapitalWords(v), freq) }
}

func checkEnglishCapital() checkFunc { return isUpperText }

func checkEnglishLowercase() checkFunc { return isLowerText }

func checkNoComma() checkFunc {
	return func(v string) bool { return strings.IndexByte(v, ',') < 0 }
}

func checkQuotation() checkFunc {
	return func(v string) bool {
		s := trimSpace(v)
		return len(s) > 1 && s[0] == '"' && s[len(s)-1] == '"'
	}
}

func foldAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fold(x)
	}
	return out
}
