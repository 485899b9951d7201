package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/feval/feval/internal/strictjson"
)

// Pre-tokenizer splits a Tokenizer implements (tokenizer.json's pre_tokenizer).
const (
	// SplitGPT2 is the ByteLevel pre-tokenizer with use_regex true.
	SplitGPT2 = "gpt2"
	// SplitQwen2 is Qwen2/Qwen3's Sequence of a Split on QwenPattern
	// (Isolated) and a ByteLevel pre-tokenizer with use_regex false.
	SplitQwen2 = "qwen2"
)

// QwenPattern is the split pattern of the Qwen2 and Qwen3 tokenizers. It uses a
// look-ahead RE2 lacks; splitQwen2 implements it by hand.
const QwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Tokenizer is a byte-level BPE tokenizer read from a Hugging Face
// tokenizer.json. Its vocabulary strings are in the byte-level alphabet (each
// byte one character, bytesToRunes); added tokens are matched in text before
// pre-tokenization and decode to their content.
type Tokenizer struct {
	vocab   map[string]int
	tokens  map[int]string // id -> byte-level string, or added content
	added   []addedToken   // longest content first
	addedID map[int]bool
	ranks   map[string]int // "a b" -> merge rank
	split   string
	nfc     bool
	maxID   int
}

type addedToken struct {
	ID      int    `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

// byteRunes maps a byte to its character in the byte-level alphabet, and
// runeBytes back: the printable bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for
// themselves, the other 68 bytes, in order, for U+0100 onwards.
var byteRunes [256]rune
var runeBytes = map[rune]byte{}

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteRunes[b] = rune(b)
		} else {
			byteRunes[b] = rune(256 + n)
			n++
		}
		runeBytes[byteRunes[b]] = byte(b)
	}
}

// ByteOf returns the byte a character of the byte-level alphabet stands for.
func ByteOf(r rune) (byte, bool) {
	b, ok := runeBytes[r]
	return b, ok
}

// ByteLevel returns b in the byte-level alphabet.
func ByteLevel(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		sb.WriteRune(byteRunes[c])
	}
	return sb.String()
}

type tokenizerJSON struct {
	AddedTokens  []addedToken    `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        struct {
		Type                    string            `json:"type"`
		Dropout                 *float64          `json:"dropout"`
		UnkToken                *string           `json:"unk_token"`
		ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
		ByteFallback            bool              `json:"byte_fallback"`
		Vocab                   map[string]int    `json:"vocab"`
		Merges                  []json.RawMessage `json:"merges"`
	} `json:"model"`
}

