package ifeval

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Sentinel errors. Every error returned by Parse, Check, Evaluate and Reward wraps
// exactly one of them.
var (
	// ErrUnknownInstruction: the instruction id is not one of IFEval's.
	ErrUnknownInstruction = errors.New("unknown instruction id")
	// ErrUnsupportedInstruction: the id is IFEval's but this package does not check
	// it (language:response_language, see the package documentation).
	ErrUnsupportedInstruction = errors.New("unsupported instruction id")
	// ErrBadKwargs: a keyword argument is missing, unknown, ill-typed or out of range.
	ErrBadKwargs = errors.New("bad instruction kwargs")
	// ErrBadInput: the instruction list and kwargs list do not line up, or are empty.
	ErrBadInput = errors.New("bad instruction list")
)

// KwargsError describes one bad keyword argument. It unwraps to ErrBadKwargs.
type KwargsError struct {
	InstructionID string
	Key           string
	Reason        string
}

func (e *KwargsError) Error() string {
	return fmt.Sprintf("ifeval: %s: kwarg %q: %s", e.InstructionID, e.Key, e.Reason)
}

// Unwrap returns ErrBadKwargs.
func (e *KwargsError) Unwrap() error { return ErrBadKwargs }

// Limits on keyword arguments. Together with the linear-time checks they bound the
// work of any check to O(len(response) × MaxWordKwargBytes × MaxListKwarg).
const (
	// MaxWordKwargBytes bounds keywords, forbidden words, letters, first words,
	// markers, section splitters and end phrases.
	MaxWordKwargBytes = 256
	// MaxTextKwargBytes bounds prompt_to_repeat.
	MaxTextKwargBytes = 16384
	// MaxListKwarg bounds the number of entries of a list kwarg.
	MaxListKwarg = 64
	// MaxCountKwarg bounds every integer kwarg.
	MaxCountKwarg = 1_000_000
)

// relation is IFEval's comparison: "less than" (actual < threshold) or "at least"
// (actual >= threshold).
type relation bool

const (
	lessThan relation = false
	atLeast  relation = true
)

func (r relation) holds(actual, threshold int) bool {
	if r == atLeast {
		return actual >= threshold
	}
	return actual < threshold
}

// kwargs reads and validates one instruction's keyword arguments. A key whose value
// is nil (JSON null) counts as absent, whatever its name, so rows that carry every
// IFEval key with nulls for the unused ones are accepted.
type kwargs struct {
	id string
	m  map[string]any
}

func newKwargs(id string, m map[string]any, allowed ...string) (kwargs, error) {
	// Report the smallest offending key so the error does not depend on map order.
	bad, found := "", false
	for key, v := range m {
		if v == nil || contains(allowed, key) {
			continue
		}
		if !found || key < bad {
			bad, found = key, true
		}
	}
	if found {
		return kwargs{}, &KwargsError{InstructionID: id, Key: bad, Reason: "not a kwarg of this instruction"}
	}
	return kwargs{id: id, m: m}, nil
}

func contains(xs []string, x string) bool {
	for _, e := range xs {
		if e == x {
			return true
		}
	}
	return false
}

func (k kwargs) fail(key, format string, args ...any) error {
	return &KwargsError{InstructionID: k.id, Key: key, Reason: fmt.Sprintf(format, args...)}
}

func (k kwargs) get(key string) (any, error) {
	v := k.m[key]
	if v == nil {
		return nil, k.fail(key, "missing")
	}
	return v, nil
}

// integer returns an integer kwarg in [min, MaxCountKwarg]. Go integers, float64
// values that are exact integers (what encoding/json produces for map[string]any)
// and json.Number are accepted.
func (k kwargs) integer(key string, min int) (int, error) {
	v, err := k.get(key)
	if err != nil {
		return 0, err
	}
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int8:
		n = int64(x)
	case int16:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case uint8:
		n = int64(x)
	case uint16:
		n = int64(x)
	case uint32:
		n = int64(x)
	case uint:
		if uint64(x) > MaxCountKwarg {
			return 0, k.fail(key, "%d is above %d", x, MaxCountKwarg)
		}
		n = int64(x)
	case uint64:
		if x > MaxCountKwarg {
			return 0, k.fail(key, "%d is above %d", x, MaxCountKwarg)
		}
		n = int64(x)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > MaxCountKwarg {
			return 0, k.fail(key, "%v is not an integer in range", x)
		}
		n = int64(x)
	case json.Number:
		p, perr := strconv.ParseInt(string(x), 10, 64)
		if perr != nil {
			return 0, k.fail(key, "%q is not an integer", string(x))
		}
		n = p
	default:
		return 0, k.fail(key, "want an integer, got %T", v)
	}
	if n < int64(min) || n > MaxCountKwarg {
		return 0, k.fail(key, "%d is outside [%d, %d]", n, min, MaxCountKwarg)
	}
	return int(n), nil
}

// str returns a string kwarg of at most max bytes, valid UTF-8.
func (k kwargs) str(key string, max int) (string, error) {
	v, err := k.get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", k.fail(key, "want a string, got %T", v)
	}
	if len(s) > max {
		return "", k.fail(key, "longer than %d bytes", max)
	}
	if !utf8.ValidString(s) {
		return "", k.fail(key, "not valid UTF-8")
	}
	return s, nil
}

// nonBlank returns a string kwarg stripped of surrounding whitespace, which must
// leave something.
func (k kwargs) nonBlank(key string, max int) (string, error) {
	s, err := k.str(key, max)
	if err != nil {
		return "", err
	}
	s = trimSpace(s)
	if s == "" {
		return "", k.fail(key, "empty")
	}
	return s, nil
}

// words returns a non-empty list of non-empty strings ([]string or []any).
func (k kwargs) words(key string) ([]string, error) {
	v, err := k.get(key)
	if err != nil {
		return nil, err
	}
	var out []string
	switch x := v.(type) {
	case []string:
		out = append(out, x...)
	case []any:
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, k.fail(key, "entry %d: want a string, got %T", i, e)
			}
			out = append(out, s)
		}
	default:
		return nil, k.fail(key, "want a list of strings, got %T", v)
	}
	if len(out) == 0 {
		return nil, k.fail(key, "empty list")
	}
	if len(out) > MaxListKwarg {
		return nil, k.fail(key, "more than %d entries", MaxListKwarg)
	}
	for i, s := range out {
		if s == "" {
			return nil, k.fail(key, "entry %d is empty", i)
		}
		if len(s) > MaxWordKwargBytes {
			return nil, k.fail(key, "entry %d is longer than %d bytes", i, MaxWordKwargBytes)
		}
		if !utf8.ValidString(s) {
			return nil, k.fail(key, "entry %d is not valid UTF-8", i)
		}
	}
	return out, nil
}

func (k kwargs) relation(key string) (relation, error) {
	v, err := k.get(key)
	if err != nil {
		return lessThan, err
	}
	switch v {
	case "less than":
		return lessThan, nil
	case "at least":
		return atLeast, nil
	}
	return lessThan, k.fail(key, `want "less than" or "at least", got %v`, v)
}
