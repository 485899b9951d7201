package gate

import (
	"strings"
	"testing"
)

// TestPolicyFields: the schema's match conditions, fallbacks, rewrites and
// combiners are range-checked, each with the field path in the detail.
func TestPolicyFields(t *testing.T) {
	models := []string{"a-model", "b-model"}
	wrap := func(route string) string {
		return `{"schema":"feval.policy.v1","routes":[` + route + `,{"name":"d","mode":"single","steps":[{"model":"a-model"}]}]}`
	}
	cases := []struct {
		name, policy, want string
	}{
		{"unknown pattern", wrap(`{"name":"r","match":{"pattern":"regex"},"mode":"single","steps":[{"model":"a-model"}]}`), "routes[0].match.pattern"},
		{"bad last role", wrap(`{"name":"r","match":{"last_role":"robot"},"mode":"single","steps":[{"model":"a-model"}]}`), "routes[0].match.last_role"},
		{"bad has role", wrap(`{"name":"r","match":{"has_role":"User"},"mode":"single","steps":[{"model":"a-model"}]}`), "routes[0].match.has_role"},
		{"turn bounds", wrap(`{"name":"r","match":{"min_turn":5,"max_turn":2},"mode":"single","steps":[{"model":"a-model"}]}`), "min_turn exceeds max_turn"},
		{"turn range", wrap(`{"name":"r","match":{"min_turn":10001},"mode":"single","steps":[{"model":"a-model"}]}`), "turn bounds"},
		{"fallback off the allowlist", wrap(`{"name":"r","match":{"min_turn":2},"mode":"single","steps":[{"model":"a-model","fallbacks":["gpt-4o"]}]}`), "routes[0].steps[0].fallbacks[0]"},
		{"too many fallbacks", wrap(`{"name":"r","match":{"min_turn":2},"mode":"single","steps":[{"model":"a-model","fallbacks":["a-model","a-model","a-model","a-model","b-model"]}]}`), "at most 4"},
		{"truncate range", wrap(`{"name":"r","match":{"min_turn":2},"mode":"single","steps":[{"model":"a-model","rewrite":{"truncate_history":257}}]}`), "truncate_history"},
		{"bad combine", wrap(`{"name":"r","match":{"min_turn":2},"mode":"parallel","combine":"vote","steps":[{"model":"a-model"},{"model":"b-model"}]}`), "first, majority, judge, concat"},
	}
	for _, c := range cases {
		_, vs := ParsePolicy([]byte(c.policy), models)
		found := false
		for _, v := range vs {
			if strings.Contains(v.Detail, c.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: violations %v lack %q", c.name, vs, c.want)
		}
	}
	for _, how := range []string{"first", "first_success", "majority", "concat", "shortest", "longest"} {
		p := wrap(`{"name":"r","match":{"last_role":"tool","pattern":"diff"},"mode":"parallel","combine":"` + how + `","steps":[{"model":"a-model","fallbacks":["b-model"]},{"model":"b-model","rewrite":{"truncate_history":3}}]}`)
		if _, vs := ParsePolicy([]byte(p), models); len(vs) != 0 {
			t.Errorf("combine %s: %v", how, vs)
		}
	}
}
