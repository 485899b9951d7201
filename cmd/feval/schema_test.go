package main

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/feval/feval/bundle"
	"github.com/feval/feval/cas"
	"github.com/feval/feval/consensus"
	"github.com/feval/feval/evaluate"
	"github.com/feval/feval/policy"
	"github.com/feval/feval/protocol"
	"github.com/feval/feval/protocol/optimizer"
	"github.com/feval/feval/protocol/rollouts"
	"github.com/feval/feval/protocol/scenarios"
	"github.com/feval/feval/replay"
	"github.com/feval/feval/sandbox"
	gen "github.com/invopop/jsonschema"
	"github.com/opencontainers/go-digest"
	check "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/urfave/cli/v2"
)

// outputTypes are, for each command that prints --json, the Go types of
// what it prints: one per form its output takes. docs/schemas/output/COMMAND.json
// is generated from them (go test ./cmd/feval -run TestSchemasAreCurrent -update).
var outputTypes = map[string][]any{
	"init":                   {initResult{}},
	"env":                    {envResult{}},
	"version":                {versionResult{}},
	"ls":                     {[]lsEntry{}},
	"inspect":                {inspectResult{}},
	"key generate":           {keyResult{}},
	"key show":               {keyResult{}},
	"push":                   {transferResult{}},
	"pull":                   {transferResult{}},
	"sample":                 {sampleResult{}},
	"sandbox check":          {checkResult{}},
	"sandbox run":            {sandbox.Result{}},
	"rollouts generate":      {generateResult{}},
	"rollouts check-runtime": {checkRuntimeResult{}},
	"pack":                   {bundle.Packed{}},
	"unpack":                 {bundle.Extracted{}},
	"verify":                 {bundle.Report{}},
	"fsck":                   {cas.FsckReport{}},
	"task create":            {cas.Descriptor{}},
	"round open":             {cas.Descriptor{}},
	"record":                 {cas.Descriptor{}},
	"commit":                 {protocol.Committed{}},
	"reveal":                 {protocol.Revealed{}},
	"reveals":                {protocol.RoundReport{}},
	// One reveal: its verdict, or for a protocol without verdicts the
	// rejecting reveal check; several: the batch.
	"evaluate": {evaluate.Outcome{}, protocol.Entry{}, evaluateBatch{}},
	// A verdict's replay, a consensus record's, or several.
	"replay":      {replay.Result{}, consensus.ReplayResult{}, replayBatch{}},
	"consensus":   {consensus.Outcome{}},
	"leaderboard": {consensus.Board{}},
	"frontier":    {frontierResult{}},
	"emission":    {emissionResult{}},
	"meter serve": {meterServeResult{}},
	"policy try":  {policy.TryResult{}},
}

// verdictTypes are the records an evaluate.Verdict holds.
var verdictTypes = []any{rollouts.Verdict{}, scenarios.Verdict{}, optimizer.Verdict{}}

var update = flag.Bool("update", false, "rewrite docs/schemas/output from outputTypes")

// schemaDir is where the output schemas live, from this package's directory
// (docs/schemas itself holds the record schemas).
const schemaDir = "../../docs/schemas/output"

// schemaFile names the schema of a command ("round open" -> round-open.json).
func schemaFile(command string) string {
	return strings.ReplaceAll(command, " ", "-") + ".json"
}

var (
	descriptorType = reflect.TypeOf(cas.Descriptor{})
	digestType     = reflect.TypeOf(digest.Digest(""))
	verdictIface   = reflect.TypeOf((*evaluate.Verdict)(nil)).Elem()
	textMarshaler  = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
)

// digestPattern is every digest feval prints (sha256, hex), or empty where a
// record names none (a seat without incumbent).
const digestPattern = `^(sha256:[0-9a-f]{64})?$`

// descriptorSchema is cas.Descriptor's JSON form (it encodes itself).
func descriptorSchema() *gen.Schema {
	p := gen.NewProperties()
	p.Set("media_type", &gen.Schema{Type: "string"})
	p.Set("artifact_type", &gen.Schema{Type: "string"})
	p.Set("digest", &gen.Schema{Type: "string", Pattern: `^sha256:[0-9a-f]{64}$`})
	p.Set("size", &gen.Schema{Type: "integer"})
	p.Set("annotations", &gen.Schema{Type: "object", AdditionalProperties: &gen.Schema{Type: "string"}})
	return &gen.Schema{Type: "object", Properties: p, Required: []string{"media_type", "digest", "size"},
		AdditionalProperties: gen.FalseSchema, Description: "An OCI descriptor, in snake_case (docs/FORMAT.md section 5)."}
}

