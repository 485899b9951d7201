package ifeval

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Version names the semantics of this package. A verdict records it; any change
// that can flip a result for some input changes it.
const Version = "ifeval/2"

// Mode selects IFEval's strict or loose evaluation.
type Mode int

const (
	// Strict checks the response as it is.
	Strict Mode = iota
	// Loose also accepts the response when a variant of it passes: without its first
	// line, without its last line, without both, and each of those and the response
	// itself with every "*" removed (lines are split at "\n"; the trimmed variants are
	// stripped of surrounding whitespace).
	Loose
)

func (m Mode) String() string {
	switch m {
	case Strict:
		return "strict"
	case Loose:
		return "loose"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Instruction ids, as in IFEval's registry.
const (
	KeywordsExistence         = "keywords:existence"
	KeywordsFrequency         = "keywords:frequency"
	KeywordsForbiddenWords    = "keywords:forbidden_words"
	KeywordsLetterFrequency   = "keywords:letter_frequency"
	LanguageResponseLanguage  = "language:response_language"
	LengthNumberSentences     = "length_constraints:number_sentences"
	LengthNumberParagraphs    = "length_constraints:number_paragraphs"
	LengthNumberWords         = "length_constraints:number_words"
	LengthNthParagraphFirst   = "length_constraints:nth_paragraph_first_word"
	ContentNumberPlaceholders = "detectable_content:number_placeholders"
	ContentPostscript         = "detectable_content:postscript"
	FormatNumberBulletLists   = "detectable_format:number_bullet_lists"
	FormatConstrainedResponse = "detectable_format:constrained_response"
	FormatNumberHighlighted   = "detectable_format:number_highlighted_sections"
	FormatMultipleSections    = "detectable_format:multiple_sections"
	FormatJSON                = "detectable_format:json_format"
	FormatTitle               = "detectable_format:title"
	CombinationTwoResponses   = "combination:two_responses"
	CombinationRepeatPrompt   = "combination:repeat_prompt"
	StartEndEndChecker        = "startend:end_checker"
	StartEndQuotation         = "startend:quotation"
	CaseCapitalWordFrequency  = "change_case:capital_word_frequency"
	CaseEnglishCapital        = "change_case:english_capital"
	CaseEnglishLowercase      = "change_case:english_lowercase"
	PunctuationNoComma        = "punctuation:no_comma"
)

// Supported returns the instruction ids this package checks, sorted.
func Supported() []string {
	return []string{
		CaseCapitalWordFrequency, CaseEnglishCapital, CaseEnglishLowercase,
		CombinationRepeatPrompt, CombinationTwoResponses,
		ContentNumberPlaceholders, ContentPostscript,
		FormatConstrainedResponse, FormatJSON, FormatMultipleSections,
		FormatNumberBulletLists, FormatNumberHighlighted, FormatTitle,
		KeywordsExistence, KeywordsForbiddenWords, KeywordsFrequency, KeywordsLetterFrequency,
		LengthNthParagraphFirst, LengthNumberParagraphs, LengthNumberSentences, LengthNumberWords,
		PunctuationNoComma,
		StartEndEndChecker, StartEndQuotation,
	}
}

// checkFunc reports whether one response variant follows an instruction.
type checkFunc func(v string) bool

// Instruction is one parsed, validated instruction. The zero value is not usable;
// call Parse. An Instruction is immutable and safe for concurrent use.
type Instruction struct {
	id    string
	check checkFunc
}

// ID returns the instruction id.
func (in Instruction) ID() string { return in.id }

// Follows reports whether response follows the instruction in the given mode. As
// in IFEval, a response (or loose variant) that is blank never follows.
func (in Instruction) Follows(response string, mode Mode) bool {
	if in.followsVariant(response) {
		return true
	}
	if mode != Loose {
		return false
	}
	variants := looseVariants(response)
	for _, v := range variants[1:] {
		if in.followsVariant(v) {
			return true
		}
	}
	return false
}

func (in Instruction) followsVariant(v string) bool {
	return in.check != nil && trimSpace(v) != "" && in.check(v)
}

// looseVariants returns IFEval's eight loose variants of r, r itself first.
func looseVariants(r string) [8]string {
	lines := strings.Split(r, "\n")
	first := trimSpace(strings.Join(lines[1:], "\n"))
	last := trimSpace(strings.Join(lines[:len(lines)-1], "\n"))
	both := ""
	if len(lines) > 2 {
		both = trimSpace(strings.Join(lines[1:len(lines)-1], "\n"))
	}
	nostar := func(s string) string { return strings.ReplaceAll(s, "*", "") }
	return [8]string{r, nostar(r), first, last, both, nostar(first), nostar(last), nostar(both)}
}

// Parse validates the keyword arguments of one instruction and returns it ready to
// check. Unknown ids wrap ErrUnknownInstruction, language:response_language wraps
// ErrUnsupportedInstruction, and bad kwargs are a *KwargsError (ErrBadKwargs).
func Parse(id string, kw map[string]any) (Instruction, error) {
	f, err := parse(id, kw)
	if err != nil {
		return Instruction{}, err
	}
	return Instruction{id: id, check: f}, nil
}

func parse(id string, m map[string]any) (checkFunc, error) {
	switch id {
	case KeywordsExistence:
		k, err := newKwargs(id, m, "keywords")
		if err != nil {
			return nil, err
		}
		words, err := k.words("keywords")
		if err != nil {
			return nil, err
		}
		return checkExistence(words), nil

	case KeywordsFrequency:
		k, err := newKwargs(id, m, "keyword", "frequency", "relation")
		if err != nil {
			return nil, err
		}
		word, err := k.nonBlank("keyword", MaxWordKwargBytes)
		if err != nil {
			return nil, err
		}
		freq, err := k.integer("frequency", 0)
		if err != nil {
			return nil, err
		}
		rel, err := k.relation("relation")
		if err != nil {
			return nil, err
		}
		return checkFrequency(word, freq, rel), nil

	case KeywordsForbiddenWords:
		k, err := newKwargs(id, m, "forbidden_words")
		if err != nil {
			return nil, err
		}
		words, err := k.words("forbidden_words")
		if err != nil {
			return nil, err
		}
		return checkForbidden(words), nil

	case KeywordsLetterFrequency:
		k, err := newKwargs(id, m, "letter", "let_frequency", "let_relation")
		if err != nil {
			return nil, err
		}
		s, err := k.nonBlank("letter", MaxWordKwargBytes)
		if err != nil {
			return nil, err
		}
		letter, size := utf8.DecodeRuneInString(s)
		if size != len(s) {
			return nil, k.fail("letter", "want a single character, got %q", s)
		}
		freq, err := k.integer("let_frequency", 0)
		if err != nil {
			return nil, err
		}
		rel, err := k.relation("let_relation")
		if err != nil {
			return nil, err
		}
		return checkLetter(unicode.ToLower(letter), freq, rel), nil

	case LanguageResponseLanguage:
		return nil, fmt.Errorf("ifeval: %w: %s (no pinned language detector)", ErrUnsupportedInstruction, id)

	case LengthNumberSentences:
		k, err := newKwargs(id, m, "num_sentences", "relation")
		if err != nil {
			return nil, err
		}
		num, err := k.integer("num_sentences", 0)
		if err != nil {
			return nil, err
		}
		rel, err := k.relation("relation")
		if err != nil {
			return nil, err
		}
		return checkSentences(num, rel), nil

	case LengthNumberParagraphs:
		k, err := newKwargs(id, m, "num_paragraphs")
		if err != nil {
			return nil, err
		}
		num, err := k.integer("num_paragraphs", 0)
		if err != nil {
			return nil, err
		}
		return checkParagraphs(num), nil

	case LengthNumberWords:
		k, err := newKwargs(id, m, "num_words", "relation")
		if err != nil {
			return nil, err
		}
		num, err := k.integer("num_words", 0)
		if err != nil {
			return nil, err
		}
		rel, err := k.relation("relation")
		if err != nil {
			return nil, err
		}
		return checkWords(num, rel), nil

	case LengthNthParagraphFirst:
		k, err := newKwargs(id, m, "num_paragraphs", "nth_paragraph", "first_word")
		if err != nil {
			return nil, err
		}
		num, err := k.integer("num_paragraphs", 1)
		if err != nil {
			return nil, err
		}
		nth, err := k.integer("nth_paragraph", 1)
		if err != nil {
			return nil, err
		}
		if nth > num {
			return nil, k.fail("nth_paragraph", "%d is above num_paragraphs %d", nth, num)
		}
		word, err := k.str("first_word", MaxWordKwargBytes)
		if err != nil {
			return nil, err
		}
		if word == "" {
			return nil, k.fail("first_word", "empty")
		}
		return checkNthParagraph(num, nth, strings.ToLower(word)), nil

	case ContentNumberPlaceholders:
		k, err := newKwargs(id, m, "num_placeholders")
		if err != nil {
			return nil, err
		}
		num, err := k.integer("num_placeholders", 0)
		if err != nil {
			return nil, err
		}
		return checkPlaceholders(num), nil

	case ContentPostscript:
		k, err := newKwargs(id, m, "postscript_marker")
		if err != nil {
			return nil, err
		}
		marker, err := k.nonBlank("postscript_marker", MaxWordKwargBytes)
		if err != nil {
			return nil, err
		}
		return checkPostscript(marker), nil

	case FormatNumberBulletLists:
		k, err := newKwargs(id, m, "num_bullets")
		if err != nil {
			return nil, err
		}
		num, err := k.integer("num_bullets", 0)
		if err != nil {
			return nil, err
		}
		return checkBullets(num), nil

	case FormatConstrainedResponse:
		if _, err := newKwargs(id, m); err != nil {
			return nil, err
		}
		return checkConstrained(), nil

	case FormatNumberHighlighted:
		k, err := newKwargs(id, m, "num_highlights")
		if err != nil {
			return nil, err
		}
		num, err := k.integer("num_highlights", 0)
		if err != nil {
			return nil, err
		}
		return checkHighlights(num), nil

	case FormatMultipleSections:
		k, err := newKwargs(id, m, "section_spliter", "num_sections")
		if err != nil {
			return nil, err
		}
		splitter, err := k.nonBlank("section_spliter", MaxWordKwargBytes)
		if err != nil {
			return nil, err
		}
		num, err := k.integer("num_sections", 0)
		if err != nil {
			return nil, err
		}
		return checkSections(splitter, num), nil

	case FormatJSON:
		if _, err := newKwargs(id, m); err != nil {
			return nil, err
		}
		return checkJSON(), nil

	case FormatTitle:
		if _, err := newKwargs(id, m); err != nil {
			return nil, err
		}
		return checkTitle(), nil

	case CombinationTwoResponses:
		if _, err := newKwargs(id, m); err != nil {
			return nil, err
		}
		return checkTwoResponses(), nil

	case CombinationRepeatPrompt:
		k, err := newKwargs(id, m, "prompt_to_repeat")
		if err != nil {
			return nil, err
		}
		p, err := k.nonBlank("prompt_to_repeat", MaxTextKwargBytes)
		if err != nil {
			return nil, err
		}
		return checkRepeatPrompt(p), nil

	case StartEndEndChecker:
		k, err := newKwargs(id, m, "end_phrase")
		if err != nil {
			return nil, err
		}
		p, err := k.nonBlank("end_phrase", MaxWordKwargBytes)
		if err != nil {
			return nil, err
		}
		return checkEnd(p), nil

	case StartEndQuotation:
		if _, err := newKwargs(id, m); err != nil {
			return nil, err
		}
		return checkQuotation(), nil

	case CaseCapitalWordFrequency:
		k, err := newKwargs(id, m, "capital_frequency", "capital_relation")
		if err != nil {
			return nil, err
		}
		freq, err := k.integer("capital_frequency", 0)
		if err != nil {
			return nil, err
		}
		rel, err := k.relation("capital_relation")
		if err != nil {
			return nil, err
		}
		return checkCapitalWords(freq, rel), nil

	case CaseEnglishCapital:
		if _, err := newKwargs(id, m); err != nil {
			return nil, err
		}
		return checkEnglishCapital(), nil

	case CaseEnglishLowercase:
		if _, err := newKwargs(id, m); err != nil {
			return nil, err
		}
		return checkEnglishLowercase(), nil

	case PunctuationNoComma:
		if _, err := newKwargs(id, m); err != nil {
			return nil, err
		}
		return checkNoComma(), nil
	}
	return nil, fmt.Errorf("ifeval: %w: %q", ErrUnknownInstruction, id)
}

// Check parses one instruction and checks response against it. The prompt is part
// of IFEval's interface; no supported instruction reads it
// (combination:repeat_prompt compares with its prompt_to_repeat kwarg, as IFEval does).
func Check(instructionID string, kwargs map[string]any, prompt, response string, mode Mode) (bool, error) {
	in, err := Parse(instructionID, kwargs)
	if err != nil {
		return false, err
	}
	return in.Follows(response, mode), nil
}

// ParseAll parses an instruction list with its kwargs (one map per instruction, nil
// allowed for instructions without kwargs). The lists must have equal, non-zero
// length. All problems are reported, joined, each prefixed with its index.
func ParseAll(ids []string, kwargs []map[string]any) ([]Instruction, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("ifeval: %w: no instructions", ErrBadInput)
	}
	if len(ids) != len(kwargs) {
		return nil, fmt.Errorf("ifeval: %w: %d instruction ids but %d kwargs", ErrBadInput, len(ids), len(kwargs))
	}
	out := make([]Instruction, len(ids))
	var errs []error
	for i, id := range ids {
		in, err := Parse(id, kwargs[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("instruction %d: %w", i, err))
			continue
		}
		out[i] = in
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Evaluate checks response against every instruction in strict and in loose mode,
// returning one result per instruction in order. Errors are those of ParseAll; a
// result is never returned together with an error.
func Evaluate(prompt, response string, ids []string, kwargs []map[string]any) (strict, loose []bool, err error) {
	ins, err := ParseAll(ids, kwargs)
	if err != nil {
		return nil, nil, err
	}
	strict = make([]bool, len(ins))
	loose = make([]bool, len(ins))
	var variants *[8]string
	for i, in := range ins {
		strict[i] = in.followsVariant(response)
		if strict[i] {
			loose[i] = true
			continue
		}
		if variants == nil {
			v := looseVariants(response)
			variants = &v
		}
		for _, v := range variants[1:] {
			if in.followsVariant(v) {
				loose[i] = true
				break
			}
		}
	}
	return strict, loose, nil
}

// Reward is the exact reward of a response: the number of instructions it follows
// in strict mode divided by the number of instructions, in lowest terms. Errors
// are those of ParseAll.
func Reward(prompt, response string, ids []string, kwargs []map[string]any) (*big.Rat, error) {
	ins, err := ParseAll(ids, kwargs)
	if err != nil {
		return nil, err
	}
	followed := 0
	for _, in := range ins {
		if in.followsVariant(response) {
			followed++
		}
	}
	return big.NewRat(int64(followed), int64(len(ins))), nil
}
