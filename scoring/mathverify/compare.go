package mathverify

import (
	"fmt"
	"math/big"
	"strings"
)

// Version names the checker's decision rules. It changes whenever any answer
// pair could be decided differently, so a verdict that records it can be
// replayed with the same rules.
const Version = "mathverify/2"

// ReasonFuel is the Reason of every comparison that ran out of fuel.
const ReasonFuel = "fuel"

// Outcome is the decision of a comparison. The zero value is Undetermined.
type Outcome uint8

const (
	// Undetermined: the checker cannot decide exactly (unsupported notation,
	// opaque functions, text, malformed input, or fuel ran out).
	Undetermined Outcome = iota
	// Equal: the answers denote the same mathematical object, proven exactly.
	Equal
	// NotEqual: the answers denote different objects, proven exactly.
	NotEqual
)

var outcomeNames = [...]string{"undetermined", "equal", "not_equal"}

// String returns "undetermined", "equal" or "not_equal".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// MarshalText encodes the outcome by its name.
func (o Outcome) MarshalText() ([]byte, error) {
	if int(o) >= len(outcomeNames) {
		return nil, fmt.Errorf("mathverify: invalid outcome %d", uint8(o))
	}
	return []byte(o.String()), nil
}

// UnmarshalText decodes an outcome name.
func (o *Outcome) UnmarshalText(b []byte) error {
	for i, n := range outcomeNames {
		if string(b) == n {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("mathverify: unknown outcome %q", b)
}

// Result is a decision and a short deterministic reason. The reason is for
// people; its wording may change between versions except for ReasonFuel.
type Result struct {
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason"`
}

func eq(reason string) Result  { return Result{Outcome: Equal, Reason: reason} }
func ne(reason string) Result  { return Result{Outcome: NotEqual, Reason: reason} }
func und(reason string) Result { return Result{Outcome: Undetermined, Reason: reason} }

// protect runs f and turns a stop into its reason.
func protect(f func()) (reason string, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			s, isStop := r.(stop)
			if !isStop {
				panic(r)
			}
			reason, ok = s.reason, false
		}
	}()
	f()
	return "", true
}

// Compare decides whether answer denotes the same mathematical object as gold,
// spending at most fuel steps on both parses and the comparison together. It is
// pure and deterministic: the same inputs and fuel give the same Result on every
// machine. Gold and answer play different roles only for percentages (see the
// package documentation). A fuel of zero or less decides nothing.
func Compare(gold, answer string, fuel int) Result {
	m := &meter{left: max(fuel, 0)}
	res := compare(m, gold, answer)
	if res.Outcome == Undetermined && res.Reason != ReasonFuel &&
		strings.Join(strings.Fields(gold), " ") == strings.Join(strings.Fields(answer), " ") {
		// what the checker cannot read is still equal to itself
		return eq("identical answers")
	}
	return res
}

func compare(m *meter, gold, answer string) Result {
	b := &builder{m: m}
	var g, a obj
	if r, ok := protect(func() { g = b.answer(gold) }); !ok {
		if r == ReasonFuel {
			return und(r)
		}
		return und("gold: " + r)
	}
	if r, ok := protect(func() { a = b.answer(answer) }); !ok {
		if r == ReasonFuel {
			return und(r)
		}
		return und("answer: " + r)
	}
	if (g.kind == oText || a.kind == oText) && normText(gold) == normText(answer) {
		return eq("same text") // \text{odd} and odd, \text{E} and E
	}
	var res Result
	c := &comparer{m: m}
	if r, ok := protect(func() { res = c.obj(g, a) }); !ok {
		return und(r)
	}
	return res
}

// Check is the whole record of one reward decision.
type Check struct {
	Answer string        `json:"answer"` // the extracted answer, "" when none
	Method ExtractMethod `json:"method"`
	Result Result        `json:"result"`
}

// Reward is 1 when the answer was found and is Equal to the gold answer, else 0.
func (c Check) Reward() *big.Rat {
	if c.Result.Outcome == Equal {
		return big.NewRat(1, 1)
	}
	return new(big.Rat)
}

// Score extracts the final answer from a response and compares it with gold.
// A response without an answer is Undetermined with reason "no answer".
func Score(gold, response string, fuel int) Check {
	ans, how, ok := Extract(response)
	if !ok {
		return Check{Method: how, Result: und("no answer")}
	}
	return Check{Answer: ans, Method: how, Result: Compare(gold, ans, fuel)}
}

