package ifeval

import (
	"bufio"
	"embed"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// This file applies a trained Punkt sentence model (Kiss and Strunk, 2006) as
// NLTK 3.8's PunktSentenceTokenizer.tokenize does, step for step: the period
// context scan, the word tokenizer of PunktLanguageVars, the first pass (sentence
// ends, ellipses, known abbreviations), the second pass (collocations, frequent
// sentence starters and the orthographic heuristic) and the realignment of
// closing quotes and brackets. Applying a trained model needs no floating point:
// the model is four tables of types. Offsets are byte offsets into valid or
// invalid UTF-8 alike (an invalid byte is one U+FFFD rune of width one).

// punktData holds NLTK's English Punkt model, exported once from the trained
// model by scripts/punkt-export.py in the layout of NLTK's punkt_tab package
// (punkt/PROVENANCE.md says where it came from). It is plain text: nothing is
// unpickled, at run time or ever by this package.
//
//go:embed punkt/english/abbrev_types.txt punkt/english/collocations.tab punkt/english/sent_starters.txt punkt/english/ortho_context.tab
var punktData embed.FS

// punktModel is a trained Punkt model: PunktParameters.
type punktModel struct {
	abbrevTypes  map[string]bool
	collocations map[[2]string]bool
	sentStarters map[string]bool
	orthoContext map[string]int
}

// Orthographic context flags (NLTK's _ORTHO_*): where a type was seen, with
// which case of its first letter.
const (
	orthoBegUC = 1 << 1
	orthoMidUC = 1 << 2
	orthoUnkUC = 1 << 3
	orthoBegLC = 1 << 4
	orthoMidLC = 1 << 5
	orthoUnkLC = 1 << 6
	orthoUC    = orthoBegUC | orthoMidUC | orthoUnkUC
	orthoLC    = orthoBegLC | orthoMidLC | orthoUnkLC
)

// englishPunkt is the English model, parsed once.
var englishPunkt = sync.OnceValues(func() (*punktModel, error) { return loadPunkt(punktData, "punkt/english") })

// loadPunkt reads a model in the punkt_tab layout from dir.
func loadPunkt(fsys embed.FS, dir string) (*punktModel, error) {
	m := &punktModel{abbrevTypes: map[string]bool{}, collocations: map[[2]string]bool{},
		sentStarters: map[string]bool{}, orthoContext: map[string]int{}}
	read := func(name string, fields int, add func([]string) error) error {
		b, err := fsys.ReadFile(dir + "/" + name)
		if err != nil {
			return fmt.Errorf("reading punkt model: %w", err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for n := 1; sc.Scan(); n++ {
			f := strings.Split(sc.Text(), "\t")
			if len(f) != fields {
				return fmt.Errorf("punkt model %s line %d: %d fields, want %d", name, n, len(f), fields)
			}
			if err := add(f); err != nil {
				return fmt.Errorf("punkt model %s line %d: %w", name, n, err)
			}
		}
		return sc.Err()
	}
	if err := read("abbrev_types.txt", 1, func(f []string) error { m.abbrevTypes[f[0]] = true; return nil }); err != nil {
		return nil, err
	}
	if err := read("sent_starters.txt", 1, func(f []string) error { m.sentStarters[f[0]] = true; return nil }); err != nil {
		return nil, err
	}
	if err := read("collocations.tab", 2, func(f []string) error { m.collocations[[2]string{f[0], f[1]}] = true; return nil }); err != nil {
		return nil, err
	}
	if err := read("ortho_context.tab", 2, func(f []string) error {
		v, err := strconv.Atoi(f[1])
		if err != nil || v <= 0 {
			return fmt.Errorf("bad flags %q", f[1])
		}
		m.orthoContext[f[0]] = v
		return nil
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// english returns the English model; the embedded files are checked by tests,
// so a failure here is a build defect.
func english() *punktModel {
	m, err := englishPunkt()
	if err != nil {
		panic(err)
	}
	return m
}

// Sentences splits s into sentences as IFEval does: NLTK's Punkt sentence
// tokenizer with its English model (PunktSentenceTokenizer.tokenize with
// realigned boundaries). The sentences are substrings of s, in order.
func Sentences(s string) []string {
	spans := english().spans(s)
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = s[sp[0]:sp[1]]
	}
	return out
}

// CountSentences returns the number of sentences IFEval counts in s:
// len(Sentences(s)).
func CountSentences(s string) int { return len(english().spans(s)) }

// --- character classes (Python's, see unicode.go) ---

// isSentEnd reports the characters that may end a sentence (sent_end_chars).
func isSentEnd(c byte) bool { return c == '.' || c == '?' || c == '!' }

// isPunktNonWord reports characters that cannot appear within words
// (_re_non_word_chars).
func isPunktNonWord(r rune) bool {
	switch r {
	case ')', '"', ';', '}', ']', '*', ':', '@', '\'', '(', '{', '[', '?', '!':
		return true
	}
	return false
}

// isPunktNoWordStart reports characters that cannot start a word token
// (the complement of _re_word_start).
func isPunktNoWordStart(r rune) bool {
	switch r {
	case '(', '"', '`', '{', '[', ':', ';', '&', '#', '*', '@', ')', '}', ']', '-', ',':
		return true
	}
	return false
}

// isASCIIWhitespace is Python's string.whitespace.
func isASCIIWhitespace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func runeAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return utf8.RuneError, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// --- the period context scan ---

// endMatch is one match of period_context_re: the sentence-end character at
// at, the text after it that the lookahead saw (after), and the next token's
// offsets (next < 0 when the character is followed by punctuation instead).
type endMatch struct {
	at         int
	after      string
	next, stop int
}

// endMatches returns the matches of period_context_re in s, in order.
func endMatches(s string) []endMatch {
	var out []endMatch
	for i := 0; i < len(s); i++ {
		if !isSentEnd(s[i]) {
			continue
		}
		r, n := runeAt(s, i+1)
		if n == 0 {
			continue
		}
		if isPunktNonWord(r) {
			out = append(out, endMatch{at: i, after: s[i+1 : i+1+n], next: -1})
			continue
		}
		if !IsSpace(r) {
			continue
		}
		j := i + 1
		for j < len(s) {
			r, n := runeAt(s, j)
			if !IsSpace(r) {
				break
			}
			j += n
		}
		if j == len(s) {
			continue
		}
		k := j
		for k < len(s) {
			r, n := runeAt(s, k)
			if IsSpace(r) {
				break
			}
			k += n
		}
		out = append(out, endMatch{at: i, after: s[i+1 : k], next: j, stop: k})
	}
	return out
}

// lastWhitespaceIndex is _get_last_whitespace_index: the index of the last
// ASCII whitespace byte in t, or 0 when there is none (or only at index 0).
func lastWhitespaceIndex(t string) int {
	for i := len(t) - 1; i >= 0; i-- {
		if isASCIIWhitespace(t[i]) {
			return i
		}
	}
	return 0
}

// spans returns the [start, end) byte offsets of the sentences of s.
func (m *punktModel) spans(s string) [][2]int {
	// _slices_from_text over _match_potential_end_contexts
	var slices [][2]int
	lastBreak := 0
	emit := func(e endMatch, context string) {
		if !m.containsSentBreak(context) {
			return
		}
		slices = append(slices, [2]int{lastBreak, e.at + 1})
		if e.next >= 0 {
			lastBreak = e.next
		} else {
			lastBreak = e.at + 1
		}
	}
	prevStart, prevStop := 0, 0
	var prev *endMatch
	matches := endMatches(s)
	for i := range matches {
		e := &matches[i]
		wordStart := lastWhitespaceIndex(s[prevStop:e.at])
		if wordStart != 0 {
			wordStart += prevStop + 1
		} else {
			wordStart = prevStart
		}
		if prev != nil && prevStop <= wordStart {
			emit(*prev, s[prevStart:prevStop]+s[prev.at:prev.at+1]+prev.after)
		}
		prev = e
		prevStart, prevStop = wordStart, e.at
	}
	if prev != nil {
		emit(*prev, s[prevStart:prevStop]+s[prev.at:prev.at+1]+prev.after)
	}
	slices = append(slices, [2]int{lastBreak, len(strings.TrimRightFunc(s, IsSpace))})
	return realign(s, slices)
}

// realign is _realign_boundaries: closing quotes and brackets after a sentence
// end move into the sentence they close.
func realign(s string, slices [][2]int) [][2]int {
	var out [][2]int
	text := func(sl [2]int) string {
		if sl[0] >= sl[1] {
			return ""
		}
		return s[sl[0]:sl[1]]
	}
	shift := 0
	for i, sl := range slices {
		s1 := [2]int{sl[0] + shift, sl[1]}
		if i+1 == len(slices) {
			if text(s1) != "" {
				out = append(out, s1)
			}
			continue
		}
		s2 := slices[i+1]
		if keep, end, ok := boundaryRealignment(text(s2)); ok {
			out = append(out, [2]int{s1[0], s2[0] + keep})
			shift = end
		} else {
			shift = 0
			if text(s1) != "" {
				out = append(out, s1)
			}
		}
	}
	return out
}

// boundaryRealignment matches re_boundary_realignment
// (["')\]}]+?(?:\s+|(?=--)|$), multi-line) at the start of t: the closers it
// moves (keep bytes) and the end of the match.
func boundaryRealignment(t string) (keep, end int, ok bool) {
	n := 0
	for n < len(t) && strings.IndexByte(`"')]}`, t[n]) >= 0 {
		n++
	}
	if n == 0 {
		return 0, 0, false
	}
	r, size := runeAt(t, n)
	switch {
	case size > 0 && IsSpace(r):
		j := n
		for j < len(t) {
			r, size := runeAt(t, j)
			if !IsSpace(r) {
				break
			}
			j += size
		}
		return n, j, true
	case strings.HasPrefix(t[n:], "--"), n == len(t), t[n] == '\n':
		return n, n, true
	}
	return 0, 0, false
}

// --- tokens and their annotation ---

// punktToken is a PunktToken with the annotations the tokenizer uses.
type punktToken struct {
	tok         string
	typ         string
	periodFinal bool
	sentBreak   bool
	abbr        bool
	ellipsis    bool
}

func newPunktToken(tok string) punktToken {
	t := punktToken{tok: tok, typ: pyLower(tok), periodFinal: strings.HasSuffix(tok, ".")}
	if isNumericType(t.typ) {
		t.typ = "##number##"
	}
	return t
}

// isNumericType matches _RE_NUMERIC, ^-?[\.,]?\d[\d,\.-]*\.?$.
func isNumericType(t string) bool {
	i := 0
	if i < len(t) && t[i] == '-' {
		i++
	}
	if i < len(t) && (t[i] == '.' || t[i] == ',') {
		i++
	}
	r, n := runeAt(t, i)
	if n == 0 || !pyIsDecimal(r) {
		return false
	}
	for i += n; i < len(t); i += n {
		r, n = runeAt(t, i)
		if r != ',' && r != '.' && r != '-' && !pyIsDecimal(r) {
			return false
		}
	}
	return true
}

func (t *punktToken) typeNoPeriod() string {
	if len(t.typ) > 1 && t.typ[len(t.typ)-1] == '.' {
		return t.typ[:len(t.typ)-1]
	}
	return t.typ
}

func (t *punktToken) typeNoSentPeriod() string {
	if t.sentBreak {
		return t.typeNoPeriod()
	}
	return t.typ
}

func (t *punktToken) firstUpper() bool { r, _ := runeAt(t.tok, 0); return pyIsUpper(r) }
func (t *punktToken) firstLower() bool { r, _ := runeAt(t.tok, 0); return pyIsLower(r) }

// isEllipsis matches \.\.+$ at the start of the token.
func (t *punktToken) isEllipsis() bool {
	return len(t.tok) >= 2 && strings.Trim(t.tok, ".") == ""
}

// isInitial matches [^\W\d]\.$ at the start of the token: one word character
// that is not a decimal digit, then a period.
func (t *punktToken) isInitial() bool {
	r, n := runeAt(t.tok, 0)
	return n > 0 && len(t.tok) == n+1 && t.tok[n] == '.' && pyIsWord(r) && !pyIsDecimal(r)
}

// wordTokens is _tokenize_words: the word tokens of every non-blank line.
func wordTokens(s string) []punktToken {
	var out []punktToken
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimFunc(line, IsSpace) == "" {
			continue
		}
		for _, w := range punktWords(line) {
			out = append(out, newPunktToken(w))
		}
	}
	return out
}

// multiChar returns the length of a multi-character punctuation at the start
// of t (_re_multi_char_punct: --+, ..+ or (. ){2,}.), or 0.
func multiChar(t string) int {
	if strings.HasPrefix(t, "--") {
		n := 2
		for n < len(t) && t[n] == '-' {
			n++
		}
		return n
	}
	if strings.HasPrefix(t, "..") {
		n := 2
		for n < len(t) && t[n] == '.' {
			n++
		}
		return n
	}
	// (?:\.\s){2,}\.
	reps, i := 0, 0
	ends := []int{}
	for i < len(t) && t[i] == '.' {
		r, n := runeAt(t, i+1)
		if n == 0 || !IsSpace(r) {
			break
		}
		i += 1 + n
		reps++
		ends = append(ends, i)
	}
	for k := reps; k >= 2; k-- {
		if e := ends[k-1]; e < len(t) && t[e] == '.' {
			return e + 1
		}
	}
	return 0
}

// wordEnds reports whether a word token may end before position j of t (the
// lookahead of _word_tokenize_fmt).
func wordEnds(t string, j int) bool {
	if j >= len(t) {
		return true
	}
	r, n := runeAt(t, j)
	if IsSpace(r) || isPunktNonWord(r) || multiChar(t[j:]) > 0 {
		return true
	}
	if r == ',' {
		if j+n >= len(t) {
			return true
		}
		r2, _ := runeAt(t, j+n)
		return IsSpace(r2) || isPunktNonWord(r2) || multiChar(t[j+n:]) > 0
	}
	return false
}

// punktWords is PunktLanguageVars.word_tokenize: every match of
// _word_tokenize_fmt in line.
func punktWords(line string) []string {
	var out []string
	for i := 0; i < len(line); {
		r, n := runeAt(line, i)
		if IsSpace(r) {
			i += n
			continue
		}
		if k := multiChar(line[i:]); k > 0 {
			out = append(out, line[i:i+k])
			i += k
			continue
		}
		if !isPunktNoWordStart(r) {
			j := i + n
			for !wordEnds(line, j) {
				_, m := runeAt(line, j)
				j += m
			}
			out = append(out, line[i:j])
			i = j
			continue
		}
		out = append(out, line[i:i+n])
		i += n
	}
	return out
}

// containsSentBreak is text_contains_sentbreak: whether a token other than the
// last is a sentence break after both annotation passes.
func (m *punktModel) containsSentBreak(context string) bool {
	toks := wordTokens(context)
	for i := range toks {
		m.firstPass(&toks[i])
	}
	for i := range toks {
		if i+1 < len(toks) {
			m.secondPass(&toks[i], &toks[i+1])
		}
		if toks[i].sentBreak && i+1 < len(toks) {
			return true
		}
	}
	return false
}

// firstPass is _first_pass_annotation.
func (m *punktModel) firstPass(t *punktToken) {
	switch {
	case t.tok == "." || t.tok == "?" || t.tok == "!":
		t.sentBreak = true
	case t.isEllipsis():
		t.ellipsis = true
	case t.periodFinal && !strings.HasSuffix(t.tok, ".."):
		w := pyLower(t.tok[:len(t.tok)-1])
		if m.abbrevTypes[w] || m.abbrevTypes[w[strings.LastIndexByte(w, '-')+1:]] {
			t.abbr = true
		} else {
			t.sentBreak = true
		}
	}
}

// orthoDecision is the result of the orthographic heuristic.
type orthoDecision uint8

const (
	orthoUnknown orthoDecision = iota
	orthoStarter
	orthoNotStarter
)

// orthoHeuristic is _ortho_heuristic: is t the first token of a sentence?
func (m *punktModel) orthoHeuristic(t *punktToken) orthoDecision {
	switch t.tok {
	case ";", ":", ",", ".", "!", "?":
		return orthoNotStarter
	}
	oc := m.orthoContext[t.typeNoSentPeriod()]
	if t.firstUpper() && oc&orthoLC != 0 && oc&orthoMidUC == 0 {
		return orthoStarter
	}
	if t.firstLower() && (oc&orthoUC != 0 || oc&orthoBegLC == 0) {
		return orthoNotStarter
	}
	return orthoUnknown
}

// secondPass is _second_pass_annotation of t1 followed by t2.
func (m *punktModel) secondPass(t1, t2 *punktToken) {
	if !t1.periodFinal {
		return
	}
	typ := t1.typeNoPeriod()
	next := t2.typeNoSentPeriod()
	initial := t1.isInitial()
	if m.collocations[[2]string{typ, next}] {
		t1.sentBreak, t1.abbr = false, true
		return
	}
	if (t1.abbr || t1.ellipsis) && !initial {
		d := m.orthoHeuristic(t2)
		if d == orthoStarter {
			t1.sentBreak = true
			return
		}
		if t2.firstUpper() && m.sentStarters[next] {
			t1.sentBreak = true
			return
		}
	}
	if initial || typ == "##number##" {
		d := m.orthoHeuristic(t2)
		if d == orthoNotStarter {
			t1.sentBreak, t1.abbr = false, true
			return
		}
		if d == orthoUnknown && initial && t2.firstUpper() && m.orthoContext[next]&orthoLC == 0 {
			t1.sentBreak, t1.abbr = false, true
		}
	}
}
