package ifeval

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// This file is NLTK's word_tokenize as IFEval's capital-word check calls it:
// the sentences of the Punkt model, each split by NLTKWordTokenizer (NLTK 3.8's
// improved Treebank tokenizer), whose regular-expression substitutions are
// applied here in the same order. Python's \s, \w and \d are Unicode classes,
// spelled out below because Go's are ASCII; the two substitutions that need a
// lookahead or a Unicode \b are written by hand.

const (
	pySpaceClass = `[\t\n\v\f\r \x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]`
	pyWordClass  = `[\p{L}\p{N}_]`
)

// substitution is one re.sub of the tokenizer. need lists characters one of
// which every match contains: without them the text is left as it is, which
// spares most of the regular-expression passes.
type substitution struct {
	re   func() *regexp.Regexp // compiled on first use
	with string
	need string
}

// lazyRE compiles expr on first use, so that a process that never tokenizes
// does not pay for the tokenizer's expressions.
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

func sub(pattern, with, need string) substitution {
	pattern = strings.ReplaceAll(pattern, `\s`, pySpaceClass)
	pattern = strings.ReplaceAll(pattern, `\d`, `\p{Nd}`)
	return substitution{lazyRE(pattern), with, need}
}

var (
	treebankStartingQuotes = []substitution{
		sub("([«“‘„]|[`]+)", " ${1} ", "«“‘„`"),
		sub(`^"`, "``", `"`),
		sub("(``)", " ${1} ", "`"),
		sub(`([ \(\[{<])("|'{2})`, "${1} `` ", `"'`),
		// (?i)(\')(?!re|ve|ll|m|t|s|d|n)(\w)\b: see splitLeadingApostrophe
	}
	// PUNCTUATION, around the two final-period substitutions (splitFinalPeriod)
	treebankPunctuation = []substitution{
		sub(`([:,])([^\d])`, " ${1} ${2}", ":,"),
		sub(`([:,])$`, " ${1} ", ":,"),
		sub(`\.{2,}`, " ${0} ", "."),
		sub(`[;@#$%&]`, " ${0} ", ";@#$%&"),
	}
	treebankPunctuationAfter = []substitution{
		sub(`[?!]`, " ${0} ", "?!"),
		sub(`([^'])' `, "${1} ' ", "'"),
		sub(`[*]`, " ${0} ", "*"),
	}
	treebankParens       = sub(`[\]\[\(\)\{\}\<\>]`, " ${0} ", "[](){}<>")
	treebankDoubleDashes = sub(`--`, " -- ", "-")
	treebankEndingQuotes = []substitution{
		sub(`([»”’])`, " ${1} ", "»”’"),
		sub(`''`, " '' ", "'"),
		sub(`"`, " '' ", `"`),
		sub(`([^' ])('[sS]|'[mM]|'[dD]|') `, "${1} ${2} ", "'"),
		sub(`([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) `, "${1} ${2} ", "'"),
	}
	// MacIntyre's contractions: (?i)\b(can)(not)\b and the like, split into two
	// tokens; \b is checked by hand (Unicode). Each needs the word boundary at
	// both ends except "wanna", which needs whitespace after it.
	treebankContractions = []struct {
		re                     func() *regexp.Regexp
		lit                    string // the match, lower-cased: a prefilter
		leftBound, followSpace bool
	}{
		{lazyRE(`(?i)(can)(not)`), "cannot", true, false},
		{lazyRE(`(?i)(d)('ye)`), "d'ye", true, false},
		{lazyRE(`(?i)(g[iİı]m)(me)`), "mme", true, false}, // Python's (?i) i also matches İ and ı
		{lazyRE(`(?i)(gon)(na)`), "gonna", true, false},
		{lazyRE(`(?i)(got)(ta)`), "gotta", true, false},
		{lazyRE(`(?i)(lem)(me)`), "lemme", true, false},
		{lazyRE(`(?i)(more)('n)`), "more'n", true, false},
		{lazyRE(`(?i)(wan)(na)`), "wanna", true, true},
		{lazyRE(`(?i) ('t)(is)`), " 'tis", false, false},
		{lazyRE(`(?i) ('t)(was)`), " 'twas", false, false},
	}
)

func (s substitution) apply(text string) string {
	if !strings.ContainsAny(text, s.need) {
		return text
	}
	return s.re().ReplaceAllString(text, s.with)
}

