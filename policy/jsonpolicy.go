package policy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/feval/feval/gate"
	"github.com/feval/feval/meter"
)

// PatternExpressions are the RE2 expressions of the named content patterns
// (gate.Patterns) a policy.json match may test on the last user message.
var PatternExpressions = map[string]string{
	"code":         "(?m)^```",
	"diff":         `(?m)^(@@ |--- |\+\+\+ )`,
	"error":        `(?i)\b(error|exception|traceback)\b`,
	"failing_test": `(?i)\b(failed|failing|assertionerror)\b`,
	"path":         `[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]*\.[A-Za-z0-9]+`,
	"question":     `\?\s*$`,
}

var patterns = sync.OnceValue(func() map[string]*regexp.Regexp {
	out := map[string]*regexp.Regexp{}
	for n, e := range PatternExpressions {
		out[n] = regexp.MustCompile(e)
	}
	return out
})

// Default texts of the policy.json interpreter (docs/POLICY.md §3).
const (
	DefaultInstruction = "Review the draft answer above and give the final answer, with the tool calls it needs."
	judgePrompt        = "Candidate answers to the conversation above follow. Write the best final answer, with the tool calls it needs."
)

// jsonEngine interprets a policy.json; it holds the session state.
type jsonEngine struct {
	s       *Sidecar
	p       *gate.Policy
	sticky  *gate.Route
	task    json.RawMessage // the kept task message (session.keep_task), compact
	taskRaw json.RawMessage // as the agent sent it
	client  *http.Client
}

func newJSONEngine(s *Sidecar, p *gate.Policy) (*jsonEngine, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: policy.json form without a parsed policy", ErrOptions)
	}
	return &jsonEngine{s: s, p: p, client: &http.Client{Transport: meter.Transport(s.sc.Handler())}}, nil
}

func (e *jsonEngine) close() {}

// decide returns the route for a request of the given turn and the messages
// the session forwards (session rules applied). It updates session state.
func (e *jsonEngine) decide(turn int, req *agentRequest) (*gate.Route, []json.RawMessage) {
	msgs := req.messages
	if ses := e.p.Session; ses != nil {
		if ses.KeepTask && e.task == nil && turn == 1 {
			for i, m := range req.msgs {
				if m.role == "user" {
					e.taskRaw, e.task = msgs[i], compact(msgs[i])
					break
				}
			}
		}
		if ses.KeepMessages > 0 {
			msgs = truncate(msgs, req.msgs, ses.KeepMessages)
		}
		if ses.KeepTask && e.task != nil {
			held := false
			for _, m := range msgs {
				// The agent usually resends the same bytes; compare the
				// compact forms only of other user messages.
				if bytes.Equal(m, e.taskRaw) || (bytes.Contains(m, userRole) && bytes.Equal(compact(m), e.task)) {
					held = true
					break
				}
			}
			if !held {
				n := 0
				for n < len(msgs) && roleOf(msgs[n]) == "system" {
					n++
				}
				msgs = append(append(append([]json.RawMessage{}, msgs[:n]...), e.task), msgs[n:]...)
			}
		}
	}
	if e.sticky != nil {
		return e.sticky, msgs
	}
	var chosen *gate.Route
	for i := range e.p.Routes {
		r := &e.p.Routes[i]
		if r.Match == nil || matches(r.Match, turn, req) {
			chosen = r
			break
		}
	}
	if e.p.Session != nil && e.p.Session.StickyRoute {
		e.sticky = chosen
	}
	return chosen, msgs
}