// reflector builds schemas from Go types: a definition per named type (by
// package and name), field names from the json tags, a field required unless
// omitempty, no other field allowed, Go doc comments as descriptions.
func reflector(comments map[string]string) *gen.Reflector {
	r := &gen.Reflector{CommentMap: comments}
	r.Namer = func(t reflect.Type) string {
		if t.Name() == "" {
			return "" // a slice, a map: no definition of its own
		}
		return path.Base(t.PkgPath()) + "." + t.Name()
	}
	r.Mapper = func(t reflect.Type) *gen.Schema {
		switch {
		case t == descriptorType:
			return &gen.Schema{Ref: "#/$defs/cas.Descriptor"}
		case t == digestType:
			return &gen.Schema{Type: "string", Pattern: digestPattern}
		case t.Implements(textMarshaler) && t.Kind() != reflect.Pointer:
			return &gen.Schema{Type: "string"}
		case t == verdictIface:
			s := &gen.Schema{Description: "The verdict record: its protocol's verdict (docs/FORMAT.md section 3)."}
			for _, v := range verdictTypes {
				s.AnyOf = append(s.AnyOf, &gen.Schema{Ref: "#/$defs/" + r.Namer(reflect.TypeOf(v))})
			}
			return s
		}
		return nil
	}
	return r
}

// goComments reads the doc comments of the packages whose types commands print.
func goComments(t *testing.T) map[string]string {
	t.Chdir("../..")
	r := &gen.Reflector{}
	for _, dir := range []string{"bundle", "cas", "consensus", "evaluate", "policy", "protocol", "replay", "sandbox", "scoring", "meter", "web", "beacon", "cmd/feval"} {
		if err := r.AddGoComments("github.com/feval/feval", "./"+dir); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir("cmd/feval")
	return r.CommentMap
}

// commandSchema is the schema of a command's --json output: one form per
// output type (anyOf when several), the definitions they use under $defs.
func commandSchema(command string, comments map[string]string) ([]byte, error) {
	r := reflector(comments)
	defs := gen.Definitions{}
	reflectForm := func(v any) *gen.Schema {
		s := r.Reflect(v)
		for name, d := range s.Definitions {
			defs[name] = d
		}
		s.Version, s.ID, s.Definitions = "", "", nil
		return s
	}
	var forms []*gen.Schema
	for _, v := range outputTypes[command] {
		forms = append(forms, reflectForm(v))
	}
	top := &gen.Schema{Version: gen.Version, ID: gen.ID("https://feval.dev/schemas/output/" + schemaFile(command)),
		Title: "feval " + command + " --json", Definitions: defs}
	if len(forms) == 1 {
		top.Ref, top.Type, top.Items = forms[0].Ref, forms[0].Type, forms[0].Items
	} else {
		top.AnyOf = forms
	}
	// The definitions the mapper names by reference.
	for {
		b, err := json.Marshal(top)
		if err != nil {
			return nil, err
		}
		n := len(defs)
		if bytes.Contains(b, []byte(`"#/$defs/cas.Descriptor"`)) && defs["cas.Descriptor"] == nil {
			defs["cas.Descriptor"] = descriptorSchema()
		}
		for _, v := range verdictTypes {
			if name := r.Namer(reflect.TypeOf(v)); bytes.Contains(b, []byte(`"#/$defs/`+name+`"`)) && defs[name] == nil {
				reflectForm(v)
			}
		}
		if len(defs) == n {
			break
		}
	}
	b, err := json.MarshalIndent(top, "", "  ")
	return append(b, '\n'), err
}

// TestSchemasAreCurrent: docs/schemas/output holds exactly the schema generated for
// each command's output types, and every schema is a valid JSON Schema.
func TestSchemasAreCurrent(t *testing.T) {
	comments := goComments(t)
	want := map[string]bool{}
	for command := range outputTypes {
		name := schemaFile(command)
		want[name] = true
		b, err := commandSchema(command, comments)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(schemaDir, name)
		if *update {
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
		} else if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s is not the schema of %s's output types (%v): run go test ./cmd/feval -run TestSchemasAreCurrent -update", file, command, err)
		}
		if _, err := compileSchema(file); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	for _, f := range files {
		if !want[filepath.Base(f)] {
			t.Errorf("%s names no command that prints --json", f)
		}
	}
}

// TestEveryJSONCommandHasASchema: a command with a --json flag has output types.
func TestEveryJSONCommandHasASchema(t *testing.T) {
	var walk func(prefix string, cs []*cli.Command)
	seen := map[string]bool{}
	walk = func(prefix string, cs []*cli.Command) {
		for _, c := range cs {
			name := prefix + c.Name
			for _, f := range c.Flags {
				if slices.Contains(f.Names(), "json") {
					seen[name] = true
					if outputTypes[name] == nil {
						t.Errorf("feval %s prints --json but has no output types in outputTypes", name)
					}
				}
			}
			walk(name+" ", c.Subcommands)
		}
	}
	walk("", newApp(nil, io.Discard, io.Discard).Commands)
	for name := range outputTypes {
		if !seen[name] {
			t.Errorf("outputTypes names %q, which is no command with --json", name)
		}
	}
}

func compileSchema(file string) (*check.Schema, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := check.UnmarshalJSON(f)
	if err != nil {
		return nil, err
	}
	c := check.NewCompiler()
	if err := c.AddResource(file, doc); err != nil {
		return nil, err
	}
	return c.Compile(file)
}

// commandOf finds the command an argument list runs: the longest run of its
// leading non-flag words that names a schema.
func commandOf(args []string) string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	for n := min(len(words), 2); n > 0; n-- {
		if c := strings.Join(words[:n], " "); outputTypes[c] != nil {
			return c
		}
	}
	return ""
}