type preTokenizerJSON struct {
	Type          string             `json:"type"`
	UseRegex      *bool              `json:"use_regex"`
	AddPrefix     bool               `json:"add_prefix_space"`
	Pretokenizers []preTokenizerJSON `json:"pretokenizers"`
	Pattern       struct {
		Regex string `json:"Regex"`
	} `json:"pattern"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
}

// ParseTokenizer reads a tokenizer.json of at most lim.MaxTokenizerBytes
// bytes: a BPE model without dropout, unknown token, byte fallback or
// sub-word affixes; every vocabulary string non-empty and in the byte-level
// alphabet, every one of the 256 byte characters in the vocabulary; ids
// unique and below vocabSize; every merge "a b" (or ["a", "b"]) of vocabulary
// strings whose concatenation is in the vocabulary; added tokens with unique
// non-empty contents and ids below vocabSize that no other vocabulary string
// uses; normalizer null or NFC; the pre-tokenizer SplitGPT2 or SplitQwen2.
func ParseTokenizer(b []byte, vocabSize int, lim Limits) (*Tokenizer, error) {
	if len(b) > lim.MaxTokenizerBytes {
		return nil, modelErr("tokenizer.json has %d bytes, over %d", len(b), lim.MaxTokenizerBytes)
	}
	// No name twice anywhere (two ids for one vocabulary string would be read
	// differently by different parsers); then the members this reader uses.
	var raw json.RawMessage
	if err := strictjson.Decode(b, &raw); err != nil {
		return nil, modelErr("tokenizer.json: %v", err)
	}
	var tj tokenizerJSON
	if err := json.Unmarshal(b, &tj); err != nil {
		return nil, modelErr("tokenizer.json: %v", err)
	}
	m := tj.Model
	if m.Type != "BPE" || m.Dropout != nil || m.UnkToken != nil || m.ByteFallback ||
		(m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "") || (m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "") {
		return nil, modelErr("tokenizer.json: the model must be byte-level BPE without dropout, unknown token, byte fallback or affixes")
	}
	t := &Tokenizer{vocab: map[string]int{}, tokens: map[int]string{}, addedID: map[int]bool{}, ranks: map[string]int{}}
	for s, id := range m.Vocab {
		if id < 0 || id >= vocabSize || s == "" {
			return nil, modelErr("tokenizer.json: vocabulary entry %q has id %d outside [0, %d)", s, id, vocabSize)
		}
		for _, r := range s {
			if _, ok := runeBytes[r]; !ok {
				return nil, modelErr("tokenizer.json: vocabulary entry %q is not in the byte-level alphabet", s)
			}
		}
		if prev, dup := t.tokens[id]; dup {
			return nil, modelErr("tokenizer.json: id %d is both %q and %q", id, prev, s)
		}
		t.vocab[s], t.tokens[id] = id, s
		t.maxID = max(t.maxID, id)
	}
	for b := 0; b < 256; b++ {
		if _, ok := t.vocab[string(byteRunes[b])]; !ok {
			return nil, modelErr("tokenizer.json: byte %#02x has no token", b)
		}
	}
	for i, raw := range m.Merges {
		var a, c string
		var s string
		var pair []string
		switch {
		case json.Unmarshal(raw, &s) == nil:
			var ok bool
			if a, c, ok = strings.Cut(s, " "); !ok || strings.Contains(c, " ") {
				return nil, modelErr("tokenizer.json: merge %d %q is not two symbols", i, s)
			}
		case json.Unmarshal(raw, &pair) == nil && len(pair) == 2:
			a, c = pair[0], pair[1]
		default:
			return nil, modelErr("tokenizer.json: merge %d is neither \"a b\" nor [\"a\", \"b\"]", i)
		}
		_, okA := t.vocab[a]
		_, okC := t.vocab[c]
		_, okAC := t.vocab[a+c]
		if !okA || !okC || !okAC {
			return nil, modelErr("tokenizer.json: merge %d (%q, %q) names strings outside the vocabulary", i, a, c)
		}
		if _, dup := t.ranks[a+" "+c]; !dup {
			t.ranks[a+" "+c] = i
		}
	}
	contents := map[string]bool{}
	for _, at := range tj.AddedTokens {
		if at.ID < 0 || at.ID >= vocabSize || at.Content == "" || contents[at.Content] || t.addedID[at.ID] {
			return nil, modelErr("tokenizer.json: added token %q (id %d) is empty, repeated or outside the vocabulary", at.Content, at.ID)
		}
		if s, ok := t.tokens[at.ID]; ok && s != ByteLevel([]byte(at.Content)) && s != at.Content {
			return nil, modelErr("tokenizer.json: added token %q takes id %d of %q", at.Content, at.ID, s)
		}
		contents[at.Content], t.addedID[at.ID] = true, true
		t.tokens[at.ID] = at.Content
		t.added = append(t.added, at)
		t.maxID = max(t.maxID, at.ID)
	}
	sort.SliceStable(t.added, func(i, j int) bool { return len(t.added[i].Content) > len(t.added[j].Content) })
	if n := bytes.TrimSpace(tj.Normalizer); len(n) > 0 && string(n) != "null" {
		var nj struct {
			Type string `json:"type"`
		}
		d := json.NewDecoder(bytes.NewReader(n))
		d.DisallowUnknownFields()
		if d.Decode(&nj) != nil || nj.Type != "NFC" {
			return nil, modelErr("tokenizer.json: the normalizer is not supported (null or NFC)")
		}
		t.nfc = true
	}
	var pt preTokenizerJSON
	if err := json.Unmarshal(tj.PreTokenizer, &pt); err != nil {
		return nil, modelErr("tokenizer.json: pre_tokenizer: %v", err)
	}
	switch {
	case pt.Type == "ByteLevel" && (pt.UseRegex == nil || *pt.UseRegex) && !pt.AddPrefix:
		t.split = SplitGPT2
	case pt.Type == "Sequence" && len(pt.Pretokenizers) == 2 &&
		pt.Pretokenizers[0].Type == "Split" && pt.Pretokenizers[0].Pattern.Regex == QwenPattern &&
		pt.Pretokenizers[0].Behavior == "Isolated" && !pt.Pretokenizers[0].Invert &&
		pt.Pretokenizers[1].Type == "ByteLevel" && pt.Pretokenizers[1].UseRegex != nil && !*pt.Pretokenizers[1].UseRegex && !pt.Pretokenizers[1].AddPrefix:
		t.split = SplitQwen2
	default:
		return nil, modelErr("tokenizer.json: the pre-tokenizer is neither GPT-2's ByteLevel nor Qwen2's Split and ByteLevel")
	}
	return t, nil
}

// Split names the pre-tokenizer.
func (t *Tokenizer) Split() string { return t.split }

// IsAdded reports whether id is an added (special) token.
func (t *Tokenizer) IsAdded(id int) bool { return t.addedID[id] }

// Known reports whether id names a token.
func (t *Tokenizer) Known(id int) bool { _, ok := t.tokens[id]; return ok }

// Encode returns the token ids of text: added tokens are matched first
// (leftmost, then longest); each stretch between them is pre-tokenized, each
// piece turned into the byte-level characters of its UTF-8 bytes and merged by
// BPE (repeatedly the adjacent pair of lowest merge rank, leftmost first).
// With an NFC normalizer, text outside ASCII is refused: NFC leaves ASCII as it
// is, and this runtime carries no normalization tables.
func (t *Tokenizer) Encode(text string) ([]int, error) {
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("encoding: text is not valid UTF-8")
	}
	if t.nfc {
		for i := 0; i < len(text); i++ {
			if text[i] >= 0x80 {
				return nil, fmt.Errorf("encoding: NFC normalization of non-ASCII text is not implemented")
			}
		}
	}
	var out []int
	for len(text) > 0 {
		at, tok := t.nextAdded(text)
		for _, piece := range t.pieces(text[:at]) {
			out = t.bpe(out, ByteLevel([]byte(piece)))
		}
		if tok == nil {
			break
		}
		out = append(out, tok.ID)
		text = text[at+len(tok.Content):]
	}
	return out, nil
}

func (t *Tokenizer) nextAdded(text string) (int, *addedToken) {
	best, bestAt := -1, len(text)
	for i := range t.added {
		if j := strings.Index(text, t.added[i].Content); j >= 0 && j < bestAt {
			best, bestAt = i, j
		}
	}
	if best < 0 {
		return len(text), nil
	}
	return bestAt, &t.added[best]
}

func (t *Tokenizer) bpe(out []int, word string) []int {
	var syms []string
	for _, r := range word {
		syms = append(syms, string(r))
	}
	for len(syms) > 1 {
		best, bestRank := -1, 0
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := t.ranks[syms[i]+" "+syms[i+1]]; ok && (best < 0 || r < bestRank) {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		syms[best] += syms[best+1]
		syms = append(syms[:best+1], syms[best+2:]...)
	}
	for _, s := range syms {
		out = append(out, t.vocab[s])
	}
	return out
}

// Decode returns the bytes of ids: an added token gives its content, any
// other token the bytes its byte-level characters stand for. Unknown ids are
// an error.
func (t *Tokenizer) Decode(ids []int) ([]byte, error) {
	var out []byte
	for _, id := range ids {
		s, ok := t.tokens[id]
		if !ok {
			return nil, fmt.Errorf("decoding: token %d is not in the vocabulary", id)
		}
		if t.addedID[id] {
			out = append(out, s...)
			continue
		}
		for _, r := range s {
			out = append(out, runeBytes[r])
		}
	}
	return out, nil
}

// Text is the response text of a completion's bytes: valid UTF-8 as it is;
// otherwise each byte that does not begin a valid UTF-8 sequence is replaced
// by U+FFFD, one replacement per byte.
func Text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		sb.WriteRune(r) // RuneError for an invalid byte, n == 1
		b = b[n:]
	}
	return sb.String()
}

// pieces pre-tokenizes text.
func (t *Tokenizer) pieces(text string) []string { return PreTokenize(t.split, text) }

// PreTokenize splits text as the pre-tokenizer split (SplitGPT2 or
// SplitQwen2) does.
func PreTokenize(split, text string) []string {
	if text == "" {
		return nil
	}
	rs := []rune(text)
	var out []string
	for i := 0; i < len(rs); {
		var n int
		if split == SplitQwen2 {
			n = matchQwen2(rs, i)
		} else {
			n = matchGPT2(rs, i)
		}
		out = append(out, string(rs[i:i+n]))
		i += n
	}
	return out
}

func isL(r rune) bool { return unicode.IsLetter(r) }
func isN(r rune) bool { return unicode.IsNumber(r) }
func isS(r rune) bool { return unicode.IsSpace(r) }

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at i (ASCII case folding).
func contraction(rs []rune, i int, fold bool) int {
	if rs[i] != '\'' || i+1 >= len(rs) {
		return 0
	}
	low := func(r rune) rune {
		if fold && r >= 'A' && r <= 'Z' {
			return r + 32
		}
		return r
	}
	a := low(rs[i+1])
	if a == 's' || a == 't' || a == 'm' || a == 'd' {
		return 2
	}
	if i+2 < len(rs) {
		b := low(rs[i+2])
		if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
			return 3
		}
	}
	return 0
}

func runWhile(rs []rune, i int, f func(rune) bool) int {
	j := i
	for j < len(rs) && f(rs[j]) {
		j++
	}
	return j - i
}

// whitespace matches \s+(?!\S)|\s+ at i, a whitespace character: the run up
// to the end of text, or the run but its last character when more than one
// and text continues, else the run.
func whitespace(rs []rune, i int) int {
	n := runWhile(rs, i, isS)
	if i+n < len(rs) && n > 1 {
		return n - 1
	}
	return n
}

// matchQwen2 returns the length of QwenPattern's leftmost-first match at i.
func matchQwen2(rs []rune, i int) int {
	if n := contraction(rs, i, true); n > 0 {
		return n
	}
	r := rs[i]
	if r != '\r' && r != '\n' && !isL(r) && !isN(r) && i+1 < len(rs) && isL(rs[i+1]) {
		return 1 + runWhile(rs, i+1, isL)
	}
	if isL(r) {
		return runWhile(rs, i, isL)
	}
	if isN(r) {
		return 1
	}
	punct := func(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }
	if r == ' ' && i+1 < len(rs) && punct(rs[i+1]) {
		n := 1 + runWhile(rs, i+1, punct)
		return n + runWhile(rs, i+n, func(r rune) bool { return r == '\r' || r == '\n' })
	}
	if punct(r) {
		n := runWhile(rs, i, punct)
		return n + runWhile(rs, i+n, func(r rune) bool { return r == '\r' || r == '\n' })
	}
	// r is whitespace: \s*[\r\n]+ ends after the run's last line break.
	n := runWhile(rs, i, isS)
	for k := n - 1; k >= 0; k-- {
		if rs[i+k] == '\r' || rs[i+k] == '\n' {
			return k + 1
		}
	}
	return whitespace(rs, i)
}

// matchGPT2 returns the length of GPT-2's pattern
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matched leftmost-first at i.
func matchGPT2(rs []rune, i int) int {
	if n := contraction(rs, i, false); n > 0 {
		return n
	}
	punct := func(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }
	for _, class := range []func(rune) bool{isL, isN, punct} {
		if rs[i] == ' ' && i+1 < len(rs) && class(rs[i+1]) {
			return 1 + runWhile(rs, i+1, class)
		}
		if class(rs[i]) {
			return runWhile(rs, i, class)
		}
	}
	return whitespace(rs, i)
}