// matches reports whether every condition of m holds for the request.
func matches(m *gate.Match, turn int, req *agentRequest) bool {
	n := len(req.msgs)
	if m.HasTools != nil && *m.HasTools != req.hasTools {
		return false
	}
	if n < m.MinMessages || (m.MaxMessages > 0 && n > m.MaxMessages) {
		return false
	}
	if turn < m.MinTurn || (m.MaxTurn > 0 && turn > m.MaxTurn) {
		return false
	}
	if m.LastRole != "" && req.msgs[n-1].role != m.LastRole {
		return false
	}
	if m.HasRole != "" {
		found := false
		for _, mi := range req.msgs {
			if mi.role == m.HasRole {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if m.Contains != "" || m.Pattern != "" {
		last := ""
		for i := n - 1; i >= 0; i-- {
			if req.msgs[i].role == "user" {
				last = req.msgs[i].text()
				break
			}
		}
		if m.Contains != "" && !strings.Contains(last, m.Contains) {
			return false
		}
		if m.Pattern != "" && !patterns()[m.Pattern].MatchString(last) {
			return false
		}
	}
	return true
}

var userRole = []byte(`"user"`)

func roleOf(m json.RawMessage) string {
	var r struct {
		Role string `json:"role"`
	}
	json.Unmarshal(m, &r)
	return r.Role
}

func compact(m json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, m) != nil {
		return m
	}
	return b.Bytes()
}

// truncate keeps the system messages and the last keep other messages,
// dropping tool results left at the head of the kept tail (their call was
// cut off).
func truncate(msgs []json.RawMessage, info []msgInfo, keep int) []json.RawMessage {
	if info == nil || len(info) != len(msgs) {
		info = make([]msgInfo, len(msgs))
		for i, m := range msgs {
			info[i].role = roleOf(m)
		}
	}
	others := 0
	for _, mi := range info {
		if mi.role != "system" {
			others++
		}
	}
	if others <= keep {
		return msgs
	}
	drop := others - keep
	out := make([]json.RawMessage, 0, len(msgs))
	head := true
	for i, m := range msgs {
		if info[i].role == "system" {
			out = append(out, m)
			continue
		}
		if drop > 0 {
			drop--
			continue
		}
		if head && info[i].role == "tool" {
			continue
		}
		head = false
		out = append(out, m)
	}
	return out
}

// stepBody builds the request a step's model sees.
func (e *jsonEngine) stepBody(req *agentRequest, st *gate.Step, model string, msgs []json.RawMessage, extra []json.RawMessage, stream bool) []byte {
	f := make(map[string]json.RawMessage, len(req.fields)+2)
	for k, v := range req.fields {
		switch k {
		case "model", "messages", "stream", "stream_options":
		default:
			f[k] = v
		}
	}
	if rw := st.Rewrite; rw != nil {
		if rw.TruncateHistory > 0 {
			msgs = truncate(msgs, nil, rw.TruncateHistory)
		}
		if rw.DropTools {
			delete(f, "tools")
			delete(f, "tool_choice")
			delete(f, "parallel_tool_calls")
		}
		if rw.SystemPrefix != "" {
			msgs = withSystemPrefix(msgs, rw.SystemPrefix)
		}
	}
	if len(extra) > 0 {
		msgs = append(append([]json.RawMessage{}, msgs...), extra...)
	}
	if st.MaxTokens > 0 {
		f["max_tokens"] = json.RawMessage(strconv.Itoa(st.MaxTokens))
		delete(f, "max_completion_tokens")
	}
	if t := st.TemperatureMilli; t != nil {
		f["temperature"] = json.RawMessage(milliDecimal(*t))
	}
	if stream {
		f["stream"] = json.RawMessage("true")
		if so, ok := req.fields["stream_options"]; ok {
			f["stream_options"] = so
		}
	}
	mb, _ := json.Marshal(model)
	f["model"] = mb
	f["messages"] = encodeArray(msgs)
	return encodeObject(f)
}

// encodeObject writes an object of valid JSON values with its keys sorted,
// without re-validating the values (they come from a parsed request or from
// json.Marshal).
func encodeObject(f map[string]json.RawMessage) []byte {
	keys := make([]string, 0, len(f))
	n := 2
	for k, v := range f {
		keys = append(keys, k)
		n += len(k) + len(v) + 4
	}
	sort.Strings(keys)
	b := make([]byte, 0, n+16)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		kb, _ := json.Marshal(k)
		b = append(b, kb...)
		b = append(b, ':')
		b = append(b, f[k]...)
	}
	return append(b, '}')
}

// encodeArray writes an array of valid JSON values.
func encodeArray(vs []json.RawMessage) json.RawMessage {
	n := 2
	for _, v := range vs {
		n += len(v) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return append(b, ']')
}

// milliDecimal writes thousandths as a JSON decimal without a float: 200 is
// 0.2, 1500 is 1.5.
func milliDecimal(m int) string {
	if m%1000 == 0 {
		return strconv.Itoa(m / 1000)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%03d", m/1000, m%1000), "0")
}

func withSystemPrefix(msgs []json.RawMessage, prefix string) []json.RawMessage {
	out := append([]json.RawMessage{}, msgs...)
	if len(out) > 0 {
		var m map[string]json.RawMessage
		var content string
		if json.Unmarshal(out[0], &m) == nil && roleOf(out[0]) == "system" && json.Unmarshal(m["content"], &content) == nil {
			m["content"], _ = json.Marshal(prefix + "\n\n" + content)
			out[0], _ = json.Marshal(m)
			return out
		}
	}
	sys, _ := json.Marshal(map[string]string{"role": "system", "content": prefix})
	return append([]json.RawMessage{sys}, out...)
}

func userMessage(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"role": "user", "content": text})
	return b
}

// outcome is one step's result after its fallbacks.
type outcome struct {
	a      *answer
	status int
	body   []byte
}

func (o *outcome) ok() bool { return o.a != nil }

// result turns a meter result into an outcome.
func result(r meter.Result) outcome {
	if r.Status != http.StatusOK {
		return outcome{status: r.Status, body: r.Body}
	}
	a, err := completionMessage(r.Body)
	if err != nil {
		return outcome{status: http.StatusBadGateway, body: apiErrorBody("upstream_error", "unreadable_answer", "the model's answer was unreadable: "+err.Error())}
	}
	return outcome{a: a, status: http.StatusOK, body: r.Body}
}

// runSteps calls every step on its messages in parallel, admitted in step
// order; a failed step is retried on its next fallback model in a later
// round, again in step order.
func (e *jsonEngine) runSteps(ctx context.Context, req *agentRequest, steps []*gate.Step, msgs [][]json.RawMessage, extra [][]json.RawMessage) []outcome {
	out := make([]outcome, len(steps))
	for round := 0; ; round++ {
		var idx []int
		var bodies [][]byte
		for i, st := range steps {
			if out[i].ok() || (round > 0 && round > len(st.Fallbacks)) {
				continue
			}
			model := st.Model
			if round > 0 {
				model = st.Fallbacks[round-1]
			}
			var ex []json.RawMessage
			if extra != nil {
				ex = extra[i]
			}
			idx = append(idx, i)
			bodies = append(bodies, e.stepBody(req, st, model, msgs[i], ex, false))
		}
		if len(idx) == 0 {
			return out
		}
		for j, r := range e.s.sc.CallAll(ctx, bodies) {
			out[idx[j]] = result(r)
		}
	}
}

// streamStep calls a step's model (then its fallbacks) with stream set and
// relays the first answer that starts to the agent. It returns false with
// the last failure when no model answered.
func (e *jsonEngine) streamStep(ctx context.Context, x *exchange, st *gate.Step, msgs []json.RawMessage, extra []json.RawMessage) (bool, outcome) {
	var last outcome
	for _, model := range append([]string{st.Model}, st.Fallbacks...) {
		body := e.stepBody(x.req, st, model, msgs, extra, true)
		// Like every meter call, a streamed one runs to its end: the meter's
		// own timeouts bound it.
		hr, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, "http://meter/v1/chat/completions", bytes.NewReader(body))
		hr.Header.Set("Content-Type", "application/json")
		resp, err := e.client.Do(hr)
		if err != nil {
			return false, outcome{status: http.StatusGatewayTimeout, body: apiErrorBody("policy_error", "policy_timeout", err.Error())}
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = outcome{status: resp.StatusCode, body: b}
			continue
		}
		relayEvents(resp.Body, x.relay)
		resp.Body.Close()
		return true, outcome{}
	}
	return false, last
}

