package gate

import "fmt"

// Rule names of the policy checks.
const (
	RulePolicySchema = "policy-schema"
	RuleUnknownModel = "unknown-model"
)

// PolicySchemaID is the value of a policy's "schema" field.
const PolicySchemaID = "feval.policy.v1"

// Policy bounds.
const (
	maxRoutes          = 16
	maxSteps           = 8
	maxNameBytes       = 64
	maxTextBytes       = 8 << 10
	maxContainsBytes   = 256
	maxKeepMessages    = 256
	maxMatchMessages   = 10000
	maxStepTokens      = 65536
	maxTemperatureMill = 2000
)

// Route modes and parallel combiners.
const (
	ModeSingle   = "single"
	ModeSequence = "sequence"
	ModeParallel = "parallel"

	CombineFirst        = "first"
	CombineFirstSuccess = "first_success" // the same as CombineFirst
	CombineMajority     = "majority"
	CombineConcat       = "concat"
	CombineShortest     = "shortest"
	CombineLongest      = "longest"
	CombineJudge        = "judge"
)

// Roles a match may name.
var policyRoles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true}

// Patterns are the named content patterns a match may test on the last user
// message; docs/POLICY.md gives each one's RE2 expression.
var Patterns = []string{"code", "diff", "error", "failing_test", "path", "question"}

// maxFallbacks bounds a step's fallback models; maxTurn the session turns a
// match may name.
const (
	maxFallbacks = 4
	maxTurn      = 10000
)

// Policy is a declarative fusion policy (policy.json). For each request the
// agent sends, the first route whose match holds decides which allowlisted
// models answer and how: one model, several in sequence (each later step
// sees the earlier answer), or several in parallel (answers combined by a
// fixed rule or a judge model). Steps may rewrite what their model sees.
// docs/GATES.md specifies the schema.
type Policy struct {
	// Schema must be PolicySchemaID.
	Schema string `json:"schema"`
	// Stream: when the agent asks for a streamed answer, the final answer
	// is streamed back as it is produced (the last step of a sequence, the
	// judge of a parallel route, or the selected answer once known).
	Stream bool `json:"stream,omitempty"`
	// Session is the state the policy keeps across the requests of one
	// scenario.
	Session *Session `json:"session,omitempty"`
	// Routes are tried in order; 1 to 16, names unique; the last one has no
	// match and so handles every request the others do not.
	Routes []Route `json:"routes"`
}

// Session is the per-scenario state of a policy.
type Session struct {
	// StickyRoute: the route chosen for the first request of the session
	// handles every later request.
	StickyRoute bool `json:"sticky_route,omitempty"`
	// KeepMessages, when 1 to 256, forwards only the system messages and
	// the last KeepMessages other messages of the conversation; 0 forwards
	// all.
	KeepMessages int `json:"keep_messages,omitempty"`
	// KeepTask keeps the first user message of the session's first request
	// (the task) and puts it back, after the system messages, into every
	// later request that no longer holds it (after an agent's or
	// keep_messages' truncation).
	KeepTask bool `json:"keep_task,omitempty"`
}

// Route is one way of answering a request.
type Route struct {
	// Name is 1 to 64 bytes of [a-z0-9_-], unique within the policy.
	Name string `json:"name"`
	// Match selects the requests this route handles; absent means every
	// request. Only the last route may (and must) omit it.
	Match *Match `json:"match,omitempty"`
	// Mode is "single" (exactly one step), "sequence" (2 to 8 steps, each
	// after the first also sees the previous step's answer followed by its
	// instruction) or "parallel" (2 to 8 steps on the same input).
	Mode  string `json:"mode"`
	Steps []Step `json:"steps"`
	// Combine (parallel only, required there) picks the answer:
	// "first_success" (the first step, in list order, that answered),
	// "shortest" or "longest" (by bytes; ties go to the earlier step) or
	// "judge" (Judge sees the request and every answer and writes the final
	// one).
	Combine string `json:"combine,omitempty"`
	// Judge is the judging step, required with combine "judge" and allowed
	// only there.
	Judge *Step `json:"judge,omitempty"`
}

