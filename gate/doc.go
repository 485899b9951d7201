// Package gate holds the static gates that a validator runs over a revealed
// submission before any of its code runs.
//
// A gate reads an unpacked submission tree through an fs.FS and returns the
// list of rule violations it finds. An empty list means the submission passes;
// a non-nil error means the gate itself could not do its work (an I/O failure
// or a caller bug), which is never a verdict on the submission. Gates never
// execute, import or evaluate submission content, never touch the network and
// never read the environment; the same tree always yields the same
// violations, sorted by (Path, Line, Rule, Detail).
//
// There is one gate per competition kind:
//
//   - Optimizer checks that optimizer.py is a plain torch update rule: it
//     parses the source with a real Python grammar (tree-sitter) and walks the
//     syntax tree against an allowlist of node kinds, names and attribute
//     chains.
//   - Scenarios checks the shape of a scenario pack: SKILL.md plus exactly one
//     policy form, with policy.json validated against the fusion policy schema.
//   - Rollouts checks a rollouts submission: a pinned model revision and a
//     rows file holding exactly one strictly-typed row per task id, read as a
//     stream.
//
// Every rule name is a stable kebab-case identifier; docs/GATES.md lists them
// with the limits and the accepted Python subset.
package gate
