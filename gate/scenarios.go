package gate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"unicode/utf8"
)

// Rule names of the scenarios gate (besides the tree, JSON and policy rules).
const (
	RulePolicyForm    = "policy-form"
	RuleSkillEmpty    = "skill-empty"
	RuleTextEncoding  = "text-encoding"
	RuleServerCommand = "server-command"
)

// Files of a scenario pack.
const (
	SkillFile      = "SKILL.md"
	PolicyFile     = "policy.json"
	PolicyCodeFile = "policy.py"
	ServerFile     = "server.json"
	// ServerDir holds the program of a server-form pack.
	ServerDir = "server"
)

// serverInterpreter is the one interpreter a server command may name
// instead of a program file of its own.
const serverInterpreter = "python3"

// ScenarioLimits bounds what the scenarios gate reads. A zero field takes
// its default.
type ScenarioLimits struct {
	MaxSkillBytes      int64 // SKILL.md (default 32 KiB)
	MaxPolicyJSONBytes int64 // policy.json (default 64 KiB)
	MaxPolicyPyBytes   int64 // policy.py (default 256 KiB)
	MaxServerJSONBytes int64 // server.json (default 4 KiB)
	MaxTotalBytes      int64 // every file of the pack together (default 16 MiB)
	MaxFiles           int   // regular files in the pack (default 256)
}

// DefaultScenarioLimits returns the limits used when a field is zero.
func DefaultScenarioLimits() ScenarioLimits {
	return ScenarioLimits{
		MaxSkillBytes:      32 << 10,
		MaxPolicyJSONBytes: 64 << 10,
		MaxPolicyPyBytes:   256 << 10,
		MaxServerJSONBytes: 4 << 10,
		MaxTotalBytes:      16 << 20,
		MaxFiles:           256,
	}
}