// checkOutput validates what a feval command printed with --json against its
// schema in dir; it returns the command's name ("" when args ask for no JSON).
func checkOutput(dir string, args []string, stdout []byte) (string, error) {
	if !slices.Contains(args, "--json") {
		return "", nil
	}
	command := commandOf(args)
	if command == "" {
		return "", fmt.Errorf("no schema for the --json output of feval %s", strings.Join(args, " "))
	}
	if len(bytes.TrimSpace(stdout)) == 0 {
		return command, nil // it failed before printing
	}
	sch, err := compileSchema(filepath.Join(dir, schemaFile(command)))
	if err != nil {
		return command, err
	}
	dec := json.NewDecoder(bytes.NewReader(stdout))
	dec.UseNumber()
	for {
		var v any
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			return command, nil
		} else if err != nil {
			return command, fmt.Errorf("feval %s --json printed something that is not JSON: %v", command, err)
		}
		if err := sch.Validate(v); err != nil {
			return command, fmt.Errorf("feval %s --json does not match docs/schemas/output/%s: %v", command, schemaFile(command), err)
		}
	}
}

// schemaEnv, set by TestScripts, makes every feval run of the scripts check
// its --json output: the value is "SCHEMA_DIR:LOG_DIR"; each run adds the
// command's name to LOG_DIR/seen and any mismatch to LOG_DIR/failures.
const schemaEnv = "FEVAL_TEST_SCHEMAS"

// runChecked runs feval as the scripts see it, checking --json output.
func runChecked(args []string) int {
	spec := os.Getenv(schemaEnv)
	if spec == "" {
		return run(args, os.Stdin, os.Stdout, os.Stderr)
	}
	dir, logs, _ := strings.Cut(spec, string(os.PathListSeparator))
	var out bytes.Buffer
	code := run(args, os.Stdin, io.MultiWriter(os.Stdout, &out), os.Stderr)
	command, err := checkOutput(dir, args[1:], out.Bytes())
	if command != "" {
		appendLine(filepath.Join(logs, "seen"), command)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "feval test: %v\n", err)
		appendLine(filepath.Join(logs, "failures"), err.Error())
		return 99
	}
	return code
}

func appendLine(file, line string) {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

// checkedInGoTests are the commands whose --json output a Go test checks
// instead of a script (they need an upstream or a fixture pack).
var checkedInGoTests = map[string]string{
	"meter serve": "TestMeterServeRecordAndReplay",
	"policy try":  "TestPolicyTry",
}

// reportSchemaChecks fails t for every --json output of the scripts that did
// not match its schema and, when every script ran, for each command whose
// --json output no script checked.
func reportSchemaChecks(t *testing.T, logs string, all bool) {
	if b, err := os.ReadFile(filepath.Join(logs, "failures")); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			t.Error(l)
		}
	}
	if !all {
		return
	}
	b, _ := os.ReadFile(filepath.Join(logs, "seen"))
	seen := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		seen[l] = true
	}
	var missing []string
	for c := range outputTypes {
		if !seen[c] && checkedInGoTests[c] == "" {
			missing = append(missing, c)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("no script checks the --json output of: %s", strings.Join(missing, ", "))
	}
}
