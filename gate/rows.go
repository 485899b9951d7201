package gate

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"unicode/utf16"
	"unicode/utf8"
)

// Rule names of rows files.
const (
	RuleRowTooLarge = "row-too-large"
	RuleRowEncoding = "row-encoding"
	RuleRowSyntax   = "row-syntax"
	RuleRowSchema   = "row-schema"
	RuleBadReward   = "bad-reward"
)

// Row is one line of a rollouts rows file: the response a model gave to a
// task and the reward the miner claims for it.
//
// On the wire a row is one JSON object with the keys task_id and
// reward_claimed (strings), optionally trace (a string), and either response
// (a string: a text row) or both prompt_tokens and completion_tokens (lists
// of token ids, integers 0 to 2^31-1: a token row, the form of a task that
// binds rows to a model), in any order, each once.
type Row struct {
	TaskID   string `json:"task_id"`
	Response string `json:"response"`
	// PromptTokens and CompletionTokens are a token row's ids; both are
	// non-nil in a token row and nil in a text row.
	PromptTokens     []int `json:"prompt_tokens,omitempty"`
	CompletionTokens []int `json:"completion_tokens,omitempty"`
	// RewardClaimed is an exact rational in [0, 1] in canonical form: "0",
	// "1", or "p/q" with 0 < p < q, gcd(p, q) = 1, decimal digits without
	// leading zeros or signs (see ParseReward).
	RewardClaimed string `json:"reward_claimed"`
	// Trace is reserved for a reference to the generation trace; nil when
	// the key is absent.
	Trace *string `json:"trace,omitempty"`
}

// IsTokens reports whether r is a token row.
func (r Row) IsTokens() bool { return r.PromptTokens != nil }

// textRow and tokenRow are the two wire forms of a row, in the order their
// keys are written.
type textRow struct {
	TaskID        string  `json:"task_id"`
	Response      string  `json:"response"`
	RewardClaimed string  `json:"reward_claimed"`
	Trace         *string `json:"trace,omitempty"`
}

type tokenRow struct {
	TaskID           string  `json:"task_id"`
	PromptTokens     []int   `json:"prompt_tokens"`
	CompletionTokens []int   `json:"completion_tokens"`
	RewardClaimed    string  `json:"reward_claimed"`
	Trace            *string `json:"trace,omitempty"`
}

// MarshalJSON writes a row in its wire form: a text row with response, a
// token row with its two lists and no response.
func (r Row) MarshalJSON() ([]byte, error) {
	if r.IsTokens() {
		return json.Marshal(tokenRow{TaskID: r.TaskID, PromptTokens: r.PromptTokens, CompletionTokens: nonNil(r.CompletionTokens),
			RewardClaimed: r.RewardClaimed, Trace: r.Trace})
	}
	return json.Marshal(textRow{TaskID: r.TaskID, Response: r.Response, RewardClaimed: r.RewardClaimed, Trace: r.Trace})
}

func nonNil(ids []int) []int {
	if ids == nil {
		return []int{}
	}
	return ids
}

// MaxTokenID bounds a token id in a row.
const MaxTokenID = 1<<31 - 1

// RowError is a line of a rows file that is not a valid row.
type RowError struct {
	Line   int    // 1-based line number
	Rule   string // one of the row rule names
	Detail string
}

func (e *RowError) Error() string {
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Rule, e.Detail)
}

// maxRewardDigits bounds each of p and q in a reward "p/q".
const maxRewardDigits = 64

// ErrBadReward is wrapped by every ParseReward failure.
var ErrBadReward = errors.New("bad reward")

// ParseReward parses a claimed reward: "0", "1", or "p/q" where p and q are
// decimal integers without signs or leading zeros, 0 < p < q, gcd(p, q) = 1,
// each at most 64 digits. Every value in [0, 1] has exactly one accepted
// spelling, so equal rewards are equal strings.
func ParseReward(s string) (*big.Rat, error) {
	switch s {
	case "0":
		return new(big.Rat), nil
	case "1":
		return big.NewRat(1, 1), nil
	}
	slash := -1
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			if slash >= 0 {
				return nil, fmt.Errorf("%w: %q has more than one '/'", ErrBadReward, s)
			}
			slash = i
		}
	}
	if slash < 0 {
		return nil, fmt.Errorf("%w: %q is not 0, 1 or p/q", ErrBadReward, s)
	}
	ps, qs := s[:slash], s[slash+1:]
	p, err := parseDecimal(ps)
	if err != nil {
		return nil, fmt.Errorf("%w: numerator: %v", ErrBadReward, err)
	}
	q, err := parseDecimal(qs)
	if err != nil {
		return nil, fmt.Errorf("%w: denominator: %v", ErrBadReward, err)
	}
	if p.Sign() == 0 {
		return nil, fmt.Errorf("%w: %q: write zero as \"0\"", ErrBadReward, s)
	}
	if p.Cmp(q) >= 0 {
		return nil, fmt.Errorf("%w: %q is not below 1 (write one as \"1\")", ErrBadReward, s)
	}
	if g := new(big.Int).GCD(nil, nil, p, q); g.Cmp(big.NewInt(1)) != 0 {
		return nil, fmt.Errorf("%w: %q is not reduced (divide by %s)", ErrBadReward, s, g)
	}
	return new(big.Rat).SetFrac(p, q), nil
}

