package mathverify

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF     tokKind = iota
	tNum             // number literal: digits, '.', optional exponent "e±d", optional repetend "(d)"
	tIdent           // variable name
	tWord            // prose word
	tUnit            // unit word (ignored)
	tSep             // "or" / "and" between list elements
	tPlus            // +
	tMinus           // -
	tPM              // \pm
	tMP              // \mp
	tMul             // \cdot \times * ·
	tDiv             // / \div
	tCaret           // ^
	tUnder           // _
	tBang            // !
	tPct             // % \% "percent"
	tDeg             // \circ ° \degree "degrees"
	tComma           // ,
	tSemi            // ;
	tEq              // =
	tLT              // <
	tGT              // >
	tLE              // \le
	tGE              // \ge
	tNE              // \ne
	tIn              // \in
	tLParen          // (
	tRParen          // )
	tLBrack          // [
	tRBrack          // ]
	tLBrace          // {
	tRBrace          // }
	tLSet            // \{
	tRSet            // \}
	tBar             // | \lvert \rvert
	tCup             // \cup
	tEmpty           // \emptyset
	tReals           // \mathbb{R}
	tPi              // \pi
	tInf             // \infty
	tFrac            // \frac \dfrac \tfrac \cfrac
	tSqrt            // \sqrt sqrt √
	tBinom           // \binom
	tFunc            // \sin ... (text: name)
	tLFloor          // \lfloor
	tRFloor          // \rfloor
	tLCeil           // \lceil
	tRCeil           // \rceil
	tUnknown         // anything else (text: what)
)

type token struct {
	kind  tokKind
	text  string
	space bool // whitespace precedes the token
}

type lexer struct {
	src   string
	i     int
	toks  []token
	space bool
	depth int
	m     *meter
}

// lex splits an answer into tokens. It charges one unit of fuel per input byte.
func lex(src string, m *meter) []token {
	m.spend(len(src) + 1)
	lx := &lexer{src: src, m: m, toks: make([]token, 0, len(src)/2+4)}
	lx.run(false)
	return lx.toks
}

func (lx *lexer) emit(k tokKind, text string) {
	switch k {
	case tLParen, tLBrack, tLBrace, tLSet:
		lx.depth++
	case tRParen, tRBrack, tRBrace, tRSet:
		lx.depth--
	}
	lx.toks = append(lx.toks, token{kind: k, text: text, space: lx.space})
	lx.space = false
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// run tokenizes lx.src[lx.i:]. In text mode every run of letters is a word.
func (lx *lexer) run(text bool) {
	s := lx.src
	for lx.i < len(s) {
		c := s[lx.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '~':
			lx.space = true
			lx.i++
		case isDigit(c) || (c == '.' && lx.i+1 < len(s) && isDigit(s[lx.i+1])):
			lx.number()
		case isLetter(c):
			j := lx.i
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			w := s[lx.i:j]
			lx.i = j
			if text {
				lx.textWord(w)
			} else {
				lx.word(w)
			}
		case c == '\\':
			lx.command(text)
		case c < utf8.RuneSelf:
			lx.i++
			lx.punct(c)
		default:
			r, n := utf8.DecodeRuneInString(s[lx.i:])
			lx.i += n
			lx.unicode(r, text)
		}
	}
}

func (lx *lexer) punct(c byte) {
	switch c {
	case '+':
		lx.emit(tPlus, "")
	case '-':
		lx.emit(tMinus, "")
	case '*':
		if lx.i < len(lx.src) && lx.src[lx.i] == '*' { // ** is a power
			lx.i++
			lx.emit(tCaret, "")
			return
		}
		lx.emit(tMul, "")
	case '/':
		lx.emit(tDiv, "")
	case '^':
		lx.emit(tCaret, "")
	case '_':
		lx.emit(tUnder, "")
	case '!':
		if lx.i < len(lx.src) && lx.src[lx.i] == '=' { // x != 3
			lx.i++
			lx.emit(tNE, "")
			break
		}
		lx.emit(tBang, "")
	case '%':
		lx.emit(tPct, "")
	case ',':
		lx.emit(tComma, "")
	case ';':
		lx.emit(tSemi, "")
	case '=':
		lx.emit(tEq, "")
	case '<':
		if lx.i < len(lx.src) && lx.src[lx.i] == '=' {
			lx.i++
			lx.emit(tLE, "")
			return
		}
		lx.emit(tLT, "")
	case '>':
		if lx.i < len(lx.src) && lx.src[lx.i] == '=' {
			lx.i++
			lx.emit(tGE, "")
			return
		}
		lx.emit(tGT, "")
	case '(':
		lx.emit(tLParen, "")
	case ')':
		lx.emit(tRParen, "")
	case '[':
		lx.emit(tLBrack, "")
	case ']':
		lx.emit(tRBrack, "")
	case '{':
		lx.emit(tLBrace, "")
	case '}':
		lx.emit(tRBrace, "")
	case '|':
		lx.emit(tBar, "")
	case '$', '&', '\'', '"', '`':
		// math delimiters, alignment marks and quotes carry no value
		lx.space = true
	case '.':
		// a full stop; a trailing one is dropped by the caller, others are prose
		if lx.i < len(lx.src) {
			lx.emit(tUnknown, ".")
		}
	case ':':
		lx.emit(tUnknown, ":")
	default:
		lx.emit(tUnknown, string(c))
	}
}

// number reads digits[.digits][e±digits], thousands groups and a repetend.
func (lx *lexer) number() {
	s := lx.src
	var b strings.Builder
	j := lx.i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	b.WriteString(s[lx.i:j])
	lead := j - lx.i
	// thousands separators: "1{,}234", "1\,234", "1,\!234" (also "1,\! 234"),
	// and "1,234,567" or "1 234 567" outside brackets when the first group has
	// at most three digits and no space follows a comma.
	for lead > 0 {
		sep := 0
		switch {
		case strings.HasPrefix(s[j:], "{,}"):
			sep = 3
		case strings.HasPrefix(s[j:], `,\! `):
			sep = 4
		case strings.HasPrefix(s[j:], `,\!`):
			sep = 3
		case strings.HasPrefix(s[j:], `\,`):
			sep = 2
		case j < len(s) && (s[j] == ',' || s[j] == ' ') && lx.depth == 0 && lead <= 3:
			sep = 1
		}
		if sep == 0 || j+sep+3 > len(s) {
			break
		}
		g := s[j+sep : j+sep+3]
		if !isDigit(g[0]) || !isDigit(g[1]) || !isDigit(g[2]) || (j+sep+3 < len(s) && isDigit(s[j+sep+3])) {
			break
		}
		b.WriteString(g)
		j += sep + 3
	}
	if j < len(s) && s[j] == '.' {
		k := j + 1
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if k > j+1 || strings.HasPrefix(s[k:], `\overline`) || strings.HasPrefix(s[k:], `\bar`) {
			b.WriteString(s[j:k])
			j = k
		}
	}
	// scientific notation, only directly attached: 1.5e3, 2E-7
	if j+1 < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if s[k] == '+' || s[k] == '-' {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			e := k
			for e < len(s) && isDigit(s[e]) {
				e++
			}
			b.WriteByte('e')
			b.WriteString(s[j+1 : e])
			j = e
		}
	}
	lx.i = j
	lx.emit(tNum, b.String())
}

