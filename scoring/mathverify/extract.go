package mathverify

import (
	"fmt"
	"slices"
	"strings"
)

// ExtractMethod says which rule found the final answer in a response.
type ExtractMethod uint8

const (
	// NotFound: no rule applied.
	NotFound ExtractMethod = iota
	// Boxed: the content of the last well-formed \boxed{...} or \fbox{...}.
	Boxed
	// FinalAnswer: the text after the last "final answer is" / "final answer:".
	FinalAnswer
	// AnswerIs: the text after the last "answer is" / "answer:".
	AnswerIs
	// LastMath: the last $...$, $$...$$, \(...\) or \[...\] on the last non-empty line.
	LastMath
	// Whole: the whole response, when it is one short line.
	Whole
)

var methodNames = [...]string{"none", "boxed", "final_answer", "answer_is", "last_math", "whole"}

// String returns the method's name: none, boxed, final_answer, answer_is,
// last_math or whole.
func (h ExtractMethod) String() string {
	if int(h) < len(methodNames) {
		return methodNames[h]
	}
	return fmt.Sprintf("method(%d)", uint8(h))
}

// MarshalText encodes the method by its name.
func (h ExtractMethod) MarshalText() ([]byte, error) {
	if int(h) >= len(methodNames) {
		return nil, fmt.Errorf("mathverify: invalid extract method %d", uint8(h))
	}
	return []byte(h.String()), nil
}

// UnmarshalText decodes a method name.
func (h *ExtractMethod) UnmarshalText(b []byte) error {
	for i, n := range methodNames {
		if string(b) == n {
			*h = ExtractMethod(i)
			return nil
		}
	}
	return fmt.Errorf("mathverify: unknown extract method %q", b)
}

// wholeLimit is the longest response taken whole as an answer.
const wholeLimit = 64

// Extract finds the final answer in a model response. The rules are tried in
// order and the first that yields a non-empty answer wins: Boxed, FinalAnswer,
// AnswerIs, LastMath, Whole (see the package documentation). It runs in time
// linear in the length of the response and never fails; ok is false when no rule
// applies.
func Extract(response string) (answer string, how ExtractMethod, ok bool) {
	if s, ok := lastBoxed(response); ok {
		return s, Boxed, true
	}
	lower := asciiLower(response)
	if s, ok := afterPhrase(response, lower, "final answer is", "final answer:"); ok {
		return s, FinalAnswer, true
	}
	if s, ok := afterPhrase(response, lower, "answer is", "answer:"); ok {
		return s, AnswerIs, true
	}
	line := lastLine(response)
	if s, ok := lastMath(line); ok {
		return s, LastMath, true
	}
	if !strings.Contains(strings.TrimSpace(response), "\n") && len(line) <= wholeLimit {
		if t := trimAnswer(line); t != "" {
			return t, Whole, true
		}
	}
	return "", NotFound, false
}

// asciiLower lowers ASCII letters only, so byte offsets stay valid.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// lastBoxed returns the content of the last well-formed \boxed or \fbox.
func lastBoxed(s string) (string, bool) {
	var starts []int // index just after the command name
	for _, cmd := range []string{`\boxed`, `\fbox`} {
		for i := 0; ; {
			k := strings.Index(s[i:], cmd)
			if k < 0 {
				break
			}
			at := i + k + len(cmd)
			if at >= len(s) || !isLetter(s[at]) {
				starts = append(starts, at)
			}
			i = at
		}
	}
	if len(starts) == 0 {
		return "", false
	}
	first := len(s)
	for _, a := range starts {
		first = min(first, a)
	}
	// match braces once, from the first command on: close[i] is the index of
	// the brace closing the one opened at first+i, or -1.
	close := make([]int32, len(s)-first)
	for i := range close {
		close[i] = -1
	}
	var stack []int
	for i := first; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			stack = append(stack, i)
		case '}':
			if len(stack) > 0 {
				o := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				close[o-first] = int32(i)
			}
		}
	}
	// try the commands from the last one backwards
	slices.Sort(starts)
	for k := len(starts) - 1; k >= 0; k-- {
		at := starts[k]
		j := at
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		if j < len(s) && s[j] == '{' {
			if c := close[j-first]; c >= 0 {
				if body := strings.TrimSpace(s[j+1 : c]); body != "" {
					return joinBoxes(s, starts[:k], close, first, commandStart(s, at), body), true
				}
			}
			continue
		}
		// \boxed 5: one space-delimited token
		if j > at {
			k := j
			for k < len(s) && s[k] != ' ' && s[k] != '\n' && s[k] != '$' && s[k] != '\t' {
				k++
			}
			if body := strings.TrimSpace(s[j:k]); body != "" {
				return body, true
			}
		}
	}
	return "", false
}

// commandStart returns the index of the backslash of the \boxed or \fbox whose
// name ends at at.
func commandStart(s string, at int) int {
	if strings.HasSuffix(s[:at], `\boxed`) {
		return at - len(`\boxed`)
	}
	return at - len(`\fbox`)
}

// joinBoxes extends the answer of the last box (body, whose command starts at
// from) with the boxes before it that are joined to it only by connectors
// (isConnector): "\boxed{1} and \boxed{2}" is the list "1, 2". earlier are the
// name ends of the commands before it, in order.
func joinBoxes(s string, earlier []int, close []int32, first, from int, body string) string {
	parts := []string{body}
	for k := len(earlier) - 1; k >= 0; k-- {
		at := earlier[k]
		j := at
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		if j >= len(s) || s[j] != '{' {
			break
		}
		c := int(close[j-first])
		if c < 0 || c >= from || !isConnector(s[c+1:from]) {
			break
		}
		b := strings.TrimSpace(s[j+1 : c])
		if b == "" {
			break
		}
		parts = append(parts, b)
		from = commandStart(s, at)
	}
	if len(parts) == 1 {
		return body
	}
	slices.Reverse(parts)
	return strings.Join(parts, ", ")
}