// relayEvents copies server-sent events (each its lines and the blank line
// ending it) from r to emit.
func relayEvents(r io.Reader, emit func([]byte)) {
	br := bufio.NewReader(r)
	var ev []byte
	for {
		line, err := br.ReadBytes('\n')
		ev = append(ev, line...)
		if len(bytes.TrimRight(line, "\r\n")) == 0 && len(bytes.TrimSpace(ev)) > 0 {
			emit(ev)
			ev = nil
		}
		if err != nil {
			if len(bytes.TrimSpace(ev)) > 0 {
				emit(ev)
			}
			return
		}
	}
}

// draftText renders an answer for a later model to read.
func draftText(a *answer) string {
	var m struct {
		Content   *string         `json:"content"`
		ToolCalls json.RawMessage `json:"tool_calls"`
	}
	json.Unmarshal(a.Message, &m)
	s := ""
	if m.Content != nil {
		s = *m.Content
	}
	if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
		if s != "" {
			s += "\n"
		}
		s += "Tool calls: " + string(m.ToolCalls)
	}
	return s
}

func (e *jsonEngine) answer(ctx context.Context, x *exchange) error {
	route, msgs := e.decide(x.turn, x.req)
	x.route = route.Name
	streamFinal := x.req.stream && e.p.Stream
	steps := make([]*gate.Step, len(route.Steps))
	for i := range route.Steps {
		steps[i] = &route.Steps[i]
	}
	finish := func(st *gate.Step, extra []json.RawMessage) {
		if streamFinal {
			if ok, o := e.streamStep(ctx, x, st, msgs, extra); !ok {
				x.passError(o.status, o.body)
			}
			return
		}
		o := e.runSteps(ctx, x.req, []*gate.Step{st}, [][]json.RawMessage{msgs}, [][]json.RawMessage{extra})[0]
		if o.ok() {
			x.final = o.a
		} else {
			x.passError(o.status, o.body)
		}
	}
	switch route.Mode {
	case gate.ModeSingle:
		finish(steps[0], nil)
	case gate.ModeSequence:
		var prev *answer
		for i, st := range steps {
			var extra []json.RawMessage
			if prev != nil {
				instr := st.Instruction
				if instr == "" {
					instr = DefaultInstruction
				}
				extra = []json.RawMessage{userMessage("Draft answer:\n" + draftText(prev) + "\n\n" + instr)}
			}
			if i == len(steps)-1 {
				finish(st, extra)
				break
			}
			o := e.runSteps(ctx, x.req, []*gate.Step{st}, [][]json.RawMessage{msgs}, [][]json.RawMessage{extra})[0]
			if !o.ok() {
				x.passError(o.status, o.body)
				return nil
			}
			prev = o.a
		}
	case gate.ModeParallel:
		all := make([][]json.RawMessage, len(steps))
		for i := range all {
			all[i] = msgs
		}
		outs := e.runSteps(ctx, x.req, steps, all, nil)
		var good []*answer
		var last outcome
		for _, o := range outs {
			if o.ok() {
				good = append(good, o.a)
			} else {
				last = o
			}
		}
		if len(good) == 0 {
			x.passError(last.status, last.body)
			return nil
		}
		if route.Combine == gate.CombineJudge {
			var sb strings.Builder
			sb.WriteString(judgePrompt)
			for i, a := range good {
				fmt.Fprintf(&sb, "\n\n[%d]\n%s", i+1, draftText(a))
			}
			finish(route.Judge, []json.RawMessage{userMessage(sb.String())})
			if x.final == nil && !x.sse { // the judge failed: the first answer stands
				x.final, x.errBody = good[0], nil
			}
			return nil
		}
		x.final = combine(route.Combine, good)
	}
	return nil
}