// Reward returns the reward of a response for a problem with the given gold
// answer: 1 if its extracted answer is Equal to gold under DefaultFuel, else 0.
func Reward(gold, response string) *big.Rat {
	return Score(gold, response, DefaultFuel).Reward()
}

// --- comparison of parsed answers ---

type comparer struct{ m *meter }

// and3 combines two outcomes of "all of these are equal".
func and3(a, b Outcome) Outcome {
	switch {
	case a == NotEqual || b == NotEqual:
		return NotEqual
	case a == Equal && b == Equal:
		return Equal
	}
	return Undetermined
}

func (c *comparer) values(x, y value) Result {
	d := c.m.diff(x, y)
	if len(d) == 0 {
		return eq("equal values")
	}
	if d.hasAtoms(true) {
		return und("opaque function")
	}
	return ne("different values")
}

func (c *comparer) scalar(g, a obj) Result {
	switch {
	case g.pct && a.pct:
		return c.values(g.raw, a.raw)
	case g.pct:
		// a percentage gold accepts the number with or without the sign
		r1 := c.values(g.raw, a.v)
		if r1.Outcome == Equal {
			return eq("equal as a percentage")
		}
		r2 := c.values(g.v, a.v)
		if r2.Outcome == Equal {
			return eq("equal as a fraction")
		}
		if r1.Outcome == NotEqual && r2.Outcome == NotEqual {
			return ne("different percentage")
		}
		return und("opaque function")
	}
	return c.values(g.v, a.v)
}

func isRealSetKind(k objKind) bool { return k == oInterval || k == oUnion }

func (c *comparer) obj(g, a obj) Result {
	c.m.spend(1)
	switch {
	case g.kind == oText || a.kind == oText:
		if g.kind == a.kind && g.text == a.text {
			return eq("same text")
		}
		return und("text answer")
	case g.kind == oScalar && a.kind == oScalar:
		return c.scalar(g, a)
	case g.kind == oEquation || a.kind == oEquation:
		if g.kind == a.kind {
			return c.equations(g.v, a.v)
		}
		// "y = -x/2 + 3/4" met with an equation is the equation it states
		if g.kind == oEquation && a.kind == oScalar && a.eqn != nil {
			return c.equations(g.v, *a.eqn)
		}
		if a.kind == oEquation && g.kind == oScalar && g.eqn != nil {
			return c.equations(*g.eqn, a.v)
		}
		// "f(x) = 1" met with a constant is its constant right-hand side
		if g.kind == oEquation && g.rhs != nil && a.kind == oScalar && a.v.isConst() {
			return c.obj(*g.rhs, a)
		}
		if a.kind == oEquation && a.rhs != nil && g.kind == oScalar && g.v.isConst() {
			return c.obj(g, *a.rhs)
		}
		return und("equation and " + otherKind(g, a, oEquation).String())
	case g.kind == oInfinity || a.kind == oInfinity:
		if g.kind == a.kind {
			if g.inf == a.inf {
				return eq("same infinity")
			}
			return ne("opposite infinities")
		}
		if g.kind == oScalar || a.kind == oScalar {
			return ne("infinity and a number")
		}
		return ne(fmt.Sprintf("%s and %s", g.kind, a.kind))
	case isRealSetKind(g.kind) || isRealSetKind(a.kind):
		return c.realSets(g, a)
	case g.kind == oAssign && a.kind == oAssign:
		return c.assignments(g, a)
	case isOrdered(g.kind) && isOrdered(a.kind) && (g.kind != oList || a.kind != oList):
		return c.ordered(g.elems, a.elems)
	case isUnordered(g.kind) && isUnordered(a.kind):
		return c.sets(asElems(g), asElems(a))
	}
	return ne(fmt.Sprintf("%s and %s", g.kind, a.kind))
}

func otherKind(g, a obj, k objKind) objKind {
	if g.kind == k {
		return a.kind
	}
	return g.kind
}

// isOrdered: kinds compared in order against tuples (a bare list or named values
// take the order of the tuple they are compared with).
func isOrdered(k objKind) bool { return k == oTuple || k == oPair || k == oList || k == oAssign }