// Match holds the conditions of a route; all given conditions must hold
// and at least one must be given.
type Match struct {
	// HasTools: the request defines tools (true) or defines none (false).
	HasTools *bool `json:"has_tools,omitempty"`
	// MinMessages and MaxMessages (0 = unbounded) bound the number of
	// messages in the request, 0 to 10000, MinMessages <= MaxMessages.
	MinMessages int `json:"min_messages,omitempty"`
	MaxMessages int `json:"max_messages,omitempty"`
	// Contains: the last user message contains this text (1 to 256 bytes,
	// byte-exact).
	Contains string `json:"contains,omitempty"`
	// Pattern: the last user message matches this named pattern (one of
	// Patterns).
	Pattern string `json:"pattern,omitempty"`
	// LastRole: the last message has this role (system, user, assistant,
	// tool).
	LastRole string `json:"last_role,omitempty"`
	// HasRole: some message has this role.
	HasRole string `json:"has_role,omitempty"`
	// MinTurn and MaxTurn (0 = unbounded) bound the session turn: the
	// request's number, from 1, among the requests of its scenario.
	MinTurn int `json:"min_turn,omitempty"`
	MaxTurn int `json:"max_turn,omitempty"`
}

// Step is one call to an allowlisted model.
type Step struct {
	// Model is one of the allowlisted model names.
	Model string `json:"model"`
	// Rewrite changes what this model sees.
	Rewrite *Rewrite `json:"rewrite,omitempty"`
	// Instruction (sequence steps after the first only) is the user-turn
	// text appended after the previous step's answer, at most 8 KiB.
	Instruction string `json:"instruction,omitempty"`
	// MaxTokens, 1 to 65536, caps this call's completion; 0 keeps the
	// agent's value.
	MaxTokens int `json:"max_tokens,omitempty"`
	// TemperatureMilli is the sampling temperature in thousandths, 0 to
	// 2000; absent keeps the agent's value.
	TemperatureMilli *int `json:"temperature_milli,omitempty"`
	// Fallbacks are allowlisted models tried in order, with the same
	// input, when this step's model fails (an upstream error or rejection,
	// a cap refusal, an unreadable answer); at most 4.
	Fallbacks []string `json:"fallbacks,omitempty"`
}

// Rewrite changes the request a step's model sees.
type Rewrite struct {
	// SystemPrefix is prepended to the system message (one is created if
	// the request has none), at most 8 KiB.
	SystemPrefix string `json:"system_prefix,omitempty"`
	// DropTools hides the request's tool definitions from this model.
	DropTools bool `json:"drop_tools,omitempty"`
	// TruncateHistory, when 1 to 256, keeps the system messages and only
	// the last TruncateHistory other messages; 0 keeps all.
	TruncateHistory int `json:"truncate_history,omitempty"`
}

// ParsePolicy decodes and validates a policy.json document against the
// schema, with models the allowlisted model names. It returns the policy
// (nil when the document does not decode) and the violations, reported
// under PolicyFile; the policy is valid when there are none.
func ParsePolicy(data []byte, models []string) (*Policy, []Violation) {
	var p Policy
	if jerr := decodeStrict(data, &p); jerr != nil {
		return nil, []Violation{jsonViolation(PolicyFile, jerr)}
	}
	v := &policyValidator{models: map[string]bool{}}
	for _, m := range models {
		v.models[m] = true
	}
	v.policy(&p)
	return &p, v.vs
}

type policyValidator struct {
	models map[string]bool
	vs     []Violation
}

func (v *policyValidator) bad(rule, where, format string, args ...any) {
	v.vs = append(v.vs, Violation{Rule: rule, Path: PolicyFile, Detail: where + ": " + fmt.Sprintf(format, args...)})
}

