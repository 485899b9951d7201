package gate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// fixtureModels reads the allowlist shared by the scenario fixtures.
func fixtureModels(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile("../fixtures/scenarios/models.txt")
	if err != nil {
		t.Fatal(err)
	}
	models := strings.Fields(string(data))
	if len(models) != 8 {
		t.Fatalf("models.txt holds %d models, want 8", len(models))
	}
	return models
}

func TestScenariosFixtures(t *testing.T) {
	models := fixtureModels(t)
	forms := map[string]bool{}
	for _, c := range loadFixtures(t, "../fixtures/scenarios", 10) {
		if c.expect.Verdict == "pass" {
			for _, f := range []string{PolicyFile, PolicyCodeFile, ServerFile} {
				if _, err := c.tree.Open(f); err == nil {
					forms[f] = true
				}
			}
		}
		t.Run(c.name, func(t *testing.T) {
			got, err := Scenarios(c.tree, models, ScenarioLimits{})
			if err != nil {
				t.Fatal(err)
			}
			checkExpectation(t, c.expect, got)
		})
	}
	if len(forms) != 3 {
		t.Errorf("honest packs cover %d policy forms, want all 3", len(forms))
	}
}

func TestScenariosTree(t *testing.T) {
	models := fixtureModels(t)
	skill := &fstest.MapFile{Data: []byte("# skill\n")}
	policy, err := os.ReadFile("../fixtures/scenarios/ok-policy-json/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	pol := &fstest.MapFile{Data: policy}
	many := fstest.MapFS{"SKILL.md": skill, "server.json": {Data: []byte(`{"command":["server/a"],"port":8080}`)}}
	for _, n := range []string{"a", "b", "c", "d"} {
		many["server/"+n] = &fstest.MapFile{Data: []byte("x")}
	}
	cases := []struct {
		name   string
		tree   fstest.MapFS
		limits ScenarioLimits
		want   []string
	}{
		{"symlinked skill", fstest.MapFS{"SKILL.md": {Data: []byte("/etc/passwd"), Mode: os.ModeSymlink}, "policy.json": pol},
			ScenarioLimits{}, []string{"missing-file SKILL.md", "symlink SKILL.md"}},
		{"device", fstest.MapFS{"SKILL.md": skill, "policy.json": pol, "tty": {Mode: os.ModeDevice}},
			ScenarioLimits{}, []string{"special-file tty"}},
		{"total size", fstest.MapFS{"SKILL.md": skill, "policy.json": pol},
			ScenarioLimits{MaxTotalBytes: 100}, []string{"total-size "}},
		{"policy too large", fstest.MapFS{"SKILL.md": skill, "policy.json": pol},
			ScenarioLimits{MaxPolicyJSONBytes: 100}, []string{"file-too-large policy.json"}},
		{"too many files", many, ScenarioLimits{MaxFiles: 3}, []string{"too-many-files "}},
		{"hidden server file", fstest.MapFS{"SKILL.md": skill, "server.json": many["server.json"], "server/a": {Data: []byte("x")}, "server/.env": {Data: []byte("K=V")}},
			ScenarioLimits{}, []string{"file-name server/.env"}},
		{"server without files", fstest.MapFS{"SKILL.md": skill, "server.json": many["server.json"]},
			ScenarioLimits{}, []string{"missing-file server", "server-command server.json"}},
		{"skill with NUL", fstest.MapFS{"SKILL.md": {Data: []byte("a\nb\x00")}, "policy.json": pol},
			ScenarioLimits{}, []string{"text-encoding SKILL.md"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs, err := Scenarios(c.tree, models, c.limits)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range vs {
				got = append(got, v.Rule+" "+v.Path)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
	if _, err := Scenarios(fstest.MapFS{}, nil, ScenarioLimits{}); !errors.Is(err, ErrNoModels) {
		t.Errorf("no models: err = %v", err)
	}
}

func TestParseServerEntry(t *testing.T) {
	cases := []struct {
		name string
		json string
		want []string
	}{
		{"python", `{"command":["python3","server/main.py","--port","8080"],"port":8080}`, nil},
		{"binary", `{"command":["server/bin/serve"],"port":65535}`, nil},
		{"interpreter alone", `{"command":["python3"],"port":8080}`, []string{RuleServerCommand}},
		{"absolute program", `{"command":["/usr/bin/env","python3"],"port":8080}`, []string{RuleServerCommand}},
		{"outside server dir", `{"command":["python3","main.py"],"port":8080}`, []string{RuleServerCommand}},
		{"dot-dot", `{"command":["server/../x"],"port":8080}`, []string{RuleServerCommand}},
		{"empty command", `{"command":[],"port":8080}`, []string{RuleServerCommand}},
		{"control byte", `{"command":["server/a","x\ny"],"port":8080}`, []string{RuleServerCommand}},
		{"low port", `{"command":["server/a"],"port":1023}`, []string{RuleJSONSchema}},
		{"string port", `{"command":["server/a"],"port":"8080"}`, []string{RuleJSONSchema}},
		{"env field", `{"command":["server/a"],"port":8080,"env":{}}`, []string{RuleJSONSchema}},
		{"upper-case key", `{"Command":["server/a"],"port":8080}`, []string{RuleJSONSyntax}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, vs := ParseServerEntry([]byte(c.json))
			var got []string
			for _, v := range vs {
				got = append(got, v.Rule)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("got %v, want %v", vs, c.want)
			}
		})
	}
}

// policyJSON builds a policy document with one default route around routes.
func policyJSON(routes string) string {
	return `{"schema":"feval.policy.v1","routes":[` + routes + `]}`
}

func TestParsePolicy(t *testing.T) {
	models := []string{"m1", "m2", "m3"}
	single := `{"name":"default","mode":"single","steps":[{"model":"m1"}]}`
	cases := []struct {
		name string
		doc  string
		want []string // rules, in order
	}{
		{"minimal", policyJSON(single), nil},
		{"full", `{"schema":"feval.policy.v1","stream":true,"session":{"sticky_route":true,"keep_messages":8},"routes":[
			{"name":"tools","match":{"has_tools":true,"min_messages":1,"max_messages":9,"contains":"pytest"},"mode":"sequence",
			 "steps":[{"model":"m1","rewrite":{"system_prefix":"Be brief.","drop_tools":true},"max_tokens":10,"temperature_milli":0},
			          {"model":"m2","instruction":"Check it."}]},
			{"name":"vote","match":{"has_tools":false},"mode":"parallel","steps":[{"model":"m1"},{"model":"m2"}],"combine":"judge","judge":{"model":"m3"}},
			{"name":"default","mode":"parallel","steps":[{"model":"m1"},{"model":"m2"}],"combine":"shortest"}]}`, nil},
		{"wrong schema id", `{"schema":"v2","routes":[` + single + `]}`, []string{RulePolicySchema}},
		{"no routes", `{"schema":"feval.policy.v1","routes":[]}`, []string{RulePolicySchema}},
		{"null", `{"schema":"feval.policy.v1","routes":null}`, []string{RuleJSONSyntax}},
		{"duplicate key", `{"schema":"feval.policy.v1","schema":"feval.policy.v1","routes":[` + single + `]}`, []string{RuleJSONSyntax}},
		{"trailing data", policyJSON(single) + `{}`, []string{RuleJSONSyntax}},
		{"exponent", policyJSON(`{"name":"d","mode":"single","steps":[{"model":"m1","max_tokens":1e3}]}`), []string{RuleJSONSyntax}},
		{"huge integer", policyJSON(`{"name":"d","mode":"single","steps":[{"model":"m1","max_tokens":99999999999999999999}]}`), []string{RuleJSONSyntax}},
		{"deep nesting", strings.Repeat("[", 40) + strings.Repeat("]", 40), []string{RuleJSONSyntax}},
		{"wrong type", policyJSON(`{"name":"d","mode":"single","steps":{"model":"m1"}}`), []string{RuleJSONSchema}},
		{"unknown step field", policyJSON(`{"name":"d","mode":"single","steps":[{"model":"m1","top_p":1}]}`), []string{RuleJSONSchema}},
		{"unknown model", policyJSON(`{"name":"d","mode":"single","steps":[{"model":"m9"}]}`), []string{RuleUnknownModel}},
		{"unknown judge model", policyJSON(`{"name":"d","mode":"parallel","steps":[{"model":"m1"},{"model":"m2"}],"combine":"judge","judge":{"model":"x"}}`), []string{RuleUnknownModel}},
		{"missing model", policyJSON(`{"name":"d","mode":"single","steps":[{}]}`), []string{RulePolicySchema}},
		{"bad name", policyJSON(`{"name":"Default route","mode":"single","steps":[{"model":"m1"}]}`), []string{RulePolicySchema}},
		{"duplicate names", policyJSON(`{"name":"d","match":{"has_tools":true},"mode":"single","steps":[{"model":"m1"}]},` + `{"name":"d","mode":"single","steps":[{"model":"m1"}]}`), []string{RulePolicySchema}},
		{"default not last", policyJSON(single + `,{"name":"x","match":{"has_tools":true},"mode":"single","steps":[{"model":"m1"}]}`), []string{RulePolicySchema, RulePolicySchema}},
		{"empty match", policyJSON(`{"name":"x","match":{},"mode":"single","steps":[{"model":"m1"}]},` + single), []string{RulePolicySchema}},
		{"inverted message bounds", policyJSON(`{"name":"x","match":{"min_messages":5,"max_messages":2},"mode":"single","steps":[{"model":"m1"}]},` + single), []string{RulePolicySchema}},
		{"unknown mode", policyJSON(`{"name":"d","mode":"race","steps":[{"model":"m1"}]}`), []string{RulePolicySchema}},
		{"sequence of one", policyJSON(`{"name":"d","mode":"sequence","steps":[{"model":"m1"}]}`), []string{RulePolicySchema}},
		{"parallel of nine", policyJSON(`{"name":"d","mode":"parallel","combine":"longest","steps":[` + strings.TrimSuffix(strings.Repeat(`{"model":"m1"},`, 9), ",") + `]}`), []string{RulePolicySchema}},
		{"parallel without combine", policyJSON(`{"name":"d","mode":"parallel","steps":[{"model":"m1"},{"model":"m2"}]}`), []string{RulePolicySchema}},
		{"judge without judge step", policyJSON(`{"name":"d","mode":"parallel","combine":"judge","steps":[{"model":"m1"},{"model":"m2"}]}`), []string{RulePolicySchema}},
		{"judge step without judge", policyJSON(`{"name":"d","mode":"parallel","combine":"first_success","judge":{"model":"m1"},"steps":[{"model":"m1"},{"model":"m2"}]}`), []string{RulePolicySchema}},
		{"combine on single", policyJSON(`{"name":"d","mode":"single","combine":"longest","steps":[{"model":"m1"}]}`), []string{RulePolicySchema}},
		{"instruction on first step", policyJSON(`{"name":"d","mode":"sequence","steps":[{"model":"m1","instruction":"x"},{"model":"m2"}]}`), []string{RulePolicySchema}},
		{"temperature range", policyJSON(`{"name":"d","mode":"single","steps":[{"model":"m1","temperature_milli":2001}]}`), []string{RulePolicySchema}},
		{"negative tokens", policyJSON(`{"name":"d","mode":"single","steps":[{"model":"m1","max_tokens":-1}]}`), []string{RulePolicySchema}},
		{"empty rewrite", policyJSON(`{"name":"d","mode":"single","steps":[{"model":"m1","rewrite":{}}]}`), []string{RulePolicySchema}},
		{"long prefix", policyJSON(`{"name":"d","mode":"single","steps":[{"model":"m1","rewrite":{"system_prefix":"` + strings.Repeat("a", 8193) + `"}}]}`), []string{RulePolicySchema}},
		{"keep messages range", `{"schema":"feval.policy.v1","session":{"keep_messages":257},"routes":[` + single + `]}`, []string{RulePolicySchema}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, vs := ParsePolicy([]byte(c.doc), models)
			var got []string
			for _, v := range vs {
				got = append(got, v.Rule)
				if v.Path != PolicyFile {
					t.Errorf("violation path %q", v.Path)
				}
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("got %v, want %v", vs, c.want)
			}
			if len(c.want) == 0 && p == nil {
				t.Error("valid policy returned nil")
			}
		})
	}
}

// FuzzParsePolicy checks that ParsePolicy never panics, that every
// violation is well formed, and that a valid policy marshals to a document
// that parses back to the same policy.
func FuzzParsePolicy(f *testing.F) {
	seeds, err := filepath.Glob("../fixtures/scenarios/*/policy.json")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no fuzz seeds (%v)", err)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	models := fixtureModels(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, vs := ParsePolicy(data, models)
		for _, v := range vs {
			if v.Rule == "" || v.Path != PolicyFile {
				t.Fatalf("malformed violation %+v", v)
			}
		}
		if p == nil || len(vs) > 0 {
			return
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		again, vs := ParsePolicy(out, models)
		if len(vs) > 0 || !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip of %s: %v %+v", out, vs, again)
		}
	})
}