// combine picks or builds the final answer of a parallel route from the
// answers that succeeded, in step order.
func combine(how string, good []*answer) *answer {
	switch how {
	case gate.CombineMajority:
		counts := map[string]int{}
		best, bestN := 0, 0
		for i, a := range good {
			k := answerKey(a)
			counts[k]++
			if counts[k] > bestN {
				best, bestN = i, counts[k]
			}
		}
		// The earliest answer among those with the highest count.
		for i, a := range good {
			if counts[answerKey(a)] == bestN {
				return good[i]
			}
		}
		return good[best]
	case gate.CombineConcat:
		var parts []string
		var calls json.RawMessage
		for _, a := range good {
			var m struct {
				Content   *string         `json:"content"`
				ToolCalls json.RawMessage `json:"tool_calls"`
			}
			json.Unmarshal(a.Message, &m)
			if m.Content != nil && strings.TrimSpace(*m.Content) != "" {
				parts = append(parts, *m.Content)
			}
			if calls == nil && len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
				calls = m.ToolCalls
			}
		}
		msg := map[string]any{"role": "assistant", "content": strings.Join(parts, "\n\n")}
		finish := "stop"
		if calls != nil {
			msg["tool_calls"] = calls
			finish = "tool_calls"
		}
		b, _ := json.Marshal(msg)
		return &answer{Message: b, FinishReason: finish}
	case gate.CombineShortest, gate.CombineLongest:
		best := good[0]
		for _, a := range good[1:] {
			if (how == gate.CombineShortest && len(draftText(a)) < len(draftText(best))) ||
				(how == gate.CombineLongest && len(draftText(a)) > len(draftText(best))) {
				best = a
			}
		}
		return best
	default: // first, first_success
		return good[0]
	}
}

// answerKey identifies an answer for a majority vote: its trimmed content
// and its tool calls' names and arguments (ids ignored).
func answerKey(a *answer) string {
	var m struct {
		Content   *string `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	json.Unmarshal(a.Message, &m)
	var sb strings.Builder
	if m.Content != nil {
		sb.WriteString(strings.TrimSpace(*m.Content))
	}
	for _, c := range m.ToolCalls {
		sb.WriteString("\x00" + c.Function.Name + "\x00" + c.Function.Arguments)
	}
	return sb.String()
}
