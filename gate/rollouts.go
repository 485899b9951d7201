package gate

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Rule names of the rollouts gate (besides the tree, JSON and row rules).
const (
	RuleJSONSyntax       = "json-syntax"
	RuleJSONSchema       = "json-schema"
	RuleUnpinnedRevision = "unpinned-revision"
	RuleDuplicateTaskID  = "duplicate-task-id"
	RuleMissingTaskID    = "missing-task-id"
	RuleUnknownTaskID    = "unknown-task-id"
	RuleTooManyRows      = "too-many-rows"
)

// RolloutSubmissionFile is the manifest at the root of a rollouts submission.
const RolloutSubmissionFile = "submission.json"

// RolloutSubmission is the content of submission.json.
type RolloutSubmission struct {
	// ModelRevision pins the model: "sha256:" followed by 64 lower-case hex
	// digits, or a 40-digit lower-case hex git commit. Branch and tag names
	// are refused because they move.
	ModelRevision string `json:"model_revision"`
	// Rows is the slash-separated path, within the submission, of the rows
	// file (JSON Lines, one Row per line).
	Rows string `json:"rows"`
	// Claims, when set (rollouts submission format 2), is the path of the
	// claims file: one "<task_id>\t<reward_claimed>" line per row, in the
	// rows file's order (ParseClaims). With it, the claimed score and any
	// row are read without decoding every row (OpenIndexedRows).
	Claims string `json:"claims,omitempty"`
}

// RolloutLimits bounds what the rollouts gate reads and reports. A zero
// field takes its default.
type RolloutLimits struct {
	// MaxRowBytes bounds one line of the rows file, line feed excluded
	// (default 64 KiB).
	MaxRowBytes int
	// MaxSubmissionBytes bounds submission.json (default 4 KiB).
	MaxSubmissionBytes int64
	// MaxListedIDs bounds the task ids named in the missing-task-id
	// violation; the count is always given (default 10).
	MaxListedIDs int
	// MaxViolationsPerRule bounds the violations listed per rule; the rest
	// are counted in one summary violation (default 100).
	MaxViolationsPerRule int
	// TokenRows says the task binds rows to a model: every row must be a
	// token row (Row.IsTokens); otherwise every row must be a text row.
	TokenRows bool
}

// DefaultRolloutLimits returns the limits used when a field is zero.
func DefaultRolloutLimits() RolloutLimits {
	return RolloutLimits{MaxRowBytes: 64 << 10, MaxSubmissionBytes: 4 << 10, MaxListedIDs: 10, MaxViolationsPerRule: 100}
}

func (l RolloutLimits) withDefaults() RolloutLimits {
	d := DefaultRolloutLimits()
	if l.MaxRowBytes <= 0 {
		l.MaxRowBytes = d.MaxRowBytes
	}
	if l.MaxSubmissionBytes <= 0 {
		l.MaxSubmissionBytes = d.MaxSubmissionBytes
	}
	if l.MaxListedIDs <= 0 {
		l.MaxListedIDs = d.MaxListedIDs
	}
	if l.MaxViolationsPerRule <= 0 {
		l.MaxViolationsPerRule = d.MaxViolationsPerRule
	}
	return l
}

// ErrTaskIDs reports an unusable task id list handed to Rollouts (empty, or
// holding an empty or repeated id): a caller bug, not a verdict.
var ErrTaskIDs = errors.New("invalid task id list")

// errStopRows ends ReadRows early once the rows file is known to be too long.
var errStopRows = errors.New("stop reading rows")

