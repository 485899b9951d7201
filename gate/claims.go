package gate

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"
)

// Rules of the claims file (rollouts submission format 2, docs/FORMAT.md).
const (
	// RuleClaimsSyntax: the claims file, or the line structure of the rows
	// file it indexes, is malformed.
	RuleClaimsSyntax = "claims-syntax"
	// RuleClaimsMismatch: a row's own task_id or reward_claimed differs from
	// its line of the claims file (found when the row is read).
	RuleClaimsMismatch = "claims-mismatch"
)

// maxClaimIDBytes bounds a task id in the claims file.
const maxClaimIDBytes = 1024

// maxClaimLineBytes bounds one claims line: an id, a tab, a reward "p/q" of
// at most 64+1+64 characters and the line feed.
const maxClaimLineBytes = maxClaimIDBytes + 1 + 2*maxRewardDigits + 1 + 1

// Claim is one line of a claims file: the task id of the row on the same
// line of the rows file and the reward that row claims, spelt as in the row.
type Claim struct {
	TaskID string
	Reward string
}

// ParseClaims parses a claims file: one line per row of the rows file, in
// the same order, each "<task_id>\t<reward_claimed>\n". Every line, the last
// included, ends with a line feed; a task id is 1 to 1024 bytes of UTF-8
// without control characters (U+0000-U+001F, U+007F); the reward is
// canonical (ParseReward). On failure it returns the 1-based line and why.
func ParseClaims(data []byte) ([]Claim, int, error) {
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return nil, bytes.Count(data, []byte{'\n'}) + 1, fmt.Errorf("the last line does not end with a line feed")
	}
	claims := make([]Claim, 0, bytes.Count(data, []byte{'\n'}))
	for line := 1; len(data) > 0; line++ {
		nl := bytes.IndexByte(data, '\n')
		l := data[:nl]
		data = data[nl+1:]
		tab := bytes.IndexByte(l, '\t')
		if tab < 0 {
			return nil, line, fmt.Errorf("no tab between task id and reward")
		}
		id, reward := l[:tab], l[tab+1:]
		switch {
		case len(id) == 0 || len(id) > maxClaimIDBytes:
			return nil, line, fmt.Errorf("task id of %d bytes (1 to %d)", len(id), maxClaimIDBytes)
		case !utf8.Valid(id) || hasControl(id):
			return nil, line, fmt.Errorf("task id is not UTF-8 without control characters")
		}
		if _, err := ParseReward(string(reward)); err != nil {
			return nil, line, err
		}
		claims = append(claims, Claim{TaskID: string(id), Reward: string(reward)})
	}
	return claims, 0, nil
}

func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// validClaimsPath accepts a clean, relative, slash-separated path ending in
// ".tsv".
func validClaimsPath(p string) bool {
	return fs.ValidPath(p) && p != "." && strings.HasSuffix(p, ".tsv") && path.Base(p) != ".tsv"
}

// IndexedRows is a rows file read through its claims file: the claimed score
// comes from the claims column and any row is found by task id and parsed
// alone. Nothing in it is trusted: OpenIndexedRows checks the claims against
// the task ids and the line structure of the rows file, and Row checks each
// row it returns against its claims line.
type IndexedRows struct {
	Claims []Claim
	rows   []byte
	starts []int // starts[i] is the offset of line i; starts[len] = len(rows)
	index  map[string]int
}

// OpenIndexedRows checks a claims file against the rows file it indexes and
// the task: the claims must parse (ParseClaims), name every task id exactly
// once and nothing else, and have as many lines as the rows file; every row
// line must end with a line feed and be at most limits.MaxRowBytes long. It
// does not decode rows. Violations are reported under claimsPath or
// rowsPath; none means the returned value is usable.
func OpenIndexedRows(rows, claims []byte, rowsPath, claimsPath string, taskIDs []string, limits RolloutLimits) (*IndexedRows, []Violation) {
	limits = limits.withDefaults()
	cs, line, err := ParseClaims(claims)
	if err != nil {
		return nil, []Violation{{Rule: RuleClaimsSyntax, Path: claimsPath, Line: line, Detail: err.Error()}}
	}
	c := newCapped(rowsPath, limits.MaxViolationsPerRule)
	starts := make([]int, 0, len(cs)+1)
	for off, n := 0, 1; off < len(rows); n++ {
		starts = append(starts, off)
		nl := bytes.IndexByte(rows[off:], '\n')
		if nl < 0 {
			c.add(RuleClaimsSyntax, n, "with a claims file every row ends with a line feed")
			break
		}
		if nl > limits.MaxRowBytes {
			c.add(RuleRowTooLarge, n, "longer than %d bytes", limits.MaxRowBytes)
		}
		off += nl + 1
	}
	starts = append(starts, len(rows))
	if vs := c.result(); len(vs) > 0 {
		return nil, vs
	}
	if n := len(starts) - 1; n != len(cs) {
		return nil, []Violation{{Rule: RuleClaimsSyntax, Path: claimsPath,
			Detail: fmt.Sprintf("%d claims lines for %d rows", len(cs), n)}}
	}
	known := make(map[string]bool, len(taskIDs))
	for _, id := range taskIDs {
		known[id] = true
	}
	cc := newCapped(claimsPath, limits.MaxViolationsPerRule)
	index := make(map[string]int, len(cs))
	for i, cl := range cs {
		switch j, dup := index[cl.TaskID]; {
		case !known[cl.TaskID]:
			cc.add(RuleUnknownTaskID, i+1, "task id %q is not in the task", clip(cl.TaskID))
		case dup:
			cc.add(RuleDuplicateTaskID, i+1, "task id %q already on line %d", clip(cl.TaskID), j+1)
		default:
			index[cl.TaskID] = i
		}
	}
	vs := cc.result()
	if len(index) < len(taskIDs) {
		vs = append(vs, Violation{Rule: RuleMissingTaskID, Path: claimsPath,
			Detail: fmt.Sprintf("%d task ids have no claim", len(taskIDs)-len(index))})
	}
	if len(vs) > 0 {
		return nil, vs
	}
	return &IndexedRows{Claims: cs, rows: rows, starts: starts, index: index}, nil
}

// Len is the number of rows.
func (x *IndexedRows) Len() int { return len(x.Claims) }

// Row returns the row for a task id and its claim. The row is parsed alone
// (ParseRow) and must repeat its claims line: the same task_id and the same
// reward_claimed, else a RuleClaimsMismatch error. ok is false for an id the
// claims do not name.
func (x *IndexedRows) Row(taskID string) (row Row, claim Claim, rerr *RowError, ok bool) {
	i, ok := x.index[taskID]
	if !ok {
		return Row{}, Claim{}, nil, false
	}
	claim = x.Claims[i]
	row, rerr = ParseRow(x.rows[x.starts[i] : x.starts[i+1]-1])
	switch {
	case rerr != nil:
	case row.TaskID != claim.TaskID || row.RewardClaimed != claim.Reward:
		rerr = &RowError{Rule: RuleClaimsMismatch, Detail: fmt.Sprintf("the row says task %q reward %q, its claims line task %q reward %q",
			clip(row.TaskID), clip(row.RewardClaimed), clip(claim.TaskID), claim.Reward)}
	}
	if rerr != nil {
		rerr.Line = i + 1
		return Row{}, claim, rerr, true
	}
	return row, claim, nil, true
}