func (l ScenarioLimits) withDefaults() ScenarioLimits {
	d := DefaultScenarioLimits()
	if l.MaxSkillBytes <= 0 {
		l.MaxSkillBytes = d.MaxSkillBytes
	}
	if l.MaxPolicyJSONBytes <= 0 {
		l.MaxPolicyJSONBytes = d.MaxPolicyJSONBytes
	}
	if l.MaxPolicyPyBytes <= 0 {
		l.MaxPolicyPyBytes = d.MaxPolicyPyBytes
	}
	if l.MaxServerJSONBytes <= 0 {
		l.MaxServerJSONBytes = d.MaxServerJSONBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	return l
}

// ErrNoModels reports that Scenarios was called without a model allowlist.
var ErrNoModels = errors.New("no allowlisted models")

// ServerEntry is server.json: how to start a pack's own OpenAI-compatible
// server. The policy sidecar starts Command in the sandbox with the pack as
// working directory and the listening Unix socket as descriptor 3, and sends
// the agent's requests there (docs/POLICY.md).
type ServerEntry struct {
	// Command is the argument vector, 1 to 16 arguments of 1 to 256
	// printable ASCII bytes. Command[0] is either "python3", and then
	// Command[1] is a file under server/, or itself a file under server/
	// (a program the validator runs directly).
	Command []string `json:"command"`
	// Port, optional (1024 to 65535), is only informational: the sandbox
	// has no TCP, and the server serves on descriptor 3.
	Port int `json:"port,omitempty"`
}

// ParseServerEntry decodes and checks server.json, apart from the existence
// of the files it names (Scenarios checks those against the pack).
func ParseServerEntry(data []byte) (*ServerEntry, []Violation) {
	var e ServerEntry
	if jerr := decodeStrict(data, &e); jerr != nil {
		return nil, []Violation{jsonViolation(ServerFile, jerr)}
	}
	var vs []Violation
	bad := func(rule, format string, args ...any) {
		vs = append(vs, Violation{Rule: rule, Path: ServerFile, Detail: fmt.Sprintf(format, args...)})
	}
	if e.Port != 0 && (e.Port < 1024 || e.Port > 65535) {
		bad(RuleJSONSchema, "port must be 1024 to 65535 when given")
	}
	if len(e.Command) == 0 || len(e.Command) > 16 {
		bad(RuleServerCommand, "command must hold 1 to 16 arguments")
		return &e, vs
	}
	for i, a := range e.Command {
		if a == "" || len(a) > 256 || !printableASCII(a) {
			bad(RuleServerCommand, "command[%d] must be 1 to 256 printable ASCII bytes", i)
		}
	}
	if prog := e.program(); prog == "" {
		bad(RuleServerCommand, "command must start with a file under server/, or with python3 and a file under server/")
	}
	return &e, vs
}

// program returns the pack file the command runs, or "" when the command
// does not name one correctly.
func (e *ServerEntry) program() string {
	p := ""
	switch {
	case len(e.Command) >= 2 && e.Command[0] == serverInterpreter:
		p = e.Command[1]
	case len(e.Command) >= 1:
		p = e.Command[0]
	}
	if !fs.ValidPath(p) || !strings.HasPrefix(p, ServerDir+"/") {
		return ""
	}
	return p
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Scenarios runs the scenarios gate over an unpacked scenario pack, with
// models the allowlisted model names. A pack holds SKILL.md (non-empty
// UTF-8, at most MaxSkillBytes) and exactly one policy form:
//
//   - policy.json, valid against the fusion policy schema (ParsePolicy);
//   - policy.py, UTF-8 Python that parses (it runs later, sandboxed);
//   - server.json (ParseServerEntry) plus the server's files under server/.
//
// Nothing else may be in the pack; no symbolic links or special files; the
// whole pack holds at most MaxFiles files and MaxTotalBytes bytes. It returns
// an error only when the pack cannot be read or models is empty
// (ErrNoModels).
func Scenarios(fsys fs.FS, models []string, limits ScenarioLimits) ([]Violation, error) {
	if len(models) == 0 {
		return nil, fmt.Errorf("scenarios gate: %w", ErrNoModels)
	}
	limits = limits.withDefaults()
	t, vs, err := listTree(fsys, limits.MaxFiles)
	if err != nil {
		return nil, fmt.Errorf("scenarios gate: %w", err)
	}
	if t.truncated {
		return normalize(vs), nil
	}
	more, err := checkTotalSize(fsys, t, limits.MaxTotalBytes)
	if err != nil {
		return nil, fmt.Errorf("scenarios gate: %w", err)
	}
	vs = append(vs, more...)

	var forms []string
	for _, f := range []string{PolicyFile, PolicyCodeFile, ServerFile} {
		if t.has(f) {
			forms = append(forms, f)
		}
	}
	switch len(forms) {
	case 0:
		vs = append(vs, Violation{Rule: RulePolicyForm, Detail: "no policy: the pack needs policy.json, policy.py or server.json"})
	case 1:
	default:
		vs = append(vs, Violation{Rule: RulePolicyForm, Detail: "more than one policy form: " + strings.Join(forms, ", ")})
	}
	serverForm := len(forms) == 1 && forms[0] == ServerFile
	for _, d := range t.dirs {
		if !(serverForm && (d == ServerDir || strings.HasPrefix(d, ServerDir+"/"))) {
			vs = append(vs, Violation{Rule: RuleExtraFile, Path: d, Detail: "unexpected directory"})
		}
	}
	for _, f := range t.files {
		switch {
		case f.path == SkillFile, f.path == PolicyFile, f.path == PolicyCodeFile, f.path == ServerFile:
		case serverForm && strings.HasPrefix(f.path, ServerDir+"/"):
			if !validPackName(f.path) {
				vs = append(vs, Violation{Rule: RuleFileName, Path: f.path, Detail: "path segments must be [A-Za-z0-9._-] and not start with '.'"})
			}
		default:
			vs = append(vs, Violation{Rule: RuleExtraFile, Path: f.path, Detail: "not part of a scenario pack"})
		}
	}

	more, err = checkSkill(fsys, t, limits.MaxSkillBytes)
	if err != nil {
		return nil, fmt.Errorf("scenarios gate: %w", err)
	}
	vs = append(vs, more...)
	for _, form := range forms {
		switch form {
		case PolicyFile:
			more, err = checkPolicyFile(fsys, models, limits.MaxPolicyJSONBytes)
		case PolicyCodeFile:
			more, err = checkPolicyCode(fsys, limits.MaxPolicyPyBytes)
		case ServerFile:
			more, err = checkServerFile(fsys, t, limits.MaxServerJSONBytes)
		}
		if err != nil {
			return nil, fmt.Errorf("scenarios gate: %w", err)
		}
		vs = append(vs, more...)
	}
	return normalize(vs), nil
}

// checkTotalSize counts the bytes actually read from every file, stopping
// once the budget is passed.
func checkTotalSize(fsys fs.FS, t *tree, max int64) ([]Violation, error) {
	var total int64
	for _, f := range t.files {
		r, err := fsys.Open(f.path)
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", f.path, err)
		}
		n, err := io.Copy(io.Discard, io.LimitReader(r, max-total+1))
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f.path, err)
		}
		total += n
		if total > max {
			return []Violation{{Rule: RuleTotalSize, Detail: fmt.Sprintf("the pack holds more than %d bytes", max)}}, nil
		}
	}
	return nil, nil
}