// parseDecimal parses a non-empty string of ASCII digits without a leading
// zero (unless it is "0").
func parseDecimal(s string) (*big.Int, error) {
	if s == "" {
		return nil, errors.New("empty")
	}
	if len(s) > maxRewardDigits {
		return nil, fmt.Errorf("more than %d digits", maxRewardDigits)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return nil, fmt.Errorf("%q is not a decimal integer", s)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return nil, fmt.Errorf("%q has a leading zero", s)
	}
	n, _ := new(big.Int).SetString(s, 10)
	return n, nil
}

// ParseRow parses one line of a rows file (without its line feed) into a
// Row. A nil *RowError means the row is valid: strict JSON object, exactly
// the Row keys, string values, non-empty task_id, and a canonical reward.
// The returned error's Line is 0; ReadRows fills it in.
func ParseRow(line []byte) (Row, *RowError) {
	if !utf8.Valid(line) {
		return Row{}, &RowError{Rule: RuleRowEncoding, Detail: "not valid UTF-8"}
	}
	row, rerr := scanRow(line)
	if rerr != nil {
		if rerr.Rule == RuleRowSchema && !json.Valid(line) {
			// Report a broken line as broken JSON, whatever else is wrong.
			rerr = &RowError{Rule: RuleRowSyntax, Detail: "invalid JSON"}
		}
		return Row{}, rerr
	}
	if row.TaskID == "" {
		return Row{}, &RowError{Rule: RuleRowSchema, Detail: "task_id is empty"}
	}
	if _, err := ParseReward(row.RewardClaimed); err != nil {
		return Row{}, &RowError{Rule: RuleBadReward, Detail: err.Error()}
	}
	return row, nil
}

// scanRow is a small strict parser for the one flat object a row is: it
// accepts exactly what encoding/json accepts for such an object, except that
// it refuses lone UTF-16 surrogate escapes (which encoding/json silently
// replaces), duplicate keys, unknown keys and non-string values.
func scanRow(b []byte) (Row, *RowError) {
	syntax := func(detail string) (Row, *RowError) {
		return Row{}, &RowError{Rule: RuleRowSyntax, Detail: detail}
	}
	schema := func(format string, args ...any) (Row, *RowError) {
		return Row{}, &RowError{Rule: RuleRowSchema, Detail: fmt.Sprintf(format, args...)}
	}
	var row Row
	var seen [6]bool // task_id, response, reward_claimed, trace, prompt_tokens, completion_tokens
	i := skipWS(b, 0)
	if i >= len(b) {
		return syntax("empty line")
	}
	if b[i] != '{' {
		return syntax("a row must be a JSON object")
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return syntax("object key expected")
			}
			key, next, ok := scanString(b, i)
			if !ok {
				return syntax("invalid string")
			}
			i = skipWS(b, next)
			if i >= len(b) || b[i] != ':' {
				return syntax("':' expected")
			}
			i = skipWS(b, i+1)
			if i >= len(b) {
				return syntax("value expected")
			}
			idx := -1
			if key == "prompt_tokens" || key == "completion_tokens" {
				ids, next, detail := scanIDs(b, i)
				if detail != "" {
					if b[i] == '[' {
						return schema("field %q: %s", key, detail)
					}
					return schema("field %q must be a list of token ids", key)
				}
				i = skipWS(b, next)
				if key == "prompt_tokens" {
					idx, row.PromptTokens = 4, ids
				} else {
					idx, row.CompletionTokens = 5, ids
				}
			} else {
				if b[i] != '"' {
					return schema("field %q must be a string", key)
				}
				val, next, ok := scanString(b, i)
				if !ok {
					return syntax("invalid string")
				}
				i = skipWS(b, next)
				switch key {
				case "task_id":
					idx, row.TaskID = 0, val
				case "response":
					idx, row.Response = 1, val
				case "reward_claimed":
					idx, row.RewardClaimed = 2, val
				case "trace":
					v := val
					idx, row.Trace = 3, &v
				default:
					return schema("unknown field %q", key)
				}
			}
			if seen[idx] {
				return schema("duplicate field %q", key)
			}
			seen[idx] = true
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			return syntax("',' or '}' expected")
		}
	}
	if skipWS(b, i) != len(b) {
		return syntax("data after the JSON object")
	}
	for k, name := range []string{"task_id", "", "reward_claimed"} {
		if name != "" && !seen[k] {
			return schema("missing field %q", name)
		}
	}
	switch {
	case seen[1] && (seen[4] || seen[5]):
		return schema("a row has a response or prompt_tokens and completion_tokens, not both")
	case seen[4] != seen[5]:
		return schema("a token row has both prompt_tokens and completion_tokens")
	case !seen[1] && !seen[4]:
		return schema("missing field %q", "response")
	}
	return row, nil
}