// splitFinalPeriod is the substitution ([^\.])(\.)([closers]*)\s*$ ->
// "\1 \2 \3 " (spaced) or "\1 \2\3 ": the last period of the text, after a
// character that is not a period and followed only by closers (and, when
// spaced, spaces) and then whitespace, becomes a token; the trailing
// whitespace becomes one space.
func splitFinalPeriod(t, closers string, spaced bool) string {
	i := strings.LastIndexByte(t, '.')
	if i <= 0 || t[i-1] == '.' {
		return t
	}
	suf := t[i+1:]
	k := 0
	for k < len(suf) {
		r, n := utf8.DecodeRuneInString(suf[k:])
		if !strings.ContainsRune(closers, r) {
			break
		}
		k += n
	}
	if strings.TrimLeftFunc(suf[k:], IsSpace) != "" {
		return t
	}
	if spaced {
		return t[:i] + " . " + suf[:k] + " "
	}
	return t[:i] + " ." + suf[:k] + " "
}

// wordBoundary reports whether a \b (Unicode) lies at byte offset p of t.
func wordBoundary(t string, p int) bool {
	before, after := false, false
	if p > 0 {
		r, _ := utf8.DecodeLastRuneInString(t[:p])
		before = pyIsWord(r)
	}
	if p < len(t) {
		r, _ := utf8.DecodeRuneInString(t[p:])
		after = pyIsWord(r)
	}
	return before != after
}

// splitLeadingApostrophe is (?i)(\')(?!re|ve|ll|m|t|s|d|n)(\w)\b -> "\1 \2":
// an apostrophe before a one-character word that is not a contraction's tail
// gets a space after it.
func splitLeadingApostrophe(t string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(t); i++ {
		if t[i] != '\'' {
			continue
		}
		r, n := utf8.DecodeRuneInString(t[i+1:])
		if !pyIsWord(r) || !wordBoundary(t, i+1+n) {
			continue
		}
		switch r {
		case 'm', 'M', 't', 'T', 's', 'S', 'ſ', 'd', 'D', 'n', 'N':
			continue
		}
		b.WriteString(t[last : i+1])
		b.WriteByte(' ')
		b.WriteString(t[i+1 : i+1+n])
		last = i + 1 + n
		i += n
	}
	if last == 0 {
		return t
	}
	b.WriteString(t[last:])
	return b.String()
}

// treebankWords is NLTKWordTokenizer.tokenize of one sentence.
func treebankWords(text string) []string {
	for _, s := range treebankStartingQuotes {
		text = s.apply(text)
	}
	text = splitLeadingApostrophe(text)
	text = splitFinalPeriod(text, `]})>"'»”’ `, true)
	for _, s := range treebankPunctuation {
		text = s.apply(text)
	}
	text = splitFinalPeriod(text, `]})>"'`, false)
	for _, s := range treebankPunctuationAfter {
		text = s.apply(text)
	}
	text = treebankParens.apply(text)
	text = treebankDoubleDashes.apply(text)
	text = " " + text + " "
	for _, s := range treebankEndingQuotes {
		text = s.apply(text)
	}
	lower := strings.ToLower(text)
	for _, c := range treebankContractions {
		if !strings.Contains(lower, c.lit) {
			continue
		}
		var b strings.Builder
		last := 0
		for _, m := range c.re().FindAllStringSubmatchIndex(text, -1) {
			if c.leftBound && !wordBoundary(text, m[0]) {
				continue
			}
			if c.followSpace {
				if r, _ := utf8.DecodeRuneInString(text[m[1]:]); m[1] == len(text) || !IsSpace(r) {
					continue
				}
			} else if !wordBoundary(text, m[1]) {
				continue
			}
			b.WriteString(text[last:m[0]])
			b.WriteString(" " + text[m[2]:m[3]] + " " + text[m[4]:m[5]] + " ")
			last = m[1]
		}
		if last > 0 {
			b.WriteString(text[last:])
			text = b.String()
		}
	}
	return strings.FieldsFunc(text, IsSpace)
}

// WordTokens returns the tokens of NLTK's word_tokenize (English): the
// Treebank tokens of each Punkt sentence.
func WordTokens(s string) []string {
	var out []string
	for _, sent := range Sentences(s) {
		out = append(out, treebankWords(sent)...)
	}
	return out
}