// unitWords are the unit words of mathverify/2 (REWARDS.md §2.3 lists them,
// and a test holds the list to this set), matched in any letter case.
var unitWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`unit units cm m km mm nm in inch inches ft foot feet
		yd yard yards mi mile miles meter meters metre metres
		centimeter centimeters centimetre centimetres millimeter millimeters
		kilometer kilometers kilometre kilometres g gram grams kg
		kilogram kilograms mg lb lbs pound pounds oz ounce ounces
		l liter liters litre litres ml s sec secs second seconds
		min mins minute minutes h hr hrs hour hours day days
		week weeks month months year years dollar dollars cent cents
		mph kph usd eur euro euros gbp sq square cubic way ways people students items
		times points cups tiles coins marbles balls handshakes squares
		triangles rectangles numbers integers outcomes arrangements
		committees games steps moves pairs digits boxes`) {
		unitWords[w] = true
	}
}

func isUnitWord(w string) bool { return unitWords[strings.ToLower(w)] }

func isFuncName(w string) bool {
	switch w {
	case "sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan",
		"sinh", "cosh", "tanh", "ln", "log", "lg", "exp", "max", "min", "gcd", "lcm", "det", "arg":
		return true
	}
	return false
}

// word handles a run of ASCII letters in math mode.
func (lx *lexer) word(w string) {
	lw := strings.ToLower(w)
	switch {
	case lw == "sqrt":
		lx.emit(tSqrt, "plain")
	case lw == "pi":
		lx.emit(tPi, "")
	case lw == "inf" || lw == "infty" || lw == "infinity":
		lx.emit(tInf, "")
	case lw == "or" || lw == "and":
		lx.emit(tSep, lw)
	case isFuncName(lw):
		lx.emit(tFunc, lw)
	case lw == "percent" || lw == "pct" || lw == "percentage":
		lx.emit(tPct, "")
	case lw == "deg" || lw == "degree" || lw == "degrees":
		lx.emit(tDeg, "")
	case len(w) >= 2 && isUnitWord(w):
		lx.emit(tUnit, lw)
	case len(w) >= 4:
		lx.emit(tWord, lw)
	default:
		for k := 0; k < len(w); k++ {
			lx.emit(tIdent, w[k:k+1])
		}
	}
}