// isUnordered: kinds compared as finite sets (a single value is a one-element set).
func isUnordered(k objKind) bool { return k == oSet || k == oList || k == oScalar }

func asElems(o obj) []obj {
	if o.kind == oScalar {
		return []obj{o}
	}
	return o.elems
}

func (c *comparer) ordered(g, a []obj) Result {
	if len(g) != len(a) {
		return ne(fmt.Sprintf("%d entries and %d", len(g), len(a)))
	}
	out := Equal
	for i := range g {
		r := c.obj(g[i], a[i])
		if r.Outcome == NotEqual {
			return ne(fmt.Sprintf("entry %d: %s", i+1, r.Reason))
		}
		out = and3(out, r.Outcome)
	}
	if out == Equal {
		return eq("equal entries")
	}
	return und("undetermined entry")
}

// sets compares finite sets: every element of one must equal an element of the
// other. An element that is provably different from every element of the other
// side makes them NotEqual.
func (c *comparer) sets(g, a []obj) Result {
	c.m.spend(len(g) * len(a))
	table := make([]Outcome, len(g)*len(a))
	for i := range g {
		for j := range a {
			table[i*len(a)+j] = c.obj(g[i], a[j]).Outcome
		}
	}
	allMatched := true
	for i := range g {
		found, allNE := false, true
		for j := range a {
			o := table[i*len(a)+j]
			found = found || o == Equal
			allNE = allNE && o == NotEqual
		}
		if allNE {
			return ne(fmt.Sprintf("gold element %d is missing", i+1))
		}
		allMatched = allMatched && found
	}
	for j := range a {
		found, allNE := false, true
		for i := range g {
			o := table[i*len(a)+j]
			found = found || o == Equal
			allNE = allNE && o == NotEqual
		}
		if allNE {
			return ne(fmt.Sprintf("answer element %d is extra", j+1))
		}
		allMatched = allMatched && found
	}
	if allMatched {
		return eq("equal sets")
	}
	return und("undetermined set element")
}

func (c *comparer) assignments(g, a obj) Result {
	if len(g.names) != len(a.names) {
		return und("different variables")
	}
	out := Equal
	for i, n := range g.names {
		j := -1
		for k, m := range a.names {
			if m == n {
				j = k
			}
		}
		if j < 0 {
			return und("different variables")
		}
		r := c.obj(g.elems[i], a.elems[j])
		if r.Outcome == NotEqual {
			return ne(n + ": " + r.Reason)
		}
		out = and3(out, r.Outcome)
	}
	if out == Equal {
		return eq("equal values")
	}
	return und("undetermined value")
}

// equations: two equations are Equal when lhs - rhs of one is a non-zero
// constant multiple of the other's. Anything else is undetermined (x^2 = 1 and
// x^4 = 1 have the same real solutions).
func (c *comparer) equations(x, y value) Result {
	p := c.m.polyMul(x.num, y.den)
	q := c.m.polyMul(y.num, x.den)
	if len(p) == 0 || len(q) == 0 {
		if len(p) == len(q) {
			return eq("trivial equations")
		}
		return und("trivial equation")
	}
	if p[0].key != q[0].key {
		return und("different equations")
	}
	k := c.m.ratQuo(p[0].c, q[0].c)
	if len(c.m.polyAdd(p, c.m.polyScale(q, k), true)) == 0 {
		return eq("proportional equations")
	}
	return und("different equations")
}

// --- sets of real numbers ---

type comp struct {
	lo, hi   end
	loC, hiC bool
}

func (c *comparer) components(o obj) ([]comp, bool) {
	c.m.spend(1)
	switch o.kind {
	case oInterval:
		return []comp{{lo: o.lo, hi: o.hi, loC: o.loC, hiC: o.hiC}}, true
	case oPair:
		lo, ok1 := endOf(o.elems[0])
		hi, ok2 := endOf(o.elems[1])
		if !ok1 || !ok2 {
			return nil, false
		}
		return []comp{{lo: lo, hi: hi}}, true
	case oScalar:
		if o.pct {
			return nil, false
		}
		e := end{v: o.v}
		return []comp{{lo: e, hi: e, loC: true, hiC: true}}, true
	case oSet, oUnion, oList:
		var out []comp
		for _, e := range o.elems {
			if o.kind == oSet && e.kind != oScalar {
				return nil, false
			}
			cs, ok := c.components(e)
			if !ok {
				return nil, false
			}
			out = append(out, cs...)
		}
		return out, true
	}
	return nil, false
}

