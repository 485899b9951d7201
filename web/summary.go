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
		at := StatusEnd(out)
		var tail []Field
		for _, w := range verdictWarnings(record) {
			tail = append(tail, Field{"warning", w})
		}
		out = append(out[:at], append(tail, out[at:]...)...)
		switch m["protocol"] {
		case "scenarios":
			if v := scenariosView(record); v != nil {
				out = append(out, v.fields()...)
			}
		case "optimizer":
			if v := optimizerView(record); v != nil {
				out = append(out, v.fields()...)
			}
		}
	} else {
		flatten(m, "", &out)
	}
	for i := range out {
		out[i].Name = clipValue(out[i].Name)
	}
	return out
}

// StatusEnd is the index in a verdict's summary just after its status and
// reason: where warnings about the status go.
func StatusEnd(fs []Field) int {
	i := 0
	for i < len(fs) && (fs[i].Name == "status" || fs[i].Name == "reason" || fs[i].Name == "warning") {
		i++
	}
	return i
}

// verdictWarnings are what a verdict record itself says that qualifies its
// status: an infra_error that is not the miner's result, and a sample or
// seeds drawn from a beacon value nothing shows was not chosen.
func verdictWarnings(record []byte) []string {
	var v struct {
		Status string `json:"status"`
		Audit  *struct {
			Full   bool `json:"full"`
			Beacon *struct {
				Verified bool `json:"verified"`
			} `json:"beacon"`
		} `json:"audit"`
		Beacon *struct {
			Verified bool `json:"verified"`
		} `json:"beacon"`
	}
	if json.Unmarshal(record, &v) != nil {
		return nil
	}
	var out []string
	if v.Status == "infra_error" {
		out = append(out, "infra_error: the validator's machine or a provider failed, not the submission; the evaluation is to be repeated and decides nothing")
	}
	if a := v.Audit; (a != nil && !a.Full && a.Beacon != nil && !a.Beacon.Verified) || (v.Beacon != nil && !v.Beacon.Verified) {
		out = append(out, "unverified beacon: the sample or seeds come from a beacon value nothing shows the validator did not choose")
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