func (v *policyValidator) policy(p *Policy) {
	if p.Schema != PolicySchemaID {
		v.bad(RulePolicySchema, "schema", "must be %q", PolicySchemaID)
	}
	if s := p.Session; s != nil {
		if s.KeepMessages < 0 || s.KeepMessages > maxKeepMessages {
			v.bad(RulePolicySchema, "session.keep_messages", "must be 0 to %d", maxKeepMessages)
		}
	}
	if len(p.Routes) == 0 || len(p.Routes) > maxRoutes {
		v.bad(RulePolicySchema, "routes", "must hold 1 to %d routes", maxRoutes)
	}
	names := map[string]bool{}
	for i := range p.Routes {
		r := &p.Routes[i]
		where := fmt.Sprintf("routes[%d]", i)
		if !validRouteName(r.Name) {
			v.bad(RulePolicySchema, where+".name", "must be 1 to %d bytes of [a-z0-9_-]", maxNameBytes)
		} else if names[r.Name] {
			v.bad(RulePolicySchema, where+".name", "duplicate route name %q", r.Name)
		}
		names[r.Name] = true
		last := i == len(p.Routes)-1
		switch {
		case last && r.Match != nil:
			v.bad(RulePolicySchema, where+".match", "the last route must have no match (it handles every other request)")
		case !last && r.Match == nil:
			v.bad(RulePolicySchema, where+".match", "only the last route may omit match")
		case r.Match != nil:
			v.match(where+".match", r.Match)
		}
		v.route(where, r)
	}
}

func (v *policyValidator) match(where string, m *Match) {
	if m.HasTools == nil && m.MinMessages == 0 && m.MaxMessages == 0 && m.Contains == "" &&
		m.Pattern == "" && m.LastRole == "" && m.HasRole == "" && m.MinTurn == 0 && m.MaxTurn == 0 {
		v.bad(RulePolicySchema, where, "needs at least one condition")
	}
	if m.MinMessages < 0 || m.MinMessages > maxMatchMessages || m.MaxMessages < 0 || m.MaxMessages > maxMatchMessages {
		v.bad(RulePolicySchema, where, "message bounds must be 0 to %d", maxMatchMessages)
	}
	if m.MaxMessages != 0 && m.MinMessages > m.MaxMessages {
		v.bad(RulePolicySchema, where, "min_messages exceeds max_messages")
	}
	if len(m.Contains) > maxContainsBytes {
		v.bad(RulePolicySchema, where+".contains", "longer than %d bytes", maxContainsBytes)
	}
	if m.Pattern != "" && !knownPattern(m.Pattern) {
		v.bad(RulePolicySchema, where+".pattern", "must be one of %v", Patterns)
	}
	if m.LastRole != "" && !policyRoles[m.LastRole] {
		v.bad(RulePolicySchema, where+".last_role", "must be system, user, assistant or tool")
	}
	if m.HasRole != "" && !policyRoles[m.HasRole] {
		v.bad(RulePolicySchema, where+".has_role", "must be system, user, assistant or tool")
	}
	if m.MinTurn < 0 || m.MinTurn > maxTurn || m.MaxTurn < 0 || m.MaxTurn > maxTurn {
		v.bad(RulePolicySchema, where, "turn bounds must be 0 to %d", maxTurn)
	}
	if m.MaxTurn != 0 && m.MinTurn > m.MaxTurn {
		v.bad(RulePolicySchema, where, "min_turn exceeds max_turn")
	}
}

func knownPattern(p string) bool {
	for _, q := range Patterns {
		if p == q {
			return true
		}
	}
	return false
}