// PinnedRevision reports whether rev pins a model revision: "sha256:" and 64
// lower-case hex digits, or 40 lower-case hex digits (a git commit).
func PinnedRevision(rev string) bool {
	if h, ok := strings.CutPrefix(rev, "sha256:"); ok {
		return len(h) == 64 && isLowerHex(h)
	}
	return len(rev) == 40 && isLowerHex(rev)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// Rollouts runs the rollouts gate over an unpacked submission tree for a task
// whose rows are identified by taskIDs. The tree must hold submission.json
// and the rows file it names, nothing else; the model revision must be
// pinned; the rows file must hold exactly one valid row per task id (so
// exactly len(taskIDs) rows). The rows file is streamed: memory is bounded by
// one row plus the task id index, whatever the file's size, and reading stops
// at the first row past len(taskIDs). It returns an error only when the tree
// cannot be read or taskIDs is unusable (ErrTaskIDs).
func Rollouts(fsys fs.FS, taskIDs []string, limits RolloutLimits) ([]Violation, error) {
	limits = limits.withDefaults()
	index := make(map[string]int, len(taskIDs))
	for i, id := range taskIDs {
		if id == "" {
			return nil, fmt.Errorf("rollouts gate: %w: empty id at %d", ErrTaskIDs, i)
		}
		if _, dup := index[id]; dup {
			return nil, fmt.Errorf("rollouts gate: %w: %q repeated", ErrTaskIDs, clip(id))
		}
		index[id] = i
	}
	if len(taskIDs) == 0 {
		return nil, fmt.Errorf("rollouts gate: %w: no task ids", ErrTaskIDs)
	}
	t, vs, err := listTree(fsys, 16)
	if err != nil {
		return nil, fmt.Errorf("rollouts gate: %w", err)
	}
	if t.truncated {
		return normalize(vs), nil
	}
	if !t.has(RolloutSubmissionFile) {
		vs = append(vs, Violation{Rule: RuleMissingFile, Path: RolloutSubmissionFile, Detail: "submission.json is missing"})
		return normalize(append(vs, extraFiles(t, RolloutSubmissionFile)...)), nil
	}
	data, err := readLimited(fsys, RolloutSubmissionFile, limits.MaxSubmissionBytes)
	if errors.Is(err, errTooLarge) {
		vs = append(vs, tooLarge(RolloutSubmissionFile, limits.MaxSubmissionBytes))
		return normalize(append(vs, extraFiles(t, RolloutSubmissionFile)...)), nil
	}
	if err != nil {
		return nil, fmt.Errorf("rollouts gate: %w", err)
	}
	var sub RolloutSubmission
	if jerr := decodeStrict(data, &sub); jerr != nil {
		// Without a manifest the layout is unknown: other files are not
		// judged.
		return normalize(append(vs, jsonViolation(RolloutSubmissionFile, jerr))), nil
	}
	vs = append(vs, checkRolloutSubmission(sub)...)
	rowsPath := ""
	if validRowsPath(sub.Rows) {
		rowsPath = sub.Rows
	}
	claimsPath := ""
	if sub.Claims != "" && validClaimsPath(sub.Claims) {
		claimsPath = sub.Claims
	}
	vs = append(vs, extraFiles(t, RolloutSubmissionFile, rowsPath, claimsPath)...)
	if rowsPath == "" || sub.Claims != "" && claimsPath == "" {
		return normalize(vs), nil
	}
	if !t.has(rowsPath) {
		vs = append(vs, Violation{Rule: RuleMissingFile, Path: rowsPath, Detail: "the rows file named by submission.json is missing"})
		return normalize(vs), nil
	}
	if ix, ok := fsys.(RowsIndexed); ok && sub.Claims == "" {
		return normalize(append(vs, checkRowsIndex(fsys, ix, data, rowsPath, taskIDs, limits)...)), nil
	}
	if claimsPath != "" {
		more, err := checkClaims(fsys, t, rowsPath, claimsPath, taskIDs, limits)
		if err != nil {
			return nil, fmt.Errorf("rollouts gate: %w", err)
		}
		return normalize(append(vs, more...)), nil
	}
	more, err := checkRows(fsys, rowsPath, taskIDs, index, limits)
	if err != nil {
		return nil, fmt.Errorf("rollouts gate: %w", err)
	}
	return normalize(append(vs, more...)), nil
}

// ParseRolloutSubmission parses and checks submission.json. It returns the
// parsed manifest (zero when it does not decode) and its violations,
// reported under RolloutSubmissionFile.
func ParseRolloutSubmission(data []byte) (RolloutSubmission, []Violation) {
	var sub RolloutSubmission
	if jerr := decodeStrict(data, &sub); jerr != nil {
		return RolloutSubmission{}, []Violation{jsonViolation(RolloutSubmissionFile, jerr)}
	}
	return sub, checkRolloutSubmission(sub)
}

// jsonViolation turns a strict-JSON failure of file into a violation.
func jsonViolation(file string, jerr *JSONError) Violation {
	rule := RuleJSONSyntax
	if jerr.Schema {
		rule = RuleJSONSchema
	}
	return Violation{Rule: rule, Line: jerr.Line, Path: file, Detail: jerr.Msg}
}

// checkRolloutSubmission checks a decoded manifest.
func checkRolloutSubmission(sub RolloutSubmission) []Violation {
	var vs []Violation
	bad := func(rule, format string, args ...any) {
		vs = append(vs, Violation{Rule: rule, Path: RolloutSubmissionFile, Detail: fmt.Sprintf(format, args...)})
	}
	switch {
	case sub.ModelRevision == "":
		bad(RuleJSONSchema, "model_revision is missing")
	case !PinnedRevision(sub.ModelRevision):
		bad(RuleUnpinnedRevision, "model_revision %q is not sha256:<64 hex> or a 40-hex commit", clip(sub.ModelRevision))
	}
	switch {
	case sub.Rows == "":
		bad(RuleJSONSchema, "rows is missing")
	case !validRowsPath(sub.Rows):
		bad(RuleJSONSchema, "rows %q is not a clean relative path to a .jsonl file", clip(sub.Rows))
	}
	if sub.Claims != "" && !validClaimsPath(sub.Claims) {
		bad(RuleJSONSchema, "claims %q is not a clean relative path to a .tsv file", clip(sub.Claims))
	}
	return vs
}

// validRowsPath accepts a clean, relative, slash-separated path ending in
// ".jsonl" that does not name submission.json.
func validRowsPath(p string) bool {
	return fs.ValidPath(p) && p != "." && strings.HasSuffix(p, ".jsonl") && path.Base(p) != ".jsonl"
}

// extraFiles reports every file and directory of t not in keep (directories
// leading to a kept file are allowed).
func extraFiles(t *tree, keep ...string) []Violation {
	kept := map[string]bool{}
	for _, k := range keep {
		if k == "" {
			continue
		}
		kept[k] = true
		for d := path.Dir(k); d != "."; d = path.Dir(d) {
			kept[d] = true
		}
	}
	var vs []Violation
	for _, d := range t.dirs {
		if !kept[d] {
			vs = append(vs, Violation{Rule: RuleExtraFile, Path: d, Detail: "unexpected directory"})
		}
	}
	for _, f := range t.files {
		if !kept[f.path] {
			vs = append(vs, Violation{Rule: RuleExtraFile, Path: f.path, Detail: "unexpected file"})
		}
	}
	return vs
}

// checkClaims is the gate of a submission with a claims file (format 2): the
// claims must index the rows file exactly (OpenIndexedRows). Rows are not
// decoded here: the audit decodes the rows it samples and checks each against
// its claims line, so a malformed row counts as a wrong claim (PROTOCOL.md).
func checkClaims(fsys fs.FS, t *tree, rowsPath, claimsPath string, taskIDs []string, limits RolloutLimits) ([]Violation, error) {
	if !t.has(claimsPath) {
		return []Violation{{Rule: RuleMissingFile, Path: claimsPath, Detail: "the claims file named by submission.json is missing"}}, nil
	}
	maxRows := int64(len(taskIDs)) * int64(limits.MaxRowBytes+1)
	rows, err := readLimited(fsys, rowsPath, maxRows)
	if errors.Is(err, errTooLarge) {
		return []Violation{tooLarge(rowsPath, maxRows)}, nil
	}
	if err != nil {
		return nil, err
	}
	maxClaims := int64(len(taskIDs)) * maxClaimLineBytes
	claims, err := readLimited(fsys, claimsPath, maxClaims)
	if errors.Is(err, errTooLarge) {
		return []Violation{tooLarge(claimsPath, maxClaims)}, nil
	}
	if err != nil {
		return nil, err
	}
	_, vs := OpenIndexedRows(rows, claims, rowsPath, claimsPath, taskIDs, limits)
	return vs, nil
}

// checkRows streams the rows file and checks task id coverage.
func checkRows(fsys fs.FS, rowsPath string, taskIDs []string, index map[string]int, limits RolloutLimits) ([]Violation, error) {
	f, err := fsys.Open(rowsPath)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", rowsPath, err)
	}
	defer f.Close()
	c := newCapped(rowsPath, limits.MaxViolationsPerRule)
	seenAt := make([]int, len(taskIDs)) // line where each task id was first seen, 0 if never
	err = ScanRows(f, limits, func(line int, row Row, rerr *RowError) error {
		switch {
		case rerr != nil:
			c.add(rerr.Rule, line, "%s", rerr.Detail)
		case row.IsTokens() != limits.TokenRows:
			if limits.TokenRows {
				c.add(RuleRowSchema, line, "this task binds rows to a model: a row has prompt_tokens and completion_tokens, not a response")
			} else {
				c.add(RuleRowSchema, line, "this task takes text rows: a row has a response, not prompt_tokens and completion_tokens")
			}
		default:
			i, ok := index[row.TaskID]
			switch {
			case !ok:
				c.add(RuleUnknownTaskID, line, "task id %q is not in the task", clip(row.TaskID))
			case seenAt[i] != 0:
				c.add(RuleDuplicateTaskID, line, "task id %q already on line %d", clip(row.TaskID), seenAt[i])
			default:
				seenAt[i] = line
			}
		}
		if line > len(taskIDs) {
			c.add(RuleTooManyRows, line, "more than %d rows (the task has %d task ids); reading stopped here", len(taskIDs), len(taskIDs))
			return errStopRows
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopRows) {
		return nil, err
	}
	var missing []string
	count := 0
	for i, at := range seenAt {
		if at == 0 {
			count++
			if len(missing) < limits.MaxListedIDs {
				missing = append(missing, fmt.Sprintf("%q", clip(taskIDs[i])))
			}
		}
	}
	vs := c.result()
	if count > 0 {
		more := ""
		if count > len(missing) {
			more = fmt.Sprintf(" and %d more", count-len(missing))
		}
		vs = append(vs, Violation{Rule: RuleMissingTaskID, Path: rowsPath,
			Detail: fmt.Sprintf("%d task ids have no row: %s%s", count, strings.Join(missing, ", "), more)})
	}
	return vs, nil
}

// clip shortens untrusted strings quoted in details.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && s[cut]&0xc0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}