// textWord handles a word inside \text{...}.
func (lx *lexer) textWord(w string) {
	lw := strings.ToLower(w)
	switch {
	case lw == "or" || lw == "and":
		lx.emit(tSep, lw)
	case lw == "percent" || lw == "pct" || lw == "percentage":
		lx.emit(tPct, "")
	case lw == "deg" || lw == "degree" || lw == "degrees":
		lx.emit(tDeg, "")
	case isUnitWord(w):
		lx.emit(tUnit, lw)
	default:
		lx.emit(tWord, lw)
	}
}

// braced returns the content of the balanced {...} group at lx.i (after optional
// spaces) and moves past it; ok is false when there is none.
func (lx *lexer) braced() (string, bool) {
	s := lx.src
	j := lx.i
	for j < len(s) && s[j] == ' ' {
		j++
	}
	if j >= len(s) || s[j] != '{' {
		return "", false
	}
	depth := 0
	for k := j; k < len(s); k++ {
		switch s[k] {
		case '\\':
			k++
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				lx.i = k + 1
				return s[j+1 : k], true
			}
		}
	}
	return "", false
}

// sub tokenizes src as a nested unit (the content of \text{...} and the like).
func (lx *lexer) sub(src string, text bool) {
	saved, savedI := lx.src, lx.i
	lx.src, lx.i = src, 0
	lx.run(text)
	lx.src, lx.i = saved, savedI
	lx.space = true
}

func allLetters(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && r != ' ' {
			return false
		}
	}
	return true
}

