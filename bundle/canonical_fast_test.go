package bundle

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/feval/feval/internal/strictjson"
)

// parseCanonicalReference is ParseCanonical as specified, every check in
// order: the fast acceptance in ParseCanonical must agree with it.
func parseCanonicalReference(raw []byte, v any) error {
	c, err := Canonicalize(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	if !bytes.Equal(c, raw) {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, ErrNotCanonical)
	}
	if err := strictjson.Decode(raw, v); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	again, err := Canonical(v)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	if !bytes.Equal(again, raw) {
		return fmt.Errorf("%w: it does not re-encode to the same bytes (a required field is missing, or an empty one is spelled out): %s",
			ErrMalformedRecord, firstDifference(raw, again))
	}
	return nil
}

func checkParseAgrees(t *testing.T, in []byte) {
	t.Helper()
	var got, want fuzzRecord
	gerr, werr := ParseCanonical(in, &got), parseCanonicalReference(in, &want)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("%q: ParseCanonical = %v, the checks in order give %v", in, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: ParseCanonical decoded %+v, want %+v", in, got, want)
	}
	var ga, wa any
	gerr, werr = ParseCanonical(in, &ga), parseCanonicalReference(in, &wa)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("%q into any: ParseCanonical = %v, the checks in order give %v", in, gerr, werr)
	}
}

var parseAgreeSeeds = []string{
	`{"inner":{"round":1},"items":[],"name":"a","size":1}`,
	`{"items":[{"round":2}],"labels":{"K":"v"},"name":"","note":"n","size":-3}`,
	`{"Name":"a","items":[],"size":1}`,
	`{"items":[],"name":"a","note":"","size":1}`,
	`{"items":[],"name":"a","size":1,"name":"b"}`,
	`{"items":[],"name":"a", "size":1}`,
	`{"size":1,"items":[],"name":"a"}`,
	`{"items":[],"name":"a","size":-0}`,
	`{"items":[],"name":"a","size":1.5}`,
	`{"items":null,"name":"a","size":1}`,
	`{"items":[],"name":"\u00e9","size":1}`,
	`{"items":[],"name":"é","size":1}`,
	"{\"items\":[],\"name\":\"\xff\",\"size\":1}",
	`{"items":[],"labels":{"😀":"x","￿":"y"},"name":"a","size":1}`,
	`{"items":[],"labels":{"￿":"y","😀":"x"},"name":"a","size":1}`,
	`[1,2]`, `1`, `"s"`, `{}`, ``, `{`,
}

// TestParseCanonicalFastAgrees: accepting a record after one decode and one
// encode gives what the checks in order give, errors included.
func TestParseCanonicalFastAgrees(t *testing.T) {
	for _, s := range parseAgreeSeeds {
		checkParseAgrees(t, []byte(s))
	}
}

func FuzzParseCanonicalFastAgrees(f *testing.F) {
	for _, s := range parseAgreeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkParseAgrees)
}

// TestLessUTF16: the byte-wise shortcut orders as UTF-16 code units do,
// including characters beyond U+FFFF against those just below it.
func TestLessUTF16(t *testing.T) {
	ref := func(a, b string) bool {
		ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
		for i := 0; i < len(ua) && i < len(ub); i++ {
			if ua[i] != ub[i] {
				return ua[i] < ub[i]
			}
		}
		return len(ua) < len(ub)
	}
	words := []string{"", "a", "b", "ab", "A", "é", "ÿ", "\u0100", "\ud7ff", "\ue000", "\uffff", "😀", "a😀", "a\uffff", "𐀀", "~", "\x00"}
	for _, a := range words {
		for _, b := range words {
			if got, want := lessUTF16(a, b), ref(a, b); got != want {
				t.Errorf("lessUTF16(%q, %q) = %v, want %v", a, b, got, want)
			}
		}
	}
}

var canonAgreeSeeds = []string{
	`{"b":1,"a":[true,false,null,-0,0,-12,"x"],"c":{"z":{},"y":[]}}`,
	`{"a":1,"a":2}`, `{"a":1.5}`, `{"a":1e3}`, `{"a":01}`, `[1,]`, `{"a":1,}`, `{"a" 1}`,
	`"\u00e9\n\t\"\\\/\b\f\r\u0001\u001f"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800x"`, `"\x"`, `"\u12"`,
	"\"a\x01\"", ` [ 1 , 2 ] `, `{} {}`, `{}x`, ``, ` `, `-`, `-a`, `tru`, `nul`, `[`, `{`, `"`,
	`{"😀":1,"￿":2,"é":3,"a":4,"":5}`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	`123456789012345678901234567890`, `-0`, `0`, `"` + "\u2028" + `"`,
}

func checkCanonAgrees(t *testing.T, in []byte) {
	t.Helper()
	if !utf8.Valid(in) {
		return // Canonicalize refuses it before either
	}
	got, ok := canonFast(in)
	want, err := canonTokens(in)
	if ok && (err != nil || !bytes.Equal(got, want)) {
		t.Fatalf("%q: canonFast gives %q, the token stream %q (%v)", in, got, want, err)
	}
}

// TestCanonFastAgrees: the one-pass canonicalizer accepts only what the
// token stream accepts, with the same bytes, and takes the usual records.
func TestCanonFastAgrees(t *testing.T) {
	for _, s := range canonAgreeSeeds {
		checkCanonAgrees(t, []byte(s))
	}
	for _, s := range []string{canonAgreeSeeds[0], `"\u00e9\n\t\"\\\/\b\f\r\u0001\u001f"`, `{"😀":1,"￿":2,"é":3,"a":4,"":5}`} {
		if _, ok := canonFast([]byte(s)); !ok {
			t.Errorf("%q: canonFast left it to the token stream", s)
		}
	}
}

func FuzzCanonicalFastAgrees(f *testing.F) {
	for _, s := range canonAgreeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkCanonAgrees)
}