func checkSkill(fsys fs.FS, t *tree, max int64) ([]Violation, error) {
	if !t.has(SkillFile) {
		return []Violation{{Rule: RuleMissingFile, Path: SkillFile, Detail: "SKILL.md is missing"}}, nil
	}
	data, err := readLimited(fsys, SkillFile, max)
	if errors.Is(err, errTooLarge) {
		return []Violation{tooLarge(SkillFile, max)}, nil
	}
	if err != nil {
		return nil, err
	}
	if v, ok := textProblem(SkillFile, data); !ok {
		return []Violation{v}, nil
	}
	if strings.TrimSpace(string(data)) == "" {
		return []Violation{{Rule: RuleSkillEmpty, Path: SkillFile, Detail: "SKILL.md has no content"}}, nil
	}
	return nil, nil
}

// textProblem checks that data is UTF-8 text without NUL bytes.
func textProblem(path string, data []byte) (Violation, bool) {
	if !utf8.Valid(data) {
		return Violation{Rule: RuleTextEncoding, Path: path, Detail: "not valid UTF-8"}, false
	}
	if i := strings.IndexByte(string(data), 0); i >= 0 {
		return Violation{Rule: RuleTextEncoding, Path: path, Line: lineAt(data, int64(i)), Detail: "NUL byte"}, false
	}
	return Violation{}, true
}

func checkPolicyFile(fsys fs.FS, models []string, max int64) ([]Violation, error) {
	data, err := readLimited(fsys, PolicyFile, max)
	if errors.Is(err, errTooLarge) {
		return []Violation{tooLarge(PolicyFile, max)}, nil
	}
	if err != nil {
		return nil, err
	}
	_, vs := ParsePolicy(data, models)
	return vs, nil
}

func checkPolicyCode(fsys fs.FS, max int64) ([]Violation, error) {
	data, err := readLimited(fsys, PolicyCodeFile, max)
	if errors.Is(err, errTooLarge) {
		return []Violation{tooLarge(PolicyCodeFile, max)}, nil
	}
	if err != nil {
		return nil, err
	}
	return checkPythonSource(PolicyCodeFile, data, OptimizerLimits{}.withDefaults(), false)
}

func checkServerFile(fsys fs.FS, t *tree, max int64) ([]Violation, error) {
	data, err := readLimited(fsys, ServerFile, max)
	if errors.Is(err, errTooLarge) {
		return []Violation{tooLarge(ServerFile, max)}, nil
	}
	if err != nil {
		return nil, err
	}
	e, vs := ParseServerEntry(data)
	if e == nil {
		return vs, nil
	}
	if prog := e.program(); prog != "" && !t.has(prog) {
		vs = append(vs, Violation{Rule: RuleServerCommand, Path: ServerFile, Detail: fmt.Sprintf("the command names %s, which is not a file of the pack", prog)})
	}
	hasServerFiles := false
	for _, f := range t.files {
		if strings.HasPrefix(f.path, ServerDir+"/") {
			hasServerFiles = true
		}
	}
	if !hasServerFiles {
		vs = append(vs, Violation{Rule: RuleMissingFile, Path: ServerDir, Detail: "a server pack keeps its program under server/"})
	}
	return vs, nil
}

// validPackName accepts slash-separated segments of [A-Za-z0-9._-] that do
// not start with '.'.
func validPackName(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg[0] == '.' {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
	}
	return true
}
