// Package mathverify is the deterministic reward checker for math answers: it
// extracts the final answer from a model response and decides, exactly, whether
// it denotes the same mathematical object as a gold answer.
//
// # Model
//
// A decision is Equal, NotEqual or Undetermined. Equal and NotEqual are proofs
// made with exact arithmetic (math/big rationals and canonical forms); nothing is
// decided by floating point, tolerance or sampling. Whatever the checker cannot
// decide exactly is Undetermined: it never guesses. All work is bounded by fuel, a
// step count (one unit per input byte and token, per polynomial term operation,
// per 32 products of 64-bit words of big-integer arithmetic); running out makes
// the decision Undetermined with Reason "fuel". There are no timers, no
// randomness, no map-order dependence and no global state, so the same inputs and
// fuel give the same Result on every machine. Reward is 1 exactly when the
// decision under DefaultFuel is Equal, and 0 otherwise. Version names these rules.
//
// # Extraction
//
// Extract tries, in order, and the first rule that yields a non-empty answer wins:
//
//  1. boxed: the content of the last well-formed \boxed{...} or \fbox{...}
//     (balanced braces; \{ and \} are escaped and do not count). A later box
//     with unbalanced braces is skipped in favour of an earlier complete one.
//     "\boxed 5" (no braces) takes the token after the space. Boxes before it
//     that only a connector separates from it join it as one list: commas,
//     semicolons, "and", "or", spaces, \quad, \qquad, \text{and} and math
//     delimiters ("\boxed{1} and \boxed{2}" is "1, 2"); any other text between
//     boxes leaves only the last one.
//  2. final_answer: after the last "final answer is" or "final answer:"
//     (ASCII case-insensitive): a leading $...$, $$...$$, \(...\) or \[...\]
//     span if there is one, else the rest of the line up to the first ". ".
//  3. answer_is: the same after the last "answer is" or "answer:".
//  4. last_math: the last complete $...$, $$...$$, \(...\) or \[...\] span on
//     the last non-empty line (a $$...$$ or \[...\] block that ends the text
//     counts as its last line even when it spans lines), joined with the spans
//     before it that only a connector separates from it, as for boxes ("$1$
//     and $2$" is "1, 2"). An escaped \$ inside a span does not close it.
//  5. whole: the whole response when it is a single line of at most 64 bytes.
//
// Asterisks (Markdown bold) at either end, a final full stop and outer spaces
// are removed.
// There is deliberately no "last number in the text" rule.
//
// # Answers
//
// An answer is one of: a scalar expression, a percentage, ±∞, a bare list
// (1, 2, 3 or "2 or 3"), a tuple ((a, b, c), or [a, b, c]), a pair (a, b)
// (an ordered pair or an open interval: it compares as either), a set \{...\}
// (also \emptyset, \varnothing), an interval [a, b), (a, b], [a, b], an
// inequality (x > 3, -2 \le x < 5, x \ne 1, or one relation linear in one
// variable with a rational coefficient: -x > -1, 2x + 1 \le 5), \mathbb{R}, a union with \cup,
// an equation, named values (x = 1, y = 2), or text.
//
// Expressions use integers, decimals (exact: 0.333 is 333/1000, not 1/3),
// repeating decimals 0.1\overline{6}, scientific notation 1.5e3 and 1.5E-3
// (only with the e directly after a digit), thousands separators "1{,}000",
// "1\,000", "1,\!000" (also "1,\! 000"), "1,000" and "1 000" (the last two
// only outside brackets, after at most three digits, with exactly three digits
// after each comma or space; a comma is never a decimal separator), \frac, \dfrac, \tfrac,
// \cfrac (with braced or one-character arguments: \frac12), a/b, mixed numbers
// (2\frac{1}{2} is 5/2), + - ± ∓, \cdot \times * ÷ \div, implicit
// multiplication (2x, 2\pi, (x+1)(x-1); 1/2x is (1/2)·x), powers ^ and ** (an
// unbraced exponent is one whole number, letter or command: 2^10 is 1024),
// \sqrt{}, \sqrt[n]{}, sqrt(), √, ! and !!, \binom, |x|, \lfloor \rfloor,
// \lceil \rceil, \gcd, \operatorname{lcm}, \max, \min, \log_b with a rational
// result, \ln 1, \pi (π), i (the imaginary unit), \infty, \left and \right (and
// the other sizing commands), \text{...}, \mathrm{...}, \mathbf{...} and the
// like, \boxed{...} as a wrapper, and the Unicode forms of these symbols. Letters are variables (x_1,
// \alpha, \theta included); e is a letter like any other. Every other command is
// unsupported (Undetermined).
//
// Wrappers and marks that carry no value are dropped: $ delimiters, \$, spacing
// commands, degree marks (30^\circ, 30°, \degree and "degrees" all mean 30; no
// conversion to radians, except inside a trigonometric function, where x° is
// x·π/180), currency signs ($, \$, €, £, ¥), and units: the words of a fixed
// list (cm, m, km, kg, s, hours, dollars, usd, eur, units, ways, …; see
// isUnitWord), bare (of two or more letters) or in \text{...}, with an
// optional power (cm^2, cm²), also as quotients of units (m/s, km/h). A single
// bare letter is a variable, never a unit (2m is 2·m). "pct" and "percentage"
// mean %. Any other run of four or more
// letters, or any word inside \text{...} that is neither a unit nor "or"/"and",
// makes the answer text. Text answers are Equal when their normalized forms
// (lower case, markup removed, spaces collapsed) are identical, and Undetermined
// otherwise.
//
// "v = rhs" and "v \in rhs" with a single variable v, or a tuple of distinct
// variables ("(p, q) = (3, 2)"), on the left are the answer rhs, also inside
// lists: "n = 2, 3, 4" is the list 2, 3, 4. A chain of equalities a = b = … = z
// is a = z: its last member is the value it arrives at ("x = 5 + 6 = 11" is
// 11). "!=" is ≠. Brackets, braces and commands nest up to 1024 deep; deeper
// answers are Undetermined. A list in which
// every entry names a different variable ("x = 1, y = 2") is a set of named
// values. ± and ∓ expand to the set of both signs, with all ± in an expression
// taking the same sign (∓ the opposite): "\pm 2" is the set {2, -2}.
//
// # Comparison
//
// Scalars are compared by exact canonical forms: rational numbers; radicals of
// rationals in canonical form (\sqrt{8} is 2\sqrt{2}, \sqrt[3]{16} is
// 2\sqrt[3]{2}, products and quotients of radicals with rational coefficients,
// 1/(\sqrt{3}-1) by cross-multiplication); i with i^2 = -1; π as a transcendental
// atom; and polynomials and rational functions in the variables, expanded and
// normalized. a/b = c/d is decided as a·d - c·b = 0 in canonical form, which is
// exact because distinct canonical monomials are linearly independent. Functions
// the checker does not evaluate (\sin, \ln 2, x^y, \sqrt{x}, …) become opaque
// atoms named by their canonical arguments: equal atoms cancel, but a non-zero
// difference that involves one is Undetermined, never NotEqual. A power b^{p/q}
// with p = kq + 1 that has no exact value is b^k times the atom of \sqrt[q]{b}
// (x^{0.5} is \sqrt{x}, x^{1.5} is x\sqrt{x}); other fractional powers stay
// atoms of their own. Radicands are
// factored exactly (trial division, Pollard's rho below 2^64, Baillie-PSW above);
// a radicand that cannot be factored is Undetermined. Factorials and powers are
// computed exactly within the fuel, so 1/2004! and 1/2006! are NotEqual, and
// 2^{10^6} is Undetermined for lack of fuel.
//
// Percentages: when the gold answer is a percentage p%, an answer p% or p or
// p/100 is Equal (25\% accepts 25\%, 25 and 0.25). When the gold answer is not a
// percentage, an answer q% means q/100 (gold 0.25 accepts 25\%; gold 25 does not).
//
// Structures: sets and bare lists compare as finite sets (order and repetition do
// not matter; a single value is a one-element set); tuples and pairs compare in
// order, and a bare list or named values take the order of the tuple they meet;
// named values compare by name; intervals, unions, inequalities and pairs met
// with them compare as sets of real numbers: each side is reduced to sorted,
// disjoint components (empty ones dropped, touching ones merged) with ends
// ordered by a proven sign (interval arithmetic with exact integer bounds on
// radicals and π), then compared end by end and openness by openness. Ends at
// ±∞ are always open. When ends cannot be ordered (variables), only an exact
// one-to-one match of components is decided (Equal). Equations are Equal when
// one's lhs - rhs is a constant multiple of the other's; otherwise Undetermined.
// An equation whose right-hand side is a constant and whose left-hand side
// names a quantity (a single term without numbers: f(x) = 1, |AB| = 1,
// \frac{NO}{BO} = c), met with a constant, stands for that right-hand side.
// "v = rhs" with a non-constant rhs, met with an equation, is also the
// equation v - rhs = 0 (2x + 3y = 6 and y = 2 - \frac{2}{3}x are Equal).
// Objects of different kinds (a set and a tuple, a number and an interval) are
// NotEqual; an equation or text against anything else is Undetermined, except
// that a text answer is Equal to an answer with the same normalized text
// (\text{odd} and odd, \text{E} and E). Two answers that are identical up to
// white space are Equal even when the checker cannot read them (a matrix, a
// ratio), unless fuel ran out.
//
// Known false positives of looser checkers are NotEqual here: \pm 2021 and 2021,
// n = 2, 3, 4 and n = 1, 2, 3, 1/2004! and 1/2006!.
//
// # Parity with Math-Verify
//
// The public Math-Verify project's own test cases are converted into
// scoring/testdata/mathverify_upstream.json (source commit and license in the
// file) and run by TestUpstreamParity; every case decided differently is listed
// with the class of its reason in mathverify_upstream_differences.json
// (docs/PROTOCOL.md records the counts).
package mathverify
