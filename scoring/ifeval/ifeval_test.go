package ifeval

import (
	"bufio"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const vectorsPath = "../testdata/ifeval_vectors.jsonl"

// vector is one line of testdata/ifeval_vectors.jsonl.
type vector struct {
	IDs            []string         `json:"instruction_id_list"`
	Kwargs         []map[string]any `json:"kwargs"`
	Prompt         string           `json:"prompt"`
	Response       string           `json:"response"`
	ExpectedStrict []bool           `json:"expected_strict"`
	ExpectedLoose  []bool           `json:"expected_loose"`
	ExpectedError  string           `json:"expected_error"`
	Note           string           `json:"note"`
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	f, err := os.Open(filepath.FromSlash(vectorsPath))
	if err != nil {
		t.Fatalf("vectors: %v", err)
	}
	defer f.Close()
	var out []vector
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var v vector
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("vectors line %d: %v", line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("vectors: %v", err)
	}
	return out
}

func TestVectors(t *testing.T) {
	vs := loadVectors(t)
	if len(vs) < 100 {
		t.Fatalf("only %d vectors, want at least 100", len(vs))
	}
	sentinel := map[string]error{
		"unknown":     ErrUnknownInstruction,
		"unsupported": ErrUnsupportedInstruction,
		"kwargs":      ErrBadKwargs,
		"input":       ErrBadInput,
	}
	covered := map[string][2]bool{} // id -> {seen true, seen false} in strict mode
	for i, v := range vs {
		strict, loose, err := Evaluate(v.Prompt, v.Response, v.IDs, v.Kwargs)
		if v.ExpectedError != "" {
			want, ok := sentinel[v.ExpectedError]
			if !ok {
				t.Fatalf("vector %d (%s): unknown expected_error %q", i+1, v.Note, v.ExpectedError)
			}
			if !errors.Is(err, want) {
				t.Errorf("vector %d (%s): error %v, want %v", i+1, v.Note, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("vector %d (%s): %v", i+1, v.Note, err)
			continue
		}
		if !slices.Equal(strict, v.ExpectedStrict) {
			t.Errorf("vector %d (%s): strict %v, want %v", i+1, v.Note, strict, v.ExpectedStrict)
		}
		if !slices.Equal(loose, v.ExpectedLoose) {
			t.Errorf("vector %d (%s): loose %v, want %v", i+1, v.Note, loose, v.ExpectedLoose)
		}
		// Check and Follows agree with Evaluate.
		for j, id := range v.IDs {
			for _, m := range []Mode{Strict, Loose} {
				got, err := Check(id, v.Kwargs[j], v.Prompt, v.Response, m)
				want := v.ExpectedStrict[j]
				if m == Loose {
					want = v.ExpectedLoose[j]
				}
				if err != nil || got != want {
					t.Errorf("vector %d (%s): Check(%s, %s) = %v, %v; want %v", i+1, v.Note, id, m, got, err, want)
				}
			}
			c := covered[id]
			c[boolIndex(v.ExpectedStrict[j])] = true
			covered[id] = c
		}
	}
	for _, id := range Supported() {
		if c := covered[id]; !c[0] || !c[1] {
			t.Errorf("vectors lack a strict pass and a strict fail for %s (have %v)", id, c)
		}
	}
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestReward(t *testing.T) {
	ids := []string{PunctuationNoComma, FormatTitle, LengthNumberWords}
	kw := []map[string]any{nil, nil, {"num_words": 3, "relation": "at least"}}
	tests := []struct {
		name     string
		response string
		want     *big.Rat
	}{
		{"all followed", "<<T>>\nthree words here", big.NewRat(1, 1)},
		{"two of three", "<<T>>\none, two, three", big.NewRat(2, 3)},
		{"one of three", "one two, three", big.NewRat(1, 3)},
		{"blank", " \n", big.NewRat(0, 1)},
		// Reward is strict: the loose variant without the first line would follow.
		{"strict only", "Intro, here\n<<T>> a b", big.NewRat(2, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Reward("p", tt.response, ids, kw)
			if err != nil {
				t.Fatal(err)
			}
			if got.Cmp(tt.want) != 0 {
				t.Errorf("Reward = %s, want %s", got.RatString(), tt.want.RatString())
			}
		})
	}
	if _, err := Reward("p", "x", nil, nil); !errors.Is(err, ErrBadInput) {
		t.Errorf("empty list: %v, want ErrBadInput", err)
	}
}

func TestKwargsErrors(t *testing.T) {
	tests := []struct {
		name string
		id   string
		kw   map[string]any
		key  string
	}{
		{"missing", LengthNumberWords, map[string]any{"relation": "at least"}, "num_words"},
		{"unknown key reported deterministically", PunctuationNoComma, map[string]any{"zz": 1, "aa": 2, "mm": 3}, "aa"},
		{"float", LengthNumberSentences, map[string]any{"num_sentences": 2.5, "relation": "at least"}, "num_sentences"},
		{"too large", LengthNumberWords, map[string]any{"num_words": MaxCountKwarg + 1, "relation": "at least"}, "num_words"},
		{"bad list entry", KeywordsForbiddenWords, map[string]any{"forbidden_words": []any{"a", 3}}, "forbidden_words"},
		{"empty list entry", KeywordsExistence, map[string]any{"keywords": []string{"a", ""}}, "keywords"},
		{"long keyword", KeywordsFrequency, map[string]any{"keyword": strings.Repeat("k", MaxWordKwargBytes+1), "frequency": 1, "relation": "at least"}, "keyword"},
		{"nth zero", LengthNthParagraphFirst, map[string]any{"num_paragraphs": 2, "nth_paragraph": 0, "first_word": "a"}, "nth_paragraph"},
		{"blank splitter", FormatMultipleSections, map[string]any{"section_spliter": " ", "num_sections": 1}, "section_spliter"},
		{"relation type", CaseCapitalWordFrequency, map[string]any{"capital_frequency": 1, "capital_relation": 1}, "capital_relation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.id, tt.kw)
			var ke *KwargsError
			if !errors.As(err, &ke) || !errors.Is(err, ErrBadKwargs) {
				t.Fatalf("Parse error %v, want *KwargsError", err)
			}
			if ke.Key != tt.key || ke.InstructionID != tt.id {
				t.Errorf("error names %s/%s, want %s/%s", ke.InstructionID, ke.Key, tt.id, tt.key)
			}
		})
	}
}

func TestKwargsNumberForms(t *testing.T) {
	for _, n := range []any{3, int64(3), uint8(3), 3.0, json.Number("3")} {
		ok, err := Check(LengthNumberWords, map[string]any{"num_words": n, "relation": "at least"}, "", "a b c", Strict)
		if err != nil || !ok {
			t.Errorf("num_words %T: %v, %v", n, ok, err)
		}
	}
}

func TestParseAllJoinsErrors(t *testing.T) {
	_, err := ParseAll([]string{"nope", PunctuationNoComma, LengthNumberWords}, []map[string]any{nil, nil, {}})
	if !errors.Is(err, ErrUnknownInstruction) || !errors.Is(err, ErrBadKwargs) {
		t.Fatalf("error %v should report both problems", err)
	}
	if !strings.Contains(err.Error(), "instruction 0") || !strings.Contains(err.Error(), "instruction 2") {
		t.Errorf("error %q should name the indexes", err)
	}
}

func TestSupportedParses(t *testing.T) {
	ids := Supported()
	if len(ids) != 24 || !slices.IsSorted(ids) {
		t.Fatalf("Supported() = %d ids, sorted %v", len(ids), slices.IsSorted(ids))
	}
	if slices.Contains(ids, LanguageResponseLanguage) {
		t.Fatal("language detection listed as supported")
	}
}

func TestCountWords(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"ascii", "The quick brown fox.", 4},
		{"apostrophe splits", "don't", 2},
		{"hyphen splits", "well-known", 2},
		{"underscore joins", "a_b", 1},
		{"digits", "in 2024, 3.5%", 4},
		{"accents", "café naïve", 2},
		{"leading mark only", "\u0301 x", 1},
		{"devanagari splits at marks", "नमस्ते दुनिया", 5},
		{"decomposed accent splits", "nai\u0308ve", 2},
		{"cjk run", "我喜欢猫。你呢", 2},
		{"invalid utf8", "a\xffb", 2},
		{"punctuation only", "... --- !!!", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CountWords(tt.in); got != tt.want {
				t.Errorf("CountWords(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

// TestCountSentences pins NLTK's Punkt decisions (with the English model) on
// short cases; TestSentencesMatchNLTK runs NLTK itself on a larger corpus.
func TestCountSentences(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"no terminator", "just words", []string{"just words"}},
		{"three", "Ab cd. Ef gh! Ij kl?", []string{"Ab cd.", "Ef gh!", "Ij kl?"}},
		{"capital initial then sentence starter", "Plan B. Then go.", []string{"Plan B.", "Then go."}},
		{"trailing space", "One. Two. ", []string{"One.", "Two."}},
		{"initials", "J. R. R. Tolkien wrote it.", []string{"J. R. R. Tolkien wrote it."}},
		{"titles", "Mrs. Day and Prof. Ray met.", []string{"Mrs. Day and Prof. Ray met."}},
		{"not an abbreviation", "I like tea. Dr Who is fun.", []string{"I like tea.", "Dr Who is fun."}},
		{"decimal", "Pi is 3.14 roughly.", []string{"Pi is 3.14 roughly."}},
		{"closing paren realigned", "(This is one.) This is two.", []string{"(This is one.)", "This is two."}},
		{"markdown bold is not realigned", "**Done.** Next step.", []string{"**Done.", "** Next step."}},
		{"ellipsis character is no terminator", "Wait… what", []string{"Wait… what"}},
		{"ellipsis then capital", "He left... She stayed.", []string{"He left... She stayed."}},
		{"interrobang run", "Really?! Yes.", []string{"Really?!", "Yes."}},
		{"number before period", "Count to 3. Then stop.", []string{"Count to 3.", "Then stop."}},
		{"numbered list", "Steps:\n1. Mix\n2. Bake.", []string{"Steps:\n1.", "Mix\n2.", "Bake."}},
		{"e.g. then a name", "I met e.g. Bob. Then we left.", []string{"I met e.g.", "Bob.", "Then we left."}},
		{"abbreviation p.", "Go to p. 5. Then stop.", []string{"Go to p. 5.", "Then stop."}},
		{"full-width stops do not split", "你好。世界！", []string{"你好。世界！"}},
		{"terminators only", "?!", []string{"?", "!"}},
		{"lines are not boundaries", "Title\nBody here.", []string{"Title\nBody here."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sentences(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("Sentences(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := CountSentences(tt.in); got != len(tt.want) {
				t.Errorf("CountSentences(%q) = %d, want %d", tt.in, got, len(tt.want))
			}
		})
	}
}

func TestCountCapitalWords(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int
	}{
		{"none", "hello World", 0},
		{"acronyms", "NASA and ESA", 2},
		{"single letters", "I saw A cat", 2},
		{"hyphen joins", "STATE-OF-THE-ART work", 1},
		{"mixed hyphen", "WELL-known", 0},
		{"digits", "COVID19 and 2024", 1},
		{"apostrophe splits", "DON'T", 2},
		{"titlecase letter", "ǅUNGLA", 0},
		{"greek", "ΑΘΗΝΑ", 1},
		{"trailing hyphen", "OK- fine", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CountCapitalWords(tt.in); got != tt.want {
				t.Errorf("CountCapitalWords(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestLooseVariants(t *testing.T) {
	got := looseVariants("*a*\n b \nc*")
	want := [8]string{"*a*\n b \nc*", "a\n b \nc", "b \nc*", "*a*\n b", "b", "b \nc", "a\n b", "b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("looseVariants = %q, want %q", got, want)
	}
	one := looseVariants("single")
	if one[2] != "" || one[3] != "" || one[4] != "" {
		t.Errorf("single-line variants %q should be blank", one)
	}
}

func TestInstructionZeroValue(t *testing.T) {
	var in Instruction
	if in.Follows("anything", Loose) {
		t.Fatal("zero Instruction follows")
	}
}

// TestJSONNestingLimit: detectable_format:json_format takes arrays and
// objects nested up to 10,000 deep and no deeper (REWARDS.md §3.3).
func TestJSONNestingLimit(t *testing.T) {
	for depth, want := range map[int]bool{10_000: true, 10_001: false} {
		v := strings.Repeat(`[{"a":`, depth/2) + strings.Repeat("[", depth%2) + "1" + strings.Repeat("]", depth%2) + strings.Repeat("}]", depth/2)
		got, err := Check("detectable_format:json_format", map[string]any{}, "", v, Strict)
		if err != nil || got != want {
			t.Errorf("nested %d deep: follows %v (%v), want %v", depth, got, err, want)
		}
	}
}
