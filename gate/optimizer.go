package gate

import (
	"errors"
	"fmt"
	"io/fs"
)

// OptimizerFile is the one file an optimizer submission holds, at the root
// of its tree.
const OptimizerFile = "optimizer.py"

// OptimizerLimits bounds what the optimizer gate reads. A zero field takes
// its default.
type OptimizerLimits struct {
	// MaxSourceBytes bounds optimizer.py (default 64 KiB).
	MaxSourceBytes int64
	// MaxNestingDepth bounds the nesting of statements and expressions
	// (default 64).
	MaxNestingDepth int
	// MaxLiteralBytes bounds the literal data of optimizer.py: the source
	// bytes of all its string, integer and float literals (default 8 KiB).
	MaxLiteralBytes int
	// MaxViolationsPerRule bounds the violations listed per rule; the rest
	// are counted in one summary violation (default 100).
	MaxViolationsPerRule int
}

// DefaultOptimizerLimits returns the limits used when a field is zero.
func DefaultOptimizerLimits() OptimizerLimits {
	return OptimizerLimits{MaxSourceBytes: 64 << 10, MaxNestingDepth: 64, MaxLiteralBytes: 8 << 10, MaxViolationsPerRule: 100}
}

func (l OptimizerLimits) withDefaults() OptimizerLimits {
	d := DefaultOptimizerLimits()
	if l.MaxSourceBytes <= 0 {
		l.MaxSourceBytes = d.MaxSourceBytes
	}
	if l.MaxNestingDepth <= 0 {
		l.MaxNestingDepth = d.MaxNestingDepth
	}
	if l.MaxLiteralBytes <= 0 {
		l.MaxLiteralBytes = d.MaxLiteralBytes
	}
	if l.MaxViolationsPerRule <= 0 {
		l.MaxViolationsPerRule = d.MaxViolationsPerRule
	}
	return l
}

// Optimizer runs the optimizer gate over an unpacked submission tree. The
// tree must hold exactly one regular file, optimizer.py, which must be a
// plain torch update rule in the Python subset documented in docs/GATES.md.
// The source is parsed, never executed. It returns the violations found
// (empty when the submission passes) and an error only when the tree cannot
// be read or the parser cannot be loaded.
func Optimizer(fsys fs.FS, limits OptimizerLimits) ([]Violation, error) {
	limits = limits.withDefaults()
	t, vs, err := listTree(fsys, 16)
	if err != nil {
		return nil, fmt.Errorf("optimizer gate: %w", err)
	}
	if t.truncated {
		return normalize(vs), nil
	}
	for _, d := range t.dirs {
		vs = append(vs, Violation{Rule: RuleExtraFile, Path: d, Detail: "directories are not allowed; the submission is optimizer.py alone"})
	}
	for _, f := range t.files {
		if f.path != OptimizerFile {
			vs = append(vs, Violation{Rule: RuleExtraFile, Path: f.path, Detail: "the submission is optimizer.py alone"})
		}
	}
	if !t.has(OptimizerFile) {
		vs = append(vs, Violation{Rule: RuleMissingFile, Path: OptimizerFile, Detail: "optimizer.py is missing"})
		return normalize(vs), nil
	}
	src, err := readLimited(fsys, OptimizerFile, limits.MaxSourceBytes)
	if errors.Is(err, errTooLarge) {
		vs = append(vs, tooLarge(OptimizerFile, limits.MaxSourceBytes))
		return normalize(vs), nil
	}
	if err != nil {
		return nil, fmt.Errorf("optimizer gate: %w", err)
	}
	more, err := checkPythonSource(OptimizerFile, src, limits, true)
	if err != nil {
		return nil, fmt.Errorf("optimizer gate: %w", err)
	}
	return capPerRule(normalize(append(vs, more...)), limits.MaxViolationsPerRule), nil
}

// OptimizerSource runs the optimizer gate's source checks over src, reported
// under path, without a tree. It enforces MaxSourceBytes too.
func OptimizerSource(path string, src []byte, limits OptimizerLimits) ([]Violation, error) {
	limits = limits.withDefaults()
	if int64(len(src)) > limits.MaxSourceBytes {
		return []Violation{tooLarge(path, limits.MaxSourceBytes)}, nil
	}
	vs, err := checkPythonSource(path, src, limits, true)
	if err != nil {
		return nil, fmt.Errorf("optimizer gate: %w", err)
	}
	return capPerRule(normalize(vs), limits.MaxViolationsPerRule), nil
}
