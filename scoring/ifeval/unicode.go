package ifeval

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python's character predicates, which IFEval's checks rely on (str.isupper,
// str.islower, the \w and \d of the re module, str.lower). Go's unicode tables
// (Unicode 15.0) decide; Python 3.11 uses Unicode 14.0, so the two differ only
// on characters first assigned in Unicode 15.0, which Python 3.11 treats as
// unassigned (TestPythonCharacterClasses compares every other code point with
// /usr/bin/python3).

// pyIsWord is Python's \w: str.isalnum() or "_", which is exactly a letter (L*)
// or a number (N*) or "_". Combining marks are not word characters.
func pyIsWord(r rune) bool {
	if r < utf8.RuneSelf {
		return isASCIIWord(byte(r))
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r)
}

// pyIsDecimal is Python's \d and str.isdecimal: a decimal digit (Nd).
func pyIsDecimal(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9'
	}
	return unicode.IsDigit(r)
}

// pyIsUpper is the Uppercase property Python's str.isupper tests per
// character: Lu or Other_Uppercase (such as the circled capitals Ⓐ).
func pyIsUpper(r rune) bool {
	if r < utf8.RuneSelf {
		return 'A' <= r && r <= 'Z'
	}
	return unicode.IsUpper(r) || unicode.Is(unicode.Other_Uppercase, r)
}

// pyIsLower is the Lowercase property Python's str.islower tests per
// character: Ll or Other_Lowercase (such as ª, º and the modifier letters ʰ).
func pyIsLower(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z'
	}
	return unicode.IsLower(r) || unicode.Is(unicode.Other_Lowercase, r)
}

// pyIsTitle is Python's titlecase test per character: Lt.
func pyIsTitle(r rune) bool { return r >= utf8.RuneSelf && unicode.IsTitle(r) }

// isUpperText is Python's str.isupper: no lowercase or titlecase character and
// at least one uppercase one.
func isUpperText(s string) bool {
	cased := false
	for _, r := range s {
		if pyIsLower(r) || pyIsTitle(r) {
			return false
		}
		cased = cased || pyIsUpper(r)
	}
	return cased
}

// isLowerText is Python's str.islower: no uppercase or titlecase character and
// at least one lowercase one.
func isLowerText(s string) bool {
	cased := false
	for _, r := range s {
		if pyIsUpper(r) || pyIsTitle(r) {
			return false
		}
		cased = cased || pyIsLower(r)
	}
	return cased
}

// pyLower is str.lower for the Punkt model's type lookups: Unicode lowercase
// mappings, with the one unconditional multi-character mapping (İ to i̇).
// Python also applies the contextual final sigma; the model's types are ASCII,
// so the form of a lowered Σ never changes a lookup.
func pyLower(s string) string {
	if !strings.ContainsRune(s, 'İ') {
		return strings.ToLower(s)
	}
	return strings.ToLower(strings.ReplaceAll(s, "İ", "i\u0307"))
}