func (v *policyValidator) route(where string, r *Route) {
	n := len(r.Steps)
	switch r.Mode {
	case ModeSingle:
		if n != 1 {
			v.bad(RulePolicySchema, where+".steps", "a single route has exactly 1 step (has %d)", n)
		}
	case ModeSequence, ModeParallel:
		if n < 2 || n > maxSteps {
			v.bad(RulePolicySchema, where+".steps", "a %s route has 2 to %d steps (has %d)", r.Mode, maxSteps, n)
		}
	default:
		v.bad(RulePolicySchema, where+".mode", "must be single, sequence or parallel")
	}
	if r.Mode == ModeParallel {
		switch r.Combine {
		case CombineFirst, CombineFirstSuccess, CombineMajority, CombineConcat, CombineShortest, CombineLongest:
			if r.Judge != nil {
				v.bad(RulePolicySchema, where+".judge", "only allowed with combine \"judge\"")
			}
		case CombineJudge:
			if r.Judge == nil {
				v.bad(RulePolicySchema, where+".judge", "required with combine \"judge\"")
			}
		default:
			v.bad(RulePolicySchema, where+".combine", "must be first, majority, judge, concat, shortest or longest")
		}
	} else {
		if r.Combine != "" {
			v.bad(RulePolicySchema, where+".combine", "only allowed on parallel routes")
		}
		if r.Judge != nil {
			v.bad(RulePolicySchema, where+".judge", "only allowed on parallel routes")
		}
	}
	for i := range r.Steps {
		s := &r.Steps[i]
		sw := fmt.Sprintf("%s.steps[%d]", where, i)
		if s.Instruction != "" && (r.Mode != ModeSequence || i == 0) {
			v.bad(RulePolicySchema, sw+".instruction", "only allowed on sequence steps after the first")
		}
		v.step(sw, s)
	}
	if r.Judge != nil {
		if r.Judge.Instruction != "" {
			v.bad(RulePolicySchema, where+".judge.instruction", "not allowed on a judge")
		}
		v.step(where+".judge", r.Judge)
	}
}

func (v *policyValidator) step(where string, s *Step) {
	switch {
	case s.Model == "":
		v.bad(RulePolicySchema, where+".model", "is required")
	case !v.models[s.Model]:
		v.bad(RuleUnknownModel, where+".model", "%q is not an allowlisted model", clip(s.Model))
	}
	if len(s.Instruction) > maxTextBytes {
		v.bad(RulePolicySchema, where+".instruction", "longer than %d bytes", maxTextBytes)
	}
	if s.MaxTokens < 0 || s.MaxTokens > maxStepTokens {
		v.bad(RulePolicySchema, where+".max_tokens", "must be 0 to %d", maxStepTokens)
	}
	if t := s.TemperatureMilli; t != nil && (*t < 0 || *t > maxTemperatureMill) {
		v.bad(RulePolicySchema, where+".temperature_milli", "must be 0 to %d", maxTemperatureMill)
	}
	if len(s.Fallbacks) > maxFallbacks {
		v.bad(RulePolicySchema, where+".fallbacks", "at most %d models", maxFallbacks)
	}
	for i, f := range s.Fallbacks {
		if !v.models[f] {
			v.bad(RuleUnknownModel, fmt.Sprintf("%s.fallbacks[%d]", where, i), "%q is not an allowlisted model", clip(f))
		}
	}
	if rw := s.Rewrite; rw != nil {
		if rw.TruncateHistory < 0 || rw.TruncateHistory > maxKeepMessages {
			v.bad(RulePolicySchema, where+".rewrite.truncate_history", "must be 0 to %d", maxKeepMessages)
		}
		if rw.SystemPrefix == "" && !rw.DropTools && rw.TruncateHistory == 0 {
			v.bad(RulePolicySchema, where+".rewrite", "changes nothing; omit it")
		}
		if len(rw.SystemPrefix) > maxTextBytes {
			v.bad(RulePolicySchema, where+".rewrite.system_prefix", "longer than %d bytes", maxTextBytes)
		}
	}
}

func validRouteName(s string) bool {
	if s == "" || len(s) > maxNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
