package web

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Field is one line of a record's summary.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// maxSummaryValue bounds one summary value; longer ones are cut with "…".
const maxSummaryValue = 200

// Summarize gives the short account of a record that the artifact page and
// 'feval inspect' show instead of the record itself. A verdict gives its
// status, reason, scores, the audit's size and mismatches, what it links and
// its inputs; any other kind gives its scalar members (nested objects as
// dotted names) and the length of its lists. The record is not trusted: it
// only has to be JSON, and what it holds is reported, never acted on.
func Summarize(kind string, record []byte) []Field {
	v, err := decodeJSON(record)
	if err != nil {
		return []Field{{"record", "not JSON: " + err.Error()}}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return []Field{{"record", clipValue(scalar(v))}}
	}
	var out []Field
	if kind == "verdict" {
		out = summarizeVerdict(m)
	} else {
		flatten(m, "", &out)
	}
	for i := range out {
		out[i].Name = clipValue(out[i].Name)
	}
	return out
}

func summarizeVerdict(m map[string]any) []Field {
	var out []Field
	add := func(name string, v any) {
		if s := scalar(v); s != "" {
			out = append(out, Field{name, clipValue(s)})
		}
	}
	for _, k := range []string{"status", "reason", "protocol", "submission", "claimed_score", "rows", "sequence"} {
		add(k, m[k])
	}
	if a, ok := m["audit"].(map[string]any); ok {
		size := scalar(a["sample_size"])
		if full, _ := a["full"].(bool); full {
			add("audit", size+" rows (every row)")
		} else if b, ok := a["beacon"].(map[string]any); ok {
			add("audit", fmt.Sprintf("%s rows sampled with beacon %s %s", size, scalar(b["source"]), scalar(b["value"])))
		} else {
			add("audit", size+" rows")
		}
		for _, k := range []string{"mismatches", "undetermined"} {
			list, _ := a[k].([]any)
			var ids []string
			for i, x := range list {
				if i == 5 {
					ids = append(ids, "…")
					break
				}
				ids = append(ids, scalar(x))
			}
			s := fmt.Sprint(len(list))
			if len(ids) > 0 {
				s += " (" + strings.Join(ids, ", ") + ")"
			}
			add(k, s)
		}
	}
	if vs, ok := m["violations"].([]any); ok && len(vs) > 0 {
		add("violations", len(vs))
	}
	for _, k := range []string{"traces", "receipts", "checkpoints"} {
		if ds := digestsIn(m[k]); len(ds) > 0 {
			add(k, len(ds))
		}
	}
	if in, ok := m["inputs"].(map[string]any); ok {
		for _, k := range sortedKeys(in) {
			add("inputs."+k, in[k])
		}
	}
	return out
}

// flatten lists the scalars of m by dotted name, and lists by length.
func flatten(m map[string]any, prefix string, out *[]Field) {
	for _, k := range sortedKeys(m) {
		name := prefix + k
		switch t := m[k].(type) {
		case map[string]any:
			if len(t) == 0 {
				*out = append(*out, Field{name, "{}"})
			}
			flatten(t, name+".", out)
		case []any:
			*out = append(*out, Field{name, fmt.Sprintf("%d items", len(t))})
		default:
			*out = append(*out, Field{name, clipValue(scalar(t))})
		}
	}
}

func scalar(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case json.Number:
		return t.String()
	case bool:
		return fmt.Sprint(t)
	case int:
		return fmt.Sprint(t)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// clipValue cuts a value to maxSummaryValue runes and replaces control
// characters, so one line of a summary stays one line.
func clipValue(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f && r < 0xa0 {
			return '�'
		}
		return r
	}, s)
	return clip(s, maxSummaryValue)
}
