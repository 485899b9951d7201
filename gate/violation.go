package gate

import (
	"fmt"
	"sort"
)

// Violation is one broken rule in a submission.
//
// Rule is a stable kebab-case name listed in docs/GATES.md. Line is the
// 1-based line in Path the violation refers to, or 0 when it concerns the
// whole file or tree. Path is the slash-separated path of the file within the
// submission tree ("" for the tree itself). Detail is a human-readable
// explanation; callers must not parse it.
type Violation struct {
	Rule   string `json:"rule"`
	Line   int    `json:"line"`
	Path   string `json:"path"`
	Detail string `json:"detail"`
}

// String renders the violation as "path:line: rule: detail".
func (v Violation) String() string {
	switch {
	case v.Path == "":
		return fmt.Sprintf("%s: %s", v.Rule, v.Detail)
	case v.Line == 0:
		return fmt.Sprintf("%s: %s: %s", v.Path, v.Rule, v.Detail)
	default:
		return fmt.Sprintf("%s:%d: %s: %s", v.Path, v.Line, v.Rule, v.Detail)
	}
}

// normalize sorts violations by (Path, Line, Rule, Detail) and drops exact
// duplicates, so a gate's output does not depend on walk order. It returns a
// non-nil empty slice for no violations.
func normalize(vs []Violation) []Violation {
	sort.Slice(vs, func(i, j int) bool {
		a, b := vs[i], vs[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Detail < b.Detail
	})
	out := make([]Violation, 0, len(vs))
	for i, v := range vs {
		if i > 0 && v == vs[i-1] {
			continue
		}
		out = append(out, v)
	}
	return out
}

// capped collects violations and keeps at most max per rule; the rest are
// counted and summarised by one extra violation per rule, so a file of ten
// thousand broken rows yields a bounded report.
type capped struct {
	max     int
	path    string
	vs      []Violation
	counts  map[string]int
	dropped map[string]int
}

func newCapped(path string, max int) *capped {
	return &capped{max: max, path: path, counts: map[string]int{}, dropped: map[string]int{}}
}

func (c *capped) add(rule string, line int, format string, args ...any) {
	c.counts[rule]++
	if c.counts[rule] > c.max {
		c.dropped[rule]++
		return
	}
	c.vs = append(c.vs, Violation{Rule: rule, Line: line, Path: c.path, Detail: fmt.Sprintf(format, args...)})
}

// result returns the kept violations plus one summary per rule that
// overflowed.
func (c *capped) result() []Violation {
	out := append([]Violation(nil), c.vs...)
	rules := make([]string, 0, len(c.dropped))
	for r := range c.dropped {
		rules = append(rules, r)
	}
	sort.Strings(rules)
	for _, r := range rules {
		out = append(out, Violation{Rule: r, Line: 0, Path: c.path,
			Detail: fmt.Sprintf("%d more %s violations not listed", c.dropped[r], r)})
	}
	return out
}

// capPerRule keeps the first max violations of each rule (in their sorted
// order) and replaces the rest of each rule by one summary violation.
func capPerRule(vs []Violation, max int) []Violation {
	counts := map[string]int{}
	for _, v := range vs {
		counts[v.Rule]++
	}
	var out []Violation
	kept := map[string]int{}
	summarised := map[string]bool{}
	for _, v := range vs {
		if counts[v.Rule] <= max || kept[v.Rule] < max {
			kept[v.Rule]++
			out = append(out, v)
			continue
		}
		if !summarised[v.Rule] {
			summarised[v.Rule] = true
			out = append(out, Violation{Rule: v.Rule, Path: v.Path,
				Detail: fmt.Sprintf("%d more %s violations not listed", counts[v.Rule]-max, v.Rule)})
		}
	}
	return normalize(out)
}