func (lx *lexer) command(text bool) {
	s := lx.src
	lx.i++ // backslash
	if lx.i >= len(s) {
		lx.emit(tUnknown, `\`)
		return
	}
	if !isLetter(s[lx.i]) {
		c := s[lx.i]
		lx.i++
		switch c {
		case '{':
			lx.emit(tLSet, "")
		case '}':
			lx.emit(tRSet, "")
		case ',', ';', ':', '!', ' ', '>', '\\':
			lx.space = true
		case '%':
			lx.emit(tPct, "")
		case '$':
			lx.space = true // currency sign
		case '|':
			lx.emit(tBar, "")
		case '(', ')', '[', ']':
			lx.space = true // math delimiters \( \) \[ \]
		default:
			lx.emit(tUnknown, `\`+string(c))
		}
		return
	}
	j := lx.i
	for j < len(s) && isLetter(s[j]) {
		j++
	}
	name := s[lx.i:j]
	lx.i = j
	switch name {
	case "left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr",
		"biggl", "biggr", "Biggl", "Biggr", "middle":
		// sizing: skip, and an invisible delimiter "." after it
		k := lx.i
		for k < len(s) && s[k] == ' ' {
			k++
		}
		if k < len(s) && s[k] == '.' {
			lx.i = k + 1
		}
	case "displaystyle", "textstyle", "scriptstyle", "limits", "nolimits", "quad", "qquad",
		"space", "mathstrut", "strut", "allowbreak", "nonumber", "notag", "cr", "newline":
		lx.space = true
	case "hspace", "vspace", "phantom", "hphantom", "vphantom", "label", "tag":
		lx.braced()
		lx.space = true
	case "frac", "dfrac", "tfrac", "cfrac":
		lx.emit(tFrac, "")
	case "sqrt":
		lx.emit(tSqrt, "")
	case "binom", "dbinom", "tbinom":
		lx.emit(tBinom, "")
	case "pi":
		lx.emit(tPi, "")
	case "infty", "infin":
		lx.emit(tInf, "")
	case "pm":
		lx.emit(tPM, "")
	case "mp":
		lx.emit(tMP, "")
	case "cdot", "times", "ast", "cdotp":
		lx.emit(tMul, "")
	case "div":
		lx.emit(tDiv, "")
	case "le", "leq", "leqslant":
		lx.emit(tLE, "")
	case "ge", "geq", "geqslant":
		lx.emit(tGE, "")
	case "lt":
		lx.emit(tLT, "")
	case "gt":
		lx.emit(tGT, "")
	case "ne", "neq":
		lx.emit(tNE, "")
	case "in":
		lx.emit(tIn, "")
	case "cup":
		lx.emit(tCup, "")
	case "emptyset", "varnothing":
		lx.emit(tEmpty, "")
	case "circ", "degree":
		lx.emit(tDeg, "")
	case "lbrace":
		lx.emit(tLSet, "")
	case "rbrace":
		lx.emit(tRSet, "")
	case "lbrack":
		lx.emit(tLBrack, "")
	case "rbrack":
		lx.emit(tRBrack, "")
	case "langle":
		lx.emit(tLParen, "")
	case "rangle":
		lx.emit(tRParen, "")
	case "lvert", "rvert", "vert", "lVert", "rVert", "Vert":
		lx.emit(tBar, "")
	case "lfloor":
		lx.emit(tLFloor, "")
	case "rfloor":
		lx.emit(tRFloor, "")
	case "lceil":
		lx.emit(tLCeil, "")
	case "rceil":
		lx.emit(tRCeil, "")
	case "overline", "bar":
		lx.repetend(name)
	case "text", "textbf", "textit", "textrm", "textnormal", "textsf", "texttt", "mbox", "hbox", "emph":
		if body, ok := lx.braced(); ok {
			lx.sub(body, true)
		} else {
			lx.emit(tUnknown, `\`+name)
		}
	case "mathrm", "mathbf", "mathit", "mathsf", "mathtt", "boldsymbol", "bm", "mathnormal", "operatorname":
		body, ok := lx.braced()
		switch {
		case !ok:
			lx.emit(tUnknown, `\`+name)
		case isFuncName(strings.TrimSpace(body)):
			lx.emit(tFunc, strings.TrimSpace(body))
		case allLetters(body) && len(strings.TrimSpace(body)) >= 2:
			lx.sub(body, true)
		default:
			lx.sub(body, text)
		}
	case "boxed", "fbox":
		if body, ok := lx.braced(); ok {
			lx.sub(body, text)
		} else {
			lx.emit(tUnknown, `\`+name)
		}
	case "mathbb":
		body, ok := lx.braced()
		if ok && strings.TrimSpace(body) == "R" {
			lx.emit(tReals, "")
		} else {
			lx.emit(tUnknown, `\mathbb`)
		}
	case "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta",
		"vartheta", "iota", "kappa", "lambda", "mu", "nu", "xi", "rho", "varrho", "sigma",
		"tau", "upsilon", "phi", "varphi", "chi", "psi", "omega", "Gamma", "Delta", "Theta",
		"Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega", "ell":
		lx.emit(tIdent, `\`+name)
	default:
		if isFuncName(name) {
			lx.emit(tFunc, name)
			return
		}
		lx.emit(tUnknown, `\`+name)
	}
}

// repetend attaches \overline{digits} to a preceding decimal number as its
// repeating part: 0.1\overline{6} is 1/6.
func (lx *lexer) repetend(name string) {
	body, ok := lx.braced()
	n := len(lx.toks)
	if ok && n > 0 && !lx.space && lx.toks[n-1].kind == tNum {
		prev := lx.toks[n-1].text
		if strings.Contains(prev, ".") && !strings.ContainsAny(prev, "e(") && body != "" && strings.Trim(body, "0123456789") == "" {
			lx.toks[n-1].text = prev + "(" + body + ")"
			return
		}
	}
	lx.emit(tUnknown, `\`+name)
}

func (lx *lexer) unicode(r rune, text bool) {
	switch r {
	case '−', '–', '—':
		lx.emit(tMinus, "")
	case '×', '·', '⋅', '∗':
		lx.emit(tMul, "")
	case '÷':
		lx.emit(tDiv, "")
	case '±':
		lx.emit(tPM, "")
	case '∓':
		lx.emit(tMP, "")
	case '≤', '⩽':
		lx.emit(tLE, "")
	case '≥', '⩾':
		lx.emit(tGE, "")
	case '≠':
		lx.emit(tNE, "")
	case '∈':
		lx.emit(tIn, "")
	case '∞':
		lx.emit(tInf, "")
	case 'π':
		lx.emit(tPi, "")
	case '√':
		lx.emit(tSqrt, "plain")
	case '°':
		lx.emit(tDeg, "")
	case '€', '£', '¥':
		// currency signs carry no value, like $
		lx.space = true
	case '∪':
		lx.emit(tCup, "")
	case '∅':
		lx.emit(tEmpty, "")
	case 'ℝ':
		lx.emit(tReals, "")
	case '¹':
		lx.emit(tCaret, "")
		lx.emit(tNum, "1")
	case '²':
		lx.emit(tCaret, "")
		lx.emit(tNum, "2")
	case '³':
		lx.emit(tCaret, "")
		lx.emit(tNum, "3")
	case '\u00a0', '\u2009', '\u202f', '\u2005':
		lx.space = true
	default:
		switch {
		case unicode.IsSpace(r):
			lx.space = true
		case !text && unicode.Is(unicode.Greek, r) && unicode.IsLetter(r):
			lx.emit(tIdent, string(r))
		case unicode.IsLetter(r):
			// a run of non-ASCII letters is prose
			j := lx.i
			for j < len(lx.src) {
				r2, n := utf8.DecodeRuneInString(lx.src[j:])
				if !unicode.IsLetter(r2) {
					break
				}
				j += n
			}
			lx.emit(tWord, string(r)+lx.src[lx.i:j])
			lx.i = j
		default:
			lx.emit(tUnknown, string(r))
		}
	}
}