// scanIDs decodes the list of token ids starting at b[i]: '[', integers 0 to
// MaxTokenID in JSON's form (no sign, fraction, exponent or leading zero),
// ']'. It returns a non-nil slice and the index after ']', or why the value
// is not such a list.
func scanIDs(b []byte, i int) ([]int, int, string) {
	if b[i] != '[' {
		return nil, 0, "not a list"
	}
	ids := []int{}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return ids, i + 1, ""
	}
	for {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		n := i - start
		switch {
		case n == 0:
			return nil, 0, "a token id is not an integer from 0"
		case n > 1 && b[start] == '0':
			return nil, 0, "a token id has a leading zero"
		case n > 10:
			return nil, 0, fmt.Sprintf("a token id is over %d", MaxTokenID)
		}
		if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
			return nil, 0, "a token id is not an integer from 0"
		}
		v := 0
		for _, c := range b[start:i] {
			v = v*10 + int(c-'0')
		}
		if v > MaxTokenID {
			return nil, 0, fmt.Sprintf("a token id is over %d", MaxTokenID)
		}
		ids = append(ids, v)
		i = skipWS(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return ids, i + 1, ""
		}
		return nil, 0, "',' or ']' expected in a list of token ids"
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// scanString decodes the JSON string starting at b[i] == '"'. It returns the
// value and the index after the closing quote.
func scanString(b []byte, i int) (string, int, bool) {
	i++
	start := i
	for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	if i < len(b) && b[i] == '"' {
		return string(b[start:i]), i + 1, true
	}
	buf := append([]byte(nil), b[start:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return string(buf), i + 1, true
		case c < 0x20:
			return "", 0, false
		case c != '\\':
			buf = append(buf, c)
			i++
			continue
		}
		if i+1 >= len(b) {
			return "", 0, false
		}
		switch b[i+1] {
		case '"', '\\', '/':
			buf = append(buf, b[i+1])
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(b, i+2)
			if !ok {
				return "", 0, false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
					return "", 0, false
				}
				r2, ok := hex4(b, i+2)
				if !ok {
					return "", 0, false
				}
				r = utf16.DecodeRune(r, r2)
				if r == utf8.RuneError {
					return "", 0, false
				}
				i += 6
			}
			buf = utf8.AppendRune(buf, r)
			continue
		default:
			return "", 0, false
		}
		i += 2
	}
	return "", 0, false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// ReadRows streams a rows file and calls fn with each valid row and its
// 1-based line number, in file order. It stops at the first line that is not
// a valid row and returns that line's *RowError (use errors.As); if fn
// returns an error, ReadRows stops and returns it unchanged. It reads as
// ScanRows does.
func ReadRows(r io.Reader, limits RolloutLimits, fn func(line int, row Row) error) error {
	return ScanRows(r, limits, func(line int, row Row, rerr *RowError) error {
		if rerr != nil {
			return rerr
		}
		return fn(line, row)
	})
}

// ScanRows streams a rows file: one row per line, lines separated by "\n"
// (the last line may lack it). It never holds more than one line of at most
// limits.MaxRowBytes bytes (line feed excluded) in memory. For each line it
// calls fn with the 1-based line number and either the parsed row (rerr nil)
// or the reason the line is not a valid row (lines longer than MaxRowBytes
// are skipped and reported as row-too-large). If fn returns an error,
// ScanRows stops and returns it unchanged; read errors are returned wrapped.
func ScanRows(r io.Reader, limits RolloutLimits, fn func(line int, row Row, rerr *RowError) error) error {
	maxRowBytes := limits.withDefaults().MaxRowBytes
	br := bufio.NewReaderSize(r, maxRowBytes+1)
	for line := 1; ; line++ {
		data, err := br.ReadSlice('\n')
		tooLong := false
		if errors.Is(err, bufio.ErrBufferFull) {
			tooLong = true
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("reading rows line %d: %w", line, err)
		}
		eof := err == io.EOF
		if eof && len(data) == 0 && !tooLong {
			return nil
		}
		body := data
		if n := len(body); n > 0 && body[n-1] == '\n' {
			body = body[:n-1]
		}
		if !tooLong && len(body) > maxRowBytes {
			tooLong = true
		}
		var ferr error
		if tooLong {
			ferr = fn(line, Row{}, &RowError{Line: line, Rule: RuleRowTooLarge, Detail: fmt.Sprintf("longer than %d bytes", maxRowBytes)})
		} else {
			row, rerr := ParseRow(body)
			if rerr != nil {
				rerr.Line = line
				ferr = fn(line, Row{}, rerr)
			} else {
				ferr = fn(line, row, nil)
			}
		}
		if ferr != nil {
			return ferr
		}
		if eof {
			return nil
		}
	}
}