// connectorMarkup is the markup allowed around the words of a connector.
var connectorMarkup = strings.NewReplacer(`\text{`, " ", `\mathrm{`, " ", "}", " ",
	`\qquad`, " ", `\quad`, " ", `\(`, " ", `\)`, " ", `\[`, " ", `\]`, " ",
	`\,`, " ", `\;`, " ", `\ `, " ", "$", " ", ",", " , ", ";", " ; ")

// isConnector reports whether t, the text between two boxes, only joins them:
// commas, semicolons, "and", "or", spaces, math delimiters and \text, \quad.
func isConnector(t string) bool {
	if len(t) > 64 {
		return false
	}
	for _, w := range strings.Fields(connectorMarkup.Replace(t)) {
		switch strings.ToLower(w) {
		case ",", ";", "and", "or":
		default:
			return false
		}
	}
	return true
}

// afterPhrase returns the answer after the last occurrence of any phrase.
func afterPhrase(s, lower string, phrases ...string) (string, bool) {
	best, blen := -1, 0
	for _, p := range phrases {
		if i := strings.LastIndex(lower, p); i > best {
			best, blen = i, len(p)
		}
	}
	if best < 0 {
		return "", false
	}
	rest := strings.TrimLeft(s[best+blen:], " \t:")
	if strings.HasPrefix(rest, "\n") {
		rest = strings.TrimLeft(rest, " \t\r\n")
	}
	if m, ok := leadingMath(rest); ok {
		return m, true
	}
	if i := strings.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.Index(rest, ". "); i >= 0 {
		rest = rest[:i]
	}
	rest = trimAnswer(rest)
	return rest, rest != ""
}

// trimAnswer removes surrounding space, a final full stop and bold markers.
func trimAnswer(s string) string {
	s = strings.TrimSpace(s)
	s = strings.Trim(s, "*")
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(s, ".")
	return strings.TrimSpace(s)
}

var mathDelims = [...][2]string{{"$$", "$$"}, {"$", "$"}, {`\(`, `\)`}, {`\[`, `\]`}}

// leadingMath returns the content of a math span that starts s.
func leadingMath(s string) (string, bool) {
	for _, d := range mathDelims {
		if strings.HasPrefix(s, d[0]) {
			body := s[len(d[0]):]
			if i := strings.Index(body, d[1]); i > 0 {
				if m := strings.TrimSpace(body[:i]); m != "" {
					return m, true
				}
			}
			return "", false
		}
	}
	return "", false
}

func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	i := strings.LastIndexByte(s, '\n')
	if i < 0 {
		return strings.TrimSpace(s)
	}
	// a display block ($$...$$ or \[...\]) that ends the text counts as its
	// last line, also when it spans lines
	for _, d := range [...][2]string{{"$$", "$$"}, {`\[`, `\]`}} {
		t := strings.TrimRight(strings.TrimSpace(s), ".")
		if strings.HasSuffix(t, d[1]) {
			if o := strings.LastIndex(t[:len(t)-len(d[1])], d[0]); o >= 0 && o < i {
				ls := strings.LastIndexByte(t[:o], '\n')
				return strings.TrimSpace(t[ls+1:])
			}
		}
	}
	return strings.TrimSpace(s[i+1:])
}

// mathSpan is a math span of a line: its extent with the delimiters, and its
// trimmed body.
type mathSpan struct {
	from, to int
	body     string
}

// lastMath returns the content of the last complete math span in line, joined
// with the spans before it that only a connector separates from it.
func lastMath(line string) (string, bool) {
	var spans []mathSpan
	for i := 0; i < len(line); {
		if line[i] == '\\' && i+1 < len(line) && line[i+1] == '$' { // an escaped dollar sign
			i += 2
			continue
		}
		opened := false
		for _, d := range mathDelims {
			if strings.HasPrefix(line[i:], d[0]) {
				body := line[i+len(d[0]):]
				j := indexClose(body, d[1])
				if j < 0 {
					return joinSpans(line, spans)
				}
				if m := strings.TrimSpace(body[:j]); m != "" {
					spans = append(spans, mathSpan{i, i + len(d[0]) + j + len(d[1]), m})
				}
				i += len(d[0]) + j + len(d[1])
				opened = true
				break
			}
		}
		if !opened {
			i++
		}
	}
	return joinSpans(line, spans)
}

// indexClose returns the index of the closing delimiter d in body, skipping an
// escaped dollar sign (\$) when d is made of dollar signs, or -1.
func indexClose(body, d string) int {
	for off := 0; ; {
		j := strings.Index(body[off:], d)
		if j < 0 {
			return -1
		}
		j += off
		if d[0] != '$' || j == 0 || body[j-1] != '\\' {
			return j
		}
		off = j + 1
	}
}

// joinSpans returns the body of the last span, joined (", ") with the spans
// before it that only a connector (isConnector) separates from it:
// "$1$ and $2$" is the list "1, 2".
func joinSpans(line string, spans []mathSpan) (string, bool) {
	if len(spans) == 0 {
		return "", false
	}
	k := len(spans) - 1
	for k > 0 && isConnector(line[spans[k-1].to:spans[k].from]) {
		k--
	}
	parts := make([]string, 0, len(spans)-k)
	for _, sp := range spans[k:] {
		parts = append(parts, sp.body)
	}
	return strings.Join(parts, ", "), true
}
