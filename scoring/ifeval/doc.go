// Package ifeval checks responses against verifiable instructions: the instruction
// types of the public IFEval benchmark (Zhou et al., 2023), with IFEval's
// instruction ids, keyword-argument names and strict/loose semantics, as pure and
// deterministic Go with no floats, no clocks and no model files.
//
// # Model
//
// A prompt carries a list of instruction ids and one kwargs map per id. Parse
// validates one (id, kwargs) pair into an Instruction; Instruction.Follows checks a
// response. Evaluate returns, per instruction, whether the response follows it in
// Strict mode and in Loose mode; Reward is the exact strict score
// followed/total as a *big.Rat. Version names these semantics and is recorded
// with every verdict.
//
// Strict mode checks the response as given. Loose mode (IFEval's upper bound) also
// accepts a variant: the response without its first line, without its last line,
// without both (each stripped of surrounding whitespace), and these four with
// every "*" removed. A blank response or variant never follows.
//
// # Validation
//
// Nothing passes silently: an unknown id wraps ErrUnknownInstruction; a kwarg that
// is missing, unknown for the id, of the wrong type or out of range is a
// *KwargsError wrapping ErrBadKwargs (IFEval would draw a random value instead).
// A kwarg whose value is JSON null counts as absent. Integers may be Go integers,
// integral float64 values or json.Number; relations are exactly "less than"
// (actual < threshold) or "at least" (actual >= threshold). Strings are bounded
// by MaxWordKwargBytes (MaxTextKwargBytes for prompt_to_repeat), lists by
// MaxListKwarg entries, integers by MaxCountKwarg. Every check is linear in the
// response length (times the kwargs length); the caller bounds the response size.
//
// # Supported instructions (24 of IFEval's 25)
//
//	keywords:existence            keywords (list)            each occurs, case-insensitively, as a substring
//	keywords:frequency            keyword, frequency, relation  count of non-overlapping case-insensitive occurrences
//	keywords:forbidden_words      forbidden_words (list)     none occurs as a whole word (\b…\b), case-insensitively
//	keywords:letter_frequency     letter, let_frequency, let_relation  count of the letter in the lowercased response
//	length_constraints:number_sentences    num_sentences, relation      CountSentences
//	length_constraints:number_paragraphs   num_paragraphs     pieces between `\s?\*\*\*\s?` dividers, exactly
//	length_constraints:number_words        num_words, relation          CountWords
//	length_constraints:nth_paragraph_first_word  num_paragraphs, nth_paragraph, first_word  "\n\n" paragraphs
//	detectable_content:number_placeholders num_placeholders   at least that many `[…]` on one line
//	detectable_content:postscript          postscript_marker  "P.S.", "P.P.S" (spacing-tolerant) or the literal marker
//	detectable_format:number_bullet_lists  num_bullets        lines starting "* " or "-" (after whitespace), exactly
//	detectable_format:constrained_response (none)             contains "My answer is yes.", "… no." or "… maybe."
//	detectable_format:number_highlighted_sections num_highlights  *text* and **text** spans, at least
//	detectable_format:multiple_sections    section_spliter, num_sections  "<spliter> <digits>" markers, at least
//	detectable_format:json_format          (none)             one JSON value, optionally in ``` fences
//	detectable_format:title                (none)             a <<title>> on some line
//	combination:two_responses              (none)             two different responses split by "******"
//	combination:repeat_prompt              prompt_to_repeat   starts with the prompt, case-insensitively
//	startend:end_checker                   end_phrase         ends with the phrase, case-insensitively
//	startend:quotation                     (none)             wrapped in double quotes
//	change_case:capital_word_frequency     capital_frequency, capital_relation  CountCapitalWords
//	change_case:english_capital            (none)             no lowercase letter and at least one uppercase
//	change_case:english_lowercase          (none)             no uppercase letter and at least one lowercase
//	punctuation:no_comma                   (none)             no U+002C
//
// language:response_language is not supported: IFEval decides it with langdetect,
// a statistical model whose result is not pinned, and the pure-Go alternatives
// embed large models evaluated in floating point with architecture-specific
// math. Parse returns ErrUnsupportedInstruction for it.
//
// # Deviations from IFEval, all deliberate
//
//   - change_case:english_capital and change_case:english_lowercase check the case
//     condition only; IFEval additionally requires langdetect to say "en".
//   - Character properties come from Go's Unicode 15.0 tables; Python 3.11
//     uses Unicode 14.0 (Python 3.12 uses 15.0), so characters first assigned
//     in 15.0, and five characters that became Other_Lowercase in 15.0, differ
//     from Python 3.11.
//   - Keywords, forbidden words, splitters and markers are matched literally;
//     IFEval passes them unescaped to Python's regular-expression engine.
//   - JSON is RFC 8259 (encoding/json.Valid); Python's json.loads also accepts
//     NaN, Infinity and -Infinity.
//   - Lowercasing and case-insensitive matching use Unicode simple case mappings
//     (per rune), where Python applies full mappings (for example "ß" or final
//     sigma). Case-insensitive comparison folds each rune r to
//     unicode.ToLower(unicode.ToUpper(r)).
//
// # Text model
//
// The text measures are IFEval's, computed as Python and NLTK compute them, and
// tested against them (the tests run NLTK itself with Debian's python3-nltk).
// Whitespace is IsSpace (Python's str.isspace and \s: Unicode White_Space plus
// U+001C..U+001F). A word character is IsWordRune, Python's \w: a letter (L*),
// a number (N*) or "_"; combining marks are not, so IFEval's \w+ splits
// "हिन्दी" or a decomposed "naïve" at each mark. Word boundaries (\b) lie
// between a word character and any other character or the edge of the text.
// CountWords counts maximal runs of word characters (IFEval's
// RegexpTokenizer(r"\w+")): apostrophes and hyphens split words ("don't" is
// two), and a run of ideographs without spaces is one word. Decimal digits (\d)
// are Nd. Case tests are Python's: str.isupper holds when no character is
// lowercase (Ll or Other_Lowercase) or titlecase (Lt) and one is uppercase (Lu
// or Other_Uppercase, such as Ⓐ); str.islower the other way round (ª, º and
// modifier letters such as ʰ are lowercase). Invalid UTF-8 decodes to U+FFFD,
// which is neither space nor word.
//
// Sentences are NLTK's: Sentences and CountSentences apply NLTK's Punkt
// sentence tokenizer (Kiss and Strunk, 2006) with its trained English model,
// the model IFEval loads, step for step as NLTK 3.8's
// PunktSentenceTokenizer.tokenize does. The model's four tables (abbreviation
// types, collocations, frequent sentence starters, orthographic contexts) are
// embedded as plain text (punkt/english, with punkt/PROVENANCE.md); applying
// them needs no floating point. So a known abbreviation ("Dr.", "e.g.") ends a
// sentence only when the next word looks like a sentence start, a list number
// ("1.") likewise, and "…" or the full-width "。" never do, exactly as for
// IFEval. Capital words (CountCapitalWords) are the tokens of NLTK's
// word_tokenize (WordTokens: the Punkt sentences, each split by NLTK's
// Treebank-style NLTKWordTokenizer, ported substitution for substitution) for
// which str.isupper holds.
package ifeval