func endOf(o obj) (end, bool) {
	switch {
	case o.kind == oInfinity:
		return end{inf: o.inf}, true
	case o.kind == oScalar && !o.pct:
		return end{v: o.v}, true
	}
	return end{}, false
}

// cmpEnd orders two ends; ok is false when the order cannot be proven.
func (c *comparer) cmpEnd(a, b end) (int, bool) {
	if a.inf != 0 || b.inf != 0 {
		switch {
		case a.inf == b.inf:
			return 0, true
		case a.inf < b.inf:
			return -1, true
		}
		return 1, true
	}
	if len(c.m.diff(a.v, b.v)) == 0 {
		return 0, true
	}
	if !a.v.isConst() || !b.v.isConst() {
		return 0, false
	}
	return c.m.cmpVal(a.v, b.v)
}

// normalize returns the canonical form of a finite union: non-empty, sorted,
// disjoint and non-adjacent components.
func (c *comparer) normalize(cs []comp) ([]comp, bool) {
	var live []comp
	for _, x := range cs {
		o, ok := c.cmpEnd(x.lo, x.hi)
		if !ok {
			return nil, false
		}
		if o < 0 || (o == 0 && x.loC && x.hiC && x.lo.inf == 0) {
			live = append(live, x)
		}
	}
	// insertion sort by lower end, closed before open on ties
	for i := 1; i < len(live); i++ {
		for j := i; j > 0; j-- {
			o, ok := c.cmpEnd(live[j-1].lo, live[j].lo)
			if !ok {
				return nil, false
			}
			if o < 0 || (o == 0 && (live[j-1].loC || !live[j].loC)) {
				break
			}
			live[j-1], live[j] = live[j], live[j-1]
		}
	}
	var out []comp
	for _, x := range live {
		if len(out) == 0 {
			out = append(out, x)
			continue
		}
		cur := &out[len(out)-1]
		o, ok := c.cmpEnd(x.lo, cur.hi)
		if !ok {
			return nil, false
		}
		if o < 0 || (o == 0 && (cur.hiC || x.loC)) {
			h, ok := c.cmpEnd(x.hi, cur.hi)
			if !ok {
				return nil, false
			}
			switch {
			case h > 0:
				cur.hi, cur.hiC = x.hi, x.hiC
			case h == 0:
				cur.hiC = cur.hiC || x.hiC
			}
			continue
		}
		out = append(out, x)
	}
	return out, true
}

func (c *comparer) realSets(g, a obj) Result {
	gc, ok1 := c.components(g)
	ac, ok2 := c.components(a)
	if !ok1 || !ok2 {
		if (!ok1 && g.kind == oUnion) || (!ok2 && a.kind == oUnion) {
			return und("unsupported member of a union")
		}
		return ne(fmt.Sprintf("%s and %s", g.kind, a.kind))
	}
	gn, ok1 := c.normalize(gc)
	an, ok2 := c.normalize(ac)
	if ok1 && ok2 {
		if len(gn) != len(an) {
			return ne("different sets of reals")
		}
		for i := range gn {
			x, y := gn[i], an[i]
			lo, _ := c.cmpEnd(x.lo, y.lo)
			hi, _ := c.cmpEnd(x.hi, y.hi)
			if lo != 0 || hi != 0 || x.loC != y.loC || x.hiC != y.hiC {
				return ne("different sets of reals")
			}
		}
		return eq("equal sets of reals")
	}
	// symbolic ends: only an exact one-to-one match of components decides
	if len(gc) == len(ac) {
		used := make([]bool, len(ac))
		for _, x := range gc {
			found := false
			for j, y := range ac {
				if !used[j] && x.loC == y.loC && x.hiC == y.hiC && c.sameEnd(x.lo, y.lo) && c.sameEnd(x.hi, y.hi) {
					used[j], found = true, true
					break
				}
			}
			if !found {
				return und("interval ends of unknown order")
			}
		}
		return eq("equal intervals")
	}
	return und("interval ends of unknown order")
}

func (c *comparer) sameEnd(a, b end) bool {
	if a.inf != 0 || b.inf != 0 {
		return a.inf == b.inf
	}
	return len(c.m.diff(a.v, b.v)) == 0
}
